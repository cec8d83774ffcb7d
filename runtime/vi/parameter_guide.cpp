// The density over a model's learned parameters: see parameter_guide.h.
#include "vi/parameter_guide.h"
#include "core/error.h"
#include "flows/dif.h"
#include "flows/gaussian.h"
#include "flows/gmm.h"
#include "nn/tensor_values.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

namespace ssm {

namespace {

// value_and_gradient's autograd function: `evaluate` computes the values and their gradients at
// once, and backward hands the gradients on.
struct ValueAndGradientFunction : torch::autograd::Function<ValueAndGradientFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u,
                               const BatchEvaluation* evaluate) {
    const torch::Tensor points = u.detach().to(torch::kFloat64).contiguous();
    const int64_t m = points.size(0);
    auto values = torch::empty({m}, torch::kFloat64);
    auto gradients = torch::zeros_like(points);
    (*evaluate)(m, points.data_ptr<double>(), values.data_ptr<double>(),
                gradients.data_ptr<double>());
    ctx->save_for_backward({gradients});
    return values;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grad_output) {
    return {grad_output[0].unsqueeze(1) * ctx->get_saved_variables()[0], torch::Tensor()};
  }
};

} // namespace

void describe_parameters(ParameterVariationalFit& fit, const ModelInfo& info,
                         const ParameterSpace& space, bool model_priors) {
  for (const LearnedParam& p : space.learned())
    fit.learned.push_back(info.params[p.index].name);
  fit.coordinates = space.coordinate_names();
  for (const ParamInfo& p : info.params)
    if (model_priors && !p.prior.empty() && !space.find(p.name))
      fit.warnings.push_back(fmt::format("--fix {}: its prior density at its value is a factor of "
                                         "the target, so the ELBO and log_evidence estimate log "
                                         "p(y, {}) rather than log p(y)",
                                         p.name, p.name));
}

flows::DensitySpec parameter_family_spec(const ParameterVariationalOptions& o, int64_t dim) {
  flows::DensitySpec spec;
  spec.dim = dim;
  spec.hidden = o.hidden;
  spec.layers = o.layers;
  spec.single = o.single;
  if (o.family == "meanfield" || o.family == "fullrank") {
    spec.kind = "gaussian";
    spec.covariance = o.family == "meanfield" ? "diagonal" : "full";
  } else if (o.family == "gmm") {
    spec.kind = "gmm";
    spec.components = o.components;
  } else if (o.family == "dif") {
    spec.kind = "dif";
    spec.components = o.components;
    spec.maps = o.maps;
    if (o.maps != "affine" && dim < 2)
      throw Error(fmt::format("vi: --maps {} over one learned parameter: a flow layer over one "
                              "dimension is an affine map of the component, which the dif's "
                              "location-scale maps already are; use --maps affine",
                              o.maps));
  } else if (o.family == "maf" || o.family == "realnvp") {
    spec.kind = o.family;
  } else {
    throw Error(fmt::format("vi: no family '{}' for the parameters (expected {})", o.family,
                            fmt::join(kParameterFamilies, ", ")));
  }
  if (o.base != "none") { // methods.cpp checked the family is dif, maf or realnvp
    if (o.base == "realnvp" && dim < 2)
      throw Error("vi: --base realnvp over one learned parameter: coupling layers split the "
                  "coordinates in two, so they need at least two");
    auto base = std::make_shared<flows::DensitySpec>(spec);
    base->kind = o.base;
    base->maps = "affine";
    base->components = o.components;
    spec.base = std::move(base);
  }
  return spec;
}

