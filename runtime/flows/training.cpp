// Fitting densities to data: EM for mixtures, maximum likelihood and GEM for flows and DIFs. See
// training.h.
#include "flows/training.h"

#include "core/error.h"
#include "flows/dif.h"
#include "flows/energy.h"
#include "flows/flows.h"
#include "flows/gmm.h"
#include "flows/scale_watch.h"

#include <fmt/format.h>

#include <cmath>

namespace ssm::flows {

namespace {

// Rows per evaluation chunk, times a DIF's components: bounds the memory of the weight network's
// activations on n·K points.
constexpr int64_t kChunkPoints = 1 << 16;

// Rows of data with their context (undefined for an unconditional density), selected together.
struct Rows {
  torch::Tensor x, context;
  int64_t size() const { return x.size(0); }
  Rows slice(int64_t begin, int64_t end) const {
    return {x.slice(0, begin, end), context.defined() ? context.slice(0, begin, end) : context};
  }
  Rows select(const torch::Tensor& index) const {
    return {x.index_select(0, index), context.defined() ? context.index_select(0, index) : context};
  }
  torch::Tensor log_prob(DensityImpl& density) const { return density.log_prob(x, context); }
};

std::vector<torch::Tensor> snapshot(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> state;
  for (auto& p : module.parameters())
    state.push_back(p.detach().clone());
  return state;
}

void restore(torch::nn::Module& module, const std::vector<torch::Tensor>& state) {
  torch::NoGradGuard no_grad;
  auto params = module.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    params[i].copy_(state[i]);
}

// Warns of the DIF components newly collapsed after Adam step `step` of epoch `epoch`, or (step
// < 0) after GEM iteration `epoch` (flows/scale_watch.h). Not at the start: EM's variance floor
// leaves a component it collapsed at the threshold itself, so the first step decides.
void warn_collapses(ScaleWatch& watch, const DensityImpl& density, const FitOptions& options,
                    int64_t step, int64_t epoch) {
  for (const Collapse& c : watch.check(density))
    if (options.warn)
      options.warn(collapse_warning("", c,
                                    step < 0 ? fmt::format("GEM iteration {}", epoch)
                                             : fmt::format("step {} (epoch {})", step, epoch),
                                    "fewer --components, or a smaller --lr"));
}

// Early stopping: after each epoch, records the epoch's scores and keeps the weights of the best
// validation score; says when to stop (`patience` epochs without a better one, given held-out
// rows). restore() puts the best weights back.
class BestEpoch {
public:
  BestEpoch(torch::nn::Module& module, const FitOptions& options, bool held_out)
      : module_(module), options_(options), held_out_(held_out), state_(snapshot(module)) {}
  bool stop_after(int64_t epoch, double train, double score, FitReport& report) {
    report.epochs = epoch;
    report.train_trace.push_back(train);
    report.validation_trace.push_back(score);
    if (options_.progress)
      options_.progress(epoch, options_.epochs, train, score);
    if (score > best_) {
      best_ = score;
      state_ = snapshot(module_);
      report.best_epoch = epoch;
      since_best_ = 0;
    } else if (++since_best_ >= options_.patience && held_out_) {
      report.stopped_early = true;
      return true;
    }
    return false;
  }
  void restore_best() { restore(module_, state_); }

private:
  torch::nn::Module& module_;
  const FitOptions& options_;
  bool held_out_;
  std::vector<torch::Tensor> state_;
  double best_ = -INFINITY;
  int64_t since_best_ = 0;
};

double mean_log_prob_standardised(DensityImpl& density, const Rows& data) {
  torch::NoGradGuard no_grad;
  double total = 0;
  const int64_t rows = evaluation_rows(density);
  for (int64_t start = 0; start < data.size(); start += rows)
    total += data.slice(start, start + rows).log_prob(density).sum().item<double>();
  return total / double(data.size());
}

void require_finite(double value, const std::string& where) {
  if (!std::isfinite(value))
    throw Error(fmt::format("training: the log-likelihood is not finite at {} (try a smaller "
                            "--lr, or check the data's scale)",
                            where));
}

// Maximum likelihood by Adam on minibatches, keeping the weights of the best validation score.
void fit_maximum_likelihood(DensityImpl& density, const Rows& train, const Rows& validation,
                            const FitOptions& options, FitReport& report) {
  torch::optim::Adam adam(density.parameters(), torch::optim::AdamOptions(options.learning_rate));
  ScaleWatch watch(false);
  const int64_t n = train.size(), batch = std::max<int64_t>(1, options.batch_size);
  int64_t steps = 0;
  BestEpoch best(density, options, validation.size() > 0);
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    auto order = torch::randperm(n, torch::kInt64);
    double total = 0;
    for (int64_t start = 0, b = 1; start < n; start += batch, ++b) {
      auto rows = train.select(order.slice(0, start, start + batch));
      auto loss = -rows.log_prob(density).mean();
      const double value = loss.item<double>();
      require_finite(value, fmt::format("epoch {}, batch {}", epoch, b));
      adam.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(density.parameters(), options.clip);
      adam.step();
      warn_collapses(watch, density, options, ++steps, epoch);
      total -= value * double(rows.size());
    }
    const double score =
        validation.size() ? mean_log_prob_standardised(density, validation) : total / double(n);
    if (best.stop_after(epoch, total / double(n), score, report))
      break;
  }
  best.restore_best();
}

// GEM (4.79) for the outermost DIF: the E-step freezes the responsibilities v_k(x_i) at θ_t; the
// M-step takes `gem_steps` Adam steps on the surrogate g(θ) = mean_i Σ_k v_ik log(h_k(x_i) / v_ik)
// over the whole training set (gradients accumulated over chunks), and is kept only when g rose,
// else undone with the step size halved. g(θ_t) is the log-likelihood at θ_t and a lower bound of
// it everywhere, so the log-likelihood never decreases.
void fit_gem(DifImpl& dif, const Rows& train, const Rows& validation, const FitOptions& options,
             FitReport& report) {
  torch::optim::Adam adam(dif.parameters(), torch::optim::AdamOptions(options.learning_rate));
  ScaleWatch watch(false);
  const int64_t n = train.size(), rows = evaluation_rows(dif);
  auto surrogate = [&](const torch::Tensor& v, bool backward) {
    double total = 0;
    for (int64_t start = 0; start < n; start += rows) {
      auto chunk = train.slice(start, start + rows);
      auto vk = v.slice(0, start, start + rows);
      auto terms = dif.component_terms(chunk.x, chunk.context);
      auto g = (vk * (terms - torch::log(vk.clamp_min(1e-300)))).sum();
      if (backward)
        (-g / double(n)).backward();
      total += g.item<double>();
    }
    return total / double(n);
  };
  double lr = options.learning_rate;
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    torch::Tensor v;
    {
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> parts;
      for (int64_t start = 0; start < n; start += rows) {
        auto chunk = train.slice(start, start + rows);
        parts.push_back(torch::softmax(dif.component_terms(chunk.x, chunk.context), 1));
      }
      v = torch::cat(parts);
    }
    const double before = [&] {
      torch::NoGradGuard no_grad;
      return surrogate(v, false);
    }();
    require_finite(before, fmt::format("GEM iteration {}", epoch));
    auto state = snapshot(dif);
    for (int64_t s = 0; s < options.gem_steps; ++s) {
      adam.zero_grad();
      surrogate(v, true);
      torch::nn::utils::clip_grad_norm_(dif.parameters(), options.clip);
      adam.step();
    }
    const double after = [&] {
      torch::NoGradGuard no_grad;
      return surrogate(v, false);
    }();
    if (!(after >= before)) { // not an ascent (or not finite): undo, with smaller steps
      restore(dif, state);
      lr /= 2;
      for (auto& group : adam.param_groups())
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    }
    report.epochs = epoch;
    report.best_epoch = epoch;
    report.train_trace.push_back(mean_log_prob_standardised(dif, train));
    warn_collapses(watch, dif, options, -1, epoch);
    const double score =
        validation.size() ? mean_log_prob_standardised(dif, validation) : report.train_trace.back();
    report.validation_trace.push_back(score);
    if (options.progress)
      options.progress(epoch, options.epochs, report.train_trace.back(), score);
  }
}

// The energy model (Argouarc'h 2024, 2.1.4): p0 the Gaussian with the training rows' mean and
// covariance; the classifier trained by Adam on the binary cross-entropy of data rows (label 1)
// against as many fresh draws of p0 (label 0) per minibatch; the weights kept those of the best
// held-out log-likelihood, log p0 + logit r - log Z with Z estimated from a fixed pool of p0
// draws; then Z from 2^18 draws, and accept-reject's bound from the training rows.
void fit_classifier(EnergyImpl& energy, const Rows& train, const Rows& validation,
                    const FitOptions& options, FitReport& report) {
  const int64_t n = train.size(), d = energy.dim();
  auto centred = train.x - train.x.mean(0);
  auto cov = centred.t().mm(centred) / double(n) +
             1e-9 * torch::eye(d, torch::TensorOptions().dtype(torch::kFloat64));
  energy.set_instrumental(train.x.mean(0), cov);
  torch::optim::Adam adam(energy.parameters(), torch::optim::AdamOptions(options.learning_rate));
  const Rows& held_out = validation.size() ? validation : train;
  const Rows seen = train.slice(0, std::min<int64_t>(n, 4096)); // the training score's rows
  const torch::Tensor pool = energy.instrumental_sample(int64_t(1) << 16); // fixed: Z per epoch
  auto mean_log_p = [&](const Rows& rows, double log_z) {
    return mean_log_prob_standardised(energy, rows) - log_z +
           energy.log_normaliser(); // log_prob subtracts the stored log Z
  };
  const int64_t batch = std::max<int64_t>(1, options.batch_size);
  BestEpoch best(energy, options, validation.size() > 0);
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    auto order = torch::randperm(n, torch::kInt64);
    for (int64_t start = 0, b = 1; start < n; start += batch, ++b) {
      auto rows = train.select(order.slice(0, start, start + batch));
      auto data = energy.logit(rows.x);
      auto instrumental = energy.logit(energy.instrumental_sample(rows.size()));
      auto loss = 0.5 * (torch::binary_cross_entropy_with_logits(data, torch::ones_like(data)) +
                         torch::binary_cross_entropy_with_logits(instrumental,
                                                                 torch::zeros_like(instrumental)));
      if (!std::isfinite(loss.item<double>()))
        throw Error(fmt::format("training: the classifier's loss is not finite at epoch {}, "
                                "batch {} (try a smaller --lr)",
                                epoch, b));
      adam.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(energy.parameters(), options.clip);
      adam.step();
    }
    const double log_z = energy.log_mean_odds(pool);
    if (best.stop_after(epoch, mean_log_p(seen, log_z), mean_log_p(held_out, log_z), report))
      break;
  }
  best.restore_best();
  energy.estimate_normaliser(int64_t(1) << 18);
  energy.set_bound(train.x);
}

} // namespace