flows::DensityModel make_parameter_guide(const ParameterVariationalOptions& o,
                                         const std::vector<std::string>& coordinates,
                                         const std::vector<double>& start) {
  const auto d = static_cast<int64_t>(coordinates.size());
  const flows::DensitySpec spec = parameter_family_spec(o, d);
  if (!o.load_guide.empty()) {
    flows::DensityModel q = flows::load_density_model(o.load_guide);
    if (q.columns != coordinates)
      throw Error(fmt::format("vi: --load-guide {}: its coordinates are {}, and the learned "
                              "parameters' are {}",
                              o.load_guide, fmt::join(q.columns, ", "),
                              fmt::join(coordinates, ", ")));
    if (flows::describe(q.density->spec()) != flows::describe(spec))
      throw Error(fmt::format("vi: --load-guide {} holds a {}, and --method {} with these options "
                              "is a {}",
                              o.load_guide, flows::describe(q.density->spec()), o.family,
                              flows::describe(spec)));
    return q;
  }
  flows::DensityModel q;
  q.columns = coordinates;
  q.shift = torch::tensor(start, torch::kFloat64);
  q.scale = torch::ones({d}, torch::kFloat64);
  q.density = flows::make_density(spec);
  return q;
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>>
parameter_groups(flows::DensityImpl& density) {
  std::vector<torch::Tensor> own;
  for (const auto& m : density.modules(/*include_self=*/true)) {
    if (dynamic_cast<flows::GaussianMixtureImpl*>(m.get()) ||
        dynamic_cast<flows::GaussianImpl*>(m.get()))
      for (const torch::Tensor& p : m->parameters(false))
        own.push_back(p);
    if (auto* dif = dynamic_cast<flows::DifImpl*>(m.get())) {
      own.push_back(dif->means);
      own.push_back(dif->log_scales);
    }
  }
  std::vector<torch::Tensor> nets;
  for (const torch::Tensor& p : density.parameters())
    if (std::none_of(own.begin(), own.end(), [&](const torch::Tensor& o) { return o.is_same(p); }))
      nets.push_back(p);
  return {own, nets};
}

torch::Tensor value_and_gradient(const torch::Tensor& u, const BatchEvaluation& evaluate) {
  return ValueAndGradientFunction::apply(u, &evaluate);
}

torch::Tensor log_prior(const torch::Tensor& u, const LogPrior& prior) {
  const int64_t d = u.size(1);
  return value_and_gradient(u, [&](int64_t m, const double* points, double* values,
                                   double* gradients) {
    for (int64_t i = 0; i < m; ++i) {
      double* g = gradients + i * d;
      double value = -std::numeric_limits<double>::infinity();
      try {
        value = prior.evaluate({points + i * d, static_cast<size_t>(d)}, g);
      } catch (const std::exception&) { // θ(u) overflows: -inf (std::exception: as in
                                        // log_posterior.cpp, ssm::Error is the executable's type)
      }
      if (!std::isfinite(value))
        std::fill(g, g + d, 0.0);
      values[i] = value;
    }
  });
}

ParameterPrior::ParameterPrior(const std::string& path, const std::vector<std::string>& coordinates,
                               const std::string& who) {
  flows::DensityModel q = flows::load_density_model(path);
  if (!q.context_columns.empty())
    throw Error(fmt::format("{}: --prior {}: a conditional density (its context {}); a prior "
                            "has no context",
                            who, path, fmt::join(q.context_columns, ", ")));
  std::vector<std::string> sorted_file = q.columns, sorted_ours = coordinates;
  std::sort(sorted_file.begin(), sorted_file.end());
  std::sort(sorted_ours.begin(), sorted_ours.end());
  if (sorted_file != sorted_ours)
    throw Error(fmt::format("{}: --prior {}: its columns are {}, and the learned parameters' "
                            "unconstrained coordinates are {}",
                            who, path, fmt::join(q.columns, ", "), fmt::join(coordinates, ", ")));
  // The file's column k is u's column order[k]: the file's point is u.index_select(1, order).
  std::vector<int64_t> order(q.columns.size());
  for (size_t k = 0; k < q.columns.size(); ++k)
    order[k] =
        std::find(coordinates.begin(), coordinates.end(), q.columns[k]) - coordinates.begin();
  order_ = torch::tensor(order, torch::kInt64);
  for (torch::Tensor p : q.density->parameters())
    p.set_requires_grad(false);
  density_ = std::move(q);
}

torch::Tensor ParameterPrior::operator()(const torch::Tensor& u) const {
  if (!density_)
    return log_prior(u, *model_);
  return density_->log_prob(u.index_select(1, order_)).to(torch::kFloat64);
}

double ParameterPrior::value(std::span<const double> u) const {
  if (!density_) {
    try {
      return model_->evaluate(u, nullptr);
    } catch (const std::exception&) { // θ(u) overflows (as log_prior)
      return -std::numeric_limits<double>::infinity();
    }
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor point =
      torch::tensor(std::vector<double>(u.begin(), u.end()), torch::kFloat64).unsqueeze(0);
  return (*this)(point).item<double>();
}

torch::Tensor ParameterPrior::sample(int64_t n) const {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = density_->sample(n).to(torch::kFloat64); // the file's column order
  return torch::empty_like(x).index_copy_(1, order_, x);
}

namespace {

class FilePrior final : public PriorDensity {
public:
  // The density is evaluated once here, at u = 0 with its gradient, so that a file LibTorch
  // cannot evaluate fails now, with LibTorch's message, not as a point of density 0 later.
  FilePrior(const std::string& path, const std::vector<std::string>& coordinates,
            const std::string& who)
      : prior_(path, coordinates, who), path_(path) {
    const torch::Tensor origin =
        torch::zeros({1, static_cast<int64_t>(coordinates.size())}, torch::kFloat64)
            .set_requires_grad(true);
    const torch::Tensor value = prior_(origin).sum();
    torch::autograd::grad({value}, {origin});
  }

  // Errors stay on this side of the module's boundary: a point the density cannot evaluate is
  // a point of density 0.
  double log_density(std::span<const double> u, double* gradient) const override {
    try {
      if (!gradient)
        return prior_.value(u);
      const torch::Tensor point =
          torch::tensor(std::vector<double>(u.begin(), u.end()), torch::kFloat64)
              .unsqueeze(0)
              .set_requires_grad(true);
      const torch::Tensor value = prior_(point).sum();
      const double v = value.item<double>();
      std::fill(gradient, gradient + u.size(), 0.0);
      if (!std::isfinite(v))
        return v;
      const torch::Tensor g = torch::autograd::grad({value}, {point})[0].contiguous();
      std::copy_n(g.data_ptr<double>(), u.size(), gradient);
      return v;
    } catch (const std::exception&) {
      if (gradient)
        std::fill(gradient, gradient + u.size(), 0.0);
      return -std::numeric_limits<double>::infinity();
    }
  }

  // Under a lock: the draws come from torch's default generator, seeded here.
  std::vector<double> sample(int64_t n, uint64_t seed, std::string& error) const override {
    static std::mutex mutex;
    std::lock_guard lock(mutex);
    try {
      torch::manual_seed(seed);
      return nn::to_vector(prior_.sample(n));
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = e.what();
    }
    return {};
  }

  const std::string& path() const override { return path_; }

private:
  ParameterPrior prior_;
  std::string path_;
};

} // namespace

std::unique_ptr<PriorDensity> load_prior_density(const std::string& path,
                                                 const std::vector<std::string>& coordinates,
                                                 const std::string& who) {
  return std::make_unique<FilePrior>(path, coordinates, who);
}

void record_parameter_draws(
    ParameterVariationalFit& fit, const torch::Tensor& u, const torch::Tensor& log_q,
    const torch::Tensor& log_p,
    const std::function<std::vector<double>(std::span<const double>)>& theta, int64_t n_theta) {
  const torch::Tensor lq = log_q.detach().to(torch::kFloat64).contiguous();
  const torch::Tensor lp = log_p.detach().to(torch::kFloat64).contiguous();
  const int64_t n = u.size(0);
  fit.log_q.assign(lq.data_ptr<double>(), lq.data_ptr<double>() + n);
  fit.log_p.assign(lp.data_ptr<double>(), lp.data_ptr<double>() + n);
  // A draw whose parameters overflow (far out on a log or logit scale) is a row of NaN, as its
  // log_p is -inf: the warning below counts both.
  const auto theta_at = [&](const std::vector<double>& point) {
    try {
      return theta(point);
    } catch (const std::exception&) {
      return std::vector<double>(static_cast<size_t>(n_theta), NAN);
    }
  };
  fit.theta.clear();
  for (int64_t i = 0; i < n; ++i)
    fit.theta.push_back(theta_at(nn::to_vector(u[i])));
  fit.mean_theta = theta_at(nn::to_vector(u.mean(0)));
  const auto bad =
      std::count_if(fit.log_p.begin(), fit.log_p.end(), [](double v) { return !std::isfinite(v); });
  if (bad > 0)
    fit.warnings.push_back(fmt::format("the log posterior is not finite at {} of the {} draws "
                                       "(parameters that overflow, or a likelihood that fails)",
                                       bad, n));
}

} // namespace ssm