int64_t evaluation_rows(const DensityImpl& density) {
  int64_t points = 1;
  for (const DensitySpec* s = &density.spec(); s; s = s->base.get())
    points *= s->kind == "dif"   ? s->components
              : s->kind == "gmm" ? s->components * s->dim // its [K, d, n] intermediates
                                 : 1;
  return std::max<int64_t>(1, kChunkPoints / points);
}

double mean_log_prob(const DensityModel& model, const torch::Tensor& x,
                     const torch::Tensor& context) {
  Rows rows{(x - model.shift) / model.scale, model.standardised_context(context)};
  return mean_log_prob_standardised(*model.density, rows) -
         torch::log(model.scale).sum().item<double>();
}

FitReport fit_density(DensityModel& model, const torch::Tensor& x, const torch::Tensor& context,
                      const FitOptions& options) {
  torch::manual_seed(options.seed);
  DensityImpl& density = *model.density;
  const std::string kind = density.spec().kind;
  if (options.method == "gem" && kind != "dif")
    throw Error(fmt::format("--method gem fits a dif; a {} is fitted by {}", kind,
                            kind == "gmm" ? "em" : "ml"));
  if (options.method == "ml" && kind == "gmm")
    throw Error("--method ml fits a flow or a dif; a gmm is fitted by em");
  if ((options.method == "classify") != (kind == "energy"))
    throw Error(kind == "energy" ? "an energy model is fitted by classify (its classifier)"
                                 : "--method classify fits an energy model");
  if (options.method == "em" && kind != "gmm")
    throw Error(fmt::format("--method em fits a gmm; a {} is fitted by ml{}", kind,
                            kind == "dif" ? " or gem" : ""));
  const int64_t n = x.size(0);
  const bool iterative = kind != "gmm" && kind != "normal" && options.method != "gem";
  int64_t n_validation = iterative ? int64_t(std::floor(options.validation * double(n))) : 0;
  if (n - n_validation < 2)
    throw Error(fmt::format("the data has {} rows; fitting a density needs at least 2 for "
                            "training{}",
                            n, n_validation ? " after the validation split" : ""));
  if (context.defined() != (density.spec().context > 0))
    throw Error(context.defined() ? "a context for an unconditional density"
                                  : "a conditional density fitted without its context");
  auto order = torch::randperm(n, torch::kInt64);
  const Rows all{x, context};
  const Rows train = all.select(order.slice(0, n_validation));
  const Rows validation = all.select(order.slice(0, 0, n_validation));

  // Each column's mean and standard deviation on the training rows; a constant one is an error.
  auto standardisation = [&](const torch::Tensor& t, const std::vector<std::string>& names,
                             torch::Tensor& shift, torch::Tensor& scale) {
    shift = t.mean(0);
    scale = t.std(0, /*unbiased=*/false);
    for (int64_t j = 0; j < scale.numel(); ++j)
      if (!(scale[j].item<double>() > 0))
        throw Error(fmt::format("column '{}' is constant in the data: it has no density (drop it)",
                                j < int64_t(names.size()) ? names[size_t(j)] : std::to_string(j)));
  };
  standardisation(train.x, model.columns, model.shift, model.scale);
  if (context.defined())
    standardisation(train.context, model.context_columns, model.context_shift, model.context_scale);
  auto standardise = [&](const Rows& r) {
    return Rows{(r.x - model.shift) / model.scale, model.standardised_context(r.context)};
  };
  const Rows train_s = standardise(train), validation_s = standardise(validation);

  FitReport report;
  report.train_rows = train.size();
  report.validation_rows = validation.size();
  if (auto* gmm = dynamic_cast<GaussianMixtureImpl*>(&density)) {
    auto em = fit_gmm_em(*gmm, train_s.x, options.em_iterations);
    report.epochs = report.best_epoch = em.iterations;
    report.train_trace = em.trace;
  } else if (kind != "normal") {
    auto* dif = dynamic_cast<DifImpl*>(&density);
    // The mixture is the DIF's density only over a base that is N(0, I) or a fresh flow (the
    // identity): a DIF over a DIF starts from its random inner components instead.
    DensityImpl* below = dif ? &dif->base() : nullptr;
    while (auto* flow = dynamic_cast<FlowImpl*>(below)) // flows start as the identity
      below = &flow->base();
    const bool over_dif = dynamic_cast<DifImpl*>(below) != nullptr;
    if (dif && options.init_from_mixture && !over_dif) {
      DensitySpec mixture_spec = dif->spec();
      mixture_spec.kind = "gmm";
      mixture_spec.covariance = "diagonal";
      mixture_spec.base = nullptr;
      mixture_spec.context = 0;
      GaussianMixtureImpl mixture(mixture_spec);
      fit_gmm_em(mixture, train_s.x, options.em_iterations);
      dif->init_from_mixture(mixture);
    }
    if (auto* energy = dynamic_cast<EnergyImpl*>(&density))
      fit_classifier(*energy, train_s, validation_s, options, report);
    else if (dif && options.method == "gem")
      fit_gem(*dif, train_s, validation_s, options, report);
    else
      fit_maximum_likelihood(density, train_s, validation_s, options, report);
  }
  report.train_mean_logpdf = mean_log_prob(model, train.x, train.context);
  report.validation_mean_logpdf = validation.size()
                                      ? mean_log_prob(model, validation.x, validation.context)
                                      : report.train_mean_logpdf;
  return report;
}

} // namespace ssm::flows
