// Fitting the backward guide by its ELBO, and what the fitted guide reports: see fit.h. The
// ELBO's gradient is exact (the closed form of a linear-Gaussian model, differentiated by
// autograd through the guide's whole recursion), the pathwise estimate (trajectories of the guide
// differentiated through, the model's compiled state gradients at them), or the score-function
// estimate of the chapter's recursions (4.10-4.12), which evaluates only the model's compiled
// log-densities at draws from q_t.
#include "vsmooth/fit.h"
#include "core/error.h"
#include "core/frame.h"
#include "core/output.h"
#include "core/params.h"
#include "core/series.h"
#include "exact/kalman.h"
#include "kernel/rng.h"
#include "learning/parameter_space.h"
#include "nn/tensor_values.h"
#include "vsmooth/backward_guide.h"
#include "vsmooth/elbo.h"
#include "vsmooth/online.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

namespace ssm::vsmooth {

namespace {

using torch::indexing::Slice;

// The first t whose term is not finite, or -1.
int64_t first_non_finite(const torch::Tensor& per_step) {
  const torch::Tensor bad = torch::nonzero(~torch::isfinite(per_step));
  return bad.numel() == 0 ? -1 : bad[0][0].item<int64_t>();
}

std::vector<torch::Tensor> snapshot(const BackwardGuide& guide) {
  std::vector<torch::Tensor> copy;
  for (const torch::Tensor& p : guide->parameters())
    copy.push_back(p.detach().clone());
  return copy;
}

void restore(BackwardGuide& guide, const std::vector<torch::Tensor>& copy) {
  torch::NoGradGuard no_grad;
  auto params = guide->parameters();
  for (size_t k = 0; k < params.size(); ++k)
    params[k].copy_(copy[k]);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read the guide '{}'", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The model's best linear-Gaussian approximation where it has no linear-Gaussian form: K paths
// of the model itself (its own samplers, over the data's first steps' frames), x_0's moments for
// the prior, the least-squares regression of x_t on x_{t-1} (and of y_t on x_t) for the
// transition (and the linear encoder), the residuals' covariances for the noises. A start near
// the model's scale and dynamics, where the generic one can be orders of magnitude off.
BackwardGuideImpl::ModelMatrices simulated_matrices(const MethodRun& run, uint64_t seed) {
  const ModelInfo& info = run.info;
  const ObsData& data = *run.data;
  const int64_t p = info.n_state, m = info.n_obs, K = 2000;
  const int64_t steps = std::min<int64_t>(data.T, 50);
  Frame frame(info, *run.fixed);
  std::vector<double> x(p * K), next(p * K), y(m * K);
  auto tensor_of = [&](const std::vector<double>& soa, int64_t n) { // SoA -> [K, n]
    return torch::from_blob(const_cast<double*>(soa.data()), {n, K}, f64()).t().clone();
  };
  // A stream of its own: the kernels separate (path, step, site) by their counters.
  const uint64_t stream = mix_seed(seed ^ mix_seed(0x76736d73696dULL)); // "vsmsim"
  run.model.init_sample(frame.step(data.inputs_at(0), nullptr), stream, 0, K, K, x.data());
  const torch::Tensor x0 = tensor_of(x, p);
  std::vector<torch::Tensor> prev, cur, obs_x, obs_y;
  for (int64_t t = 0; t < steps; ++t) {
    const double* f = frame.step(data.inputs_at(t), t > 0 ? data.at(t - 1) : nullptr);
    if (t > 0) {
      run.model.transition_sample(f, stream, t, 0, K, K, x.data(), nullptr, next.data());
      prev.push_back(tensor_of(x, p));
      std::swap(x, next);
      cur.push_back(tensor_of(x, p));
    }
    run.model.obs_sample(f, stream, t, 0, K, K, x.data(), y.data());
    obs_x.push_back(tensor_of(x, p));
    obs_y.push_back(tensor_of(y, m));
  }
  // Least squares of Y on [X, 1] over the rows where both are finite (a path that exploded, a
  // frame with a missing y[t-1]), a small ridge per column keeping a constant component
  // solvable: the slope, intercept and residual covariance.
  auto regress = [&](torch::Tensor X, torch::Tensor Y) {
    const torch::Tensor ok = torch::isfinite(X).all(1) & torch::isfinite(Y).all(1);
    X = X.index({ok});
    Y = Y.index({ok});
    if (X.size(0) < X.size(1) + 3) // too few usable rows: no fit (the generic start stays)
      return std::tuple{torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor Z = torch::cat({X, torch::ones({X.size(0), 1}, f64())}, 1);
    const torch::Tensor squares = Z.square().sum(0);
    const torch::Tensor ridge =
        torch::diag(1e-9 * squares.clamp_min(1e-12 * squares.max().item<double>()));
    const torch::Tensor beta = torch::linalg_solve(Z.t().matmul(Z) + ridge, Z.t().matmul(Y));
    const torch::Tensor resid = Y - Z.matmul(beta);
    const torch::Tensor cov = resid.t().matmul(resid) / static_cast<double>(X.size(0) - 1);
    return std::tuple{beta.narrow(0, 0, X.size(1)).t().contiguous(), beta[X.size(1)].contiguous(),
                      cov, resid};
  };
  BackwardGuideImpl::ModelMatrices mm;
  mm.m0 = x0.mean(0);
  mm.P0 = (x0 - mm.m0).t().matmul(x0 - mm.m0) / static_cast<double>(K - 1);
  if (!prev.empty())
    std::tie(mm.F, mm.c, mm.Q, std::ignore) = regress(torch::cat(prev), torch::cat(cur));
  torch::Tensor resid;
  std::tie(mm.H, mm.d, std::ignore, resid) = regress(torch::cat(obs_x), torch::cat(obs_y));
  // The noise's scale robustly, (1.4826 MAD)^2 per component, diagonal: heavy-tailed observations
  // (a Student t with 2 degrees of freedom has no variance) would otherwise make the start ignore
  // the data; floored relative to the observations' spread.
  if (mm.H.defined()) {
    auto median_deviation = [](const torch::Tensor& v) { // per column
      return std::get<0>((v - std::get<0>(v.median(0))).abs().median(0));
    };
    const torch::Tensor mad = median_deviation(resid);
    torch::Tensor Y = torch::cat(obs_y);
    Y = Y.index({torch::isfinite(Y).all(1)});
    const torch::Tensor spread = median_deviation(Y);
    // Floored at 1e-6 of the observations' own scale (and of 1, for observations that barely
    // vary, as counts that are mostly 0).
    mm.R = torch::diag(
        torch::maximum((1.4826 * mad).square(), 1e-6 * ((1.4826 * spread).square() + 1)));
  }
  return mm;
}

// The family of a new guide: the model's own (`guide x[t] ~ backward(...)`: its encoder, the
// declared network's layers, the columns of the observations it reads), or the flags'.
GuideSpec new_guide_spec(const MethodRun& run, const VariationalSmoothOptions& o) {
  GuideSpec spec;
  spec.states = run.info.n_state;
  spec.observations = run.data->n_obs;
  spec.diagonal = o.family == "diagonal";
  const std::optional<BackwardGuideInfo>& declared = run.info.backward_guide;
  if (!declared) {
    spec.encoder = o.encoder != "auto" ? o.encoder : run.info.linear_gaussian ? "linear" : "mlp";
    spec.hidden = o.hidden;
    if (spec.encoder == "free") // one series (check())
      spec.steps = run.data->T;
    return spec;
  }
  spec.encoder = declared->encoder;
  spec.mask = false;
  for (const BackwardGuideInfo::Observation& obs : declared->observations)
    for (int64_t k = 0; k < obs.size; ++k)
      spec.columns.push_back(obs.offset + k);
  spec.observations = static_cast<int64_t>(spec.columns.size());
  bool all_columns = spec.observations == run.data->n_obs;
  for (int64_t k = 0; all_columns && k < spec.observations; ++k)
    all_columns = spec.columns[k] == k;
  if (all_columns) // the same guide as one that reads every column (a flags-trained linear one)
    spec.columns.clear();
  if (declared->encoder == "mlp") {
    const NetInfo& net = run.info.nets.at(declared->net);
    spec.hidden = net.hidden;
    spec.activation = net.activation;
  }
  return spec;
}

// --online-out offline: the trained guide's filtering moments q_t and one-step smoothing
// moments q_{t-1|t} integrated over q_t, per step, as the online recursion writes them (without
// its running ELBO, which an offline fit does not have).
void write_step_moments(BackwardGuide& guide, const torch::Tensor& y, const ModelInfo& info,
                        const std::string& path) {
  const GuidePass q = guide->run(y, false);
  const size_t columns = state_columns(info).size();
  OutputFile out(path);
  out.write(step_moments_header(info) + "\n");
  for (int64_t t = 0; t < q.mean.size(0); ++t) {
    torch::Tensor one_step_mean, one_step_cov;
    if (t > 0) { // q_{t-1|t} integrated over q_t
      const torch::Tensor G = q.gain[t - 1];
      one_step_mean = G.matmul(q.mean[t]) + q.offset[t - 1];
      one_step_cov = G.matmul(q.cov[t]).matmul(G.t()) + q.noise[t - 1];
    }
    out.write(step_moments_row(t, columns, q.mean[t], q.cov[t], one_step_mean, one_step_cov) +
              "\n");
  }
  out.commit();
}

// "linear", or "mlp(hidden = [...], activation = ..., reads the mask)": for messages.
std::string encoder_description(const GuideSpec& s) {
  if (s.encoder != "mlp")
    return s.encoder;
  return fmt::format("mlp(hidden = [{}], activation = {}{})", fmt::join(s.hidden, ", "),
                     s.activation, s.mask ? ", the missing-value mask among its inputs" : "");
}

// The guide to start from: --load-guide's (which must fit the model, and the encoder asked for or
// declared), or a new one.
BackwardGuide starting_guide(const MethodRun& run, const VariationalSmoothOptions& o,
                             const torch::Tensor& y, const LinearGaussian& lg) {
  const int64_t p = run.info.n_state;
  const GuideSpec want = new_guide_spec(run, o);
  if (o.load_guide.empty()) {
    torch::manual_seed(o.seed); // the network's initial weights
    BackwardGuide guide(want, y, o.seed);
    if (o.init == "model" && lg.F.defined()) {
      const int64_t t = std::min<int64_t>(1, lg.F.size(0) - 1); // F, c, Q of the first transition
      guide->start_from({lg.m0, lg.P0, lg.F[t], lg.c[t], lg.Q[t], lg.H[0], lg.d[0], lg.R[0]});
      guide->start_encoder_at(lg.H, lg.d, lg.R, y); // an encoder that is not linear reads y too
    } else if (o.init == "model") {
      try {
        const BackwardGuideImpl::ModelMatrices mm = simulated_matrices(run, o.seed);
        guide->start_from(mm);
        guide->start_encoder_at(mm.H, mm.d, mm.R, y);
      } catch (const c10::Error&) {
        // A simulation the regressions cannot use (singular, degenerate): the generic start.
      }
    }
    return guide;
  }
  BackwardGuide guide(BackwardGuideImpl::load(read_file(o.load_guide), o.load_guide));
  const GuideSpec& s = guide->spec();
  if (s.states != p || s.observations != want.observations || s.columns != want.columns)
    throw Error(fmt::format("{}: the guide is over {} state and {} observation components, and "
                            "the model '{}' has {} and {}{}",
                            o.load_guide, s.states, s.observations, run.info.name, p,
                            want.observations,
                            run.info.backward_guide ? " that its guide reads" : ""));
  if (s.encoder == "free" && s.steps != run.data->T)
    throw Error(fmt::format("{}: the guide's free encoder holds parameters for {} steps, and the "
                            "data has {}: a non-amortised guide serves the series it was trained "
                            "on (an amortised one, --encoder linear or mlp, serves new series)",
                            o.load_guide, s.steps, run.data->T));
  if (run.info.backward_guide &&
      (s.encoder != want.encoder ||
       (s.encoder == "mlp" &&
        (s.mask != want.mask || s.hidden != want.hidden || s.activation != want.activation))))
    throw Error(fmt::format("{}: the guide's encoder is {}, and the model declares {} ({})",
                            o.load_guide, encoder_description(s), encoder_description(want),
                            run.info.backward_guide->where));
  if (o.encoder != "auto" && o.encoder != s.encoder)
    throw Error(fmt::format("{}: the guide's encoder is {}, not --encoder {}", o.load_guide,
                            s.encoder, o.encoder));
  const std::string family = s.diagonal ? "diagonal" : "full";
  if (o.family != "auto" && o.family != family)
    throw Error(fmt::format("{}: the guide's family is {}, not --family {}", o.load_guide, family,
                            o.family));
  return guide;
}

// The first step at which the guide's own recursion stops being finite, or -1: where a
// non-finite ELBO comes from (the backward pass would spread it to every step).
int64_t first_bad_step(BackwardGuide& guide, const torch::Tensor& y) {
  torch::NoGradGuard no_grad;
  try {
    const GuidePass q = guide->run(y, false);
    const torch::Tensor bad =
        ~torch::isfinite(q.mean).all(1) | ~torch::isfinite(q.cov).flatten(1).all(1);
    const torch::Tensor at = torch::nonzero(bad);
    return at.numel() == 0 ? -1 : at[0][0].item<int64_t>();
  } catch (const c10::Error&) {
    return -1;
  }
}

// What the fitted guide says: its smoothing marginals in closed form, the ELBO (in closed form
// where the model allows, and by trajectories from q with its Monte Carlo error), and the
// functionals by the same trajectories.
SmoothResult report_marginals(BackwardGuide& guide, const torch::Tensor& y,
                              const ModelDensities& densities, const LinearGaussian& lg,
                              const MethodRun& run, const ObsData& data,
                              const std::vector<double>& fixed, const VariationalSmoothOptions& o,
                              torch::Generator& gen) {
  const ModelInfo& info = run.info;
  const int64_t T = y.size(0), p = info.n_state;
  const GuidePass q = guide->run(y, true);
  SmoothResult r = make_result(info, SmoothMethod::Variational, T, o.draws, true);
  const torch::Tensor ms = q.smooth_mean.contiguous();
  const torch::Tensor vs = torch::diagonal(q.smooth_cov, 0, -2, -1).contiguous();
  std::copy(ms.data_ptr<double>(), ms.data_ptr<double>() + T * p, r.mean.begin());
  std::copy(vs.data_ptr<double>(), vs.data_ptr<double>() + T * p, r.var.begin());
  const TrajectoryEstimates est = estimate_by_trajectories(q, densities, o.draws, gen);
  const double K = static_cast<double>(o.draws);
  auto se_of = [&](const torch::Tensor& v) {
    return o.draws > 1 ? v.std().item<double>() / std::sqrt(K) : NAN;
  };
  for (size_t f = 0; f < info.functionals.size(); ++f) {
    const FunctionalInfo& fi = info.functionals[f];
    FunctionalEstimate& e = r.functionals[f];
    if (fi.sum) {
      e.se.resize(fi.size);
      for (int64_t k = 0; k < fi.size; ++k) {
        const torch::Tensor v = est.functional_sums.index({Slice(), fi.offset + k});
        e.total[k] = v.mean().item<double>();
        e.se[k] = se_of(v);
      }
    } else {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < fi.size; ++k)
          e.per_t[t * fi.size + k] = est.functional_means[t][fi.offset + k].item<double>();
    }
  }
  nlohmann::json& d = r.details;
  const double elbo_mc = est.log_weight.mean().item<double>();
  d["elbo"] = elbo_mc;
  d["elbo_se"] = se_of(est.log_weight);
  if (lg.F.defined()) {
    const double closed = closed_form_elbo(q, lg, y).sum().item<double>();
    const double log_likelihood = kalman_filter(run.model, info, fixed, data).log_likelihood;
    d["elbo"] = closed;
    d["elbo_se"] = 0.0;
    d["elbo_mc"] = elbo_mc; // the trajectories' estimate, a check of the closed form
    d["elbo_mc_se"] = se_of(est.log_weight);
    d["log_likelihood"] = log_likelihood; // exact: the KL of q from the smoothing law is the gap
    d["kl"] = log_likelihood - closed;
  }
  return r;
}

// Several series' reports as one: marginals one after another, functionals, ELBOs and
// log-likelihoods added (standard errors in quadrature), as the series are independent.
void add_series_report(SmoothResult& total, const SmoothResult& r) {
  add_series_result(total, r);
  nlohmann::json& t = total.details;
  const nlohmann::json& d = r.details;
  for (const char* key : {"elbo", "elbo_mc", "log_likelihood", "kl"})
    if (t.contains(key))
      t[key] = t[key].get<double>() + d.at(key).get<double>();
  for (const char* key : {"elbo_se", "elbo_mc_se"})
    if (t.contains(key))
      t[key] = std::hypot(t[key].get<double>(), d.at(key).get<double>());
}

// What an online run (without --marginals) says: the last pass's estimates of the ELBO and the
// sum_t functionals, made by the recursion on the way; no marginals, and nothing whose memory
// grows with T (`filter --method kalman` gives a linear-Gaussian model's log-likelihood).
SmoothResult report_online(const OnlineTraining& online, const MethodRun& run) {
  const ModelInfo& info = run.info;
  SmoothResult r = make_result(info, SmoothMethod::Variational, run.data->T, 0, false);
  int64_t at = 0;
  for (size_t f = 0; f < info.functionals.size(); ++f)
    if (info.functionals[f].sum)
      for (int64_t k = 0; k < info.functionals[f].size; ++k)
        r.functionals[f].total[k] = online.functional_sums[at++].item<double>();
  // The recursion's mean_i H_T^i: the guide's ELBO (biased by O(1/N)) when it did not move,
  // else the ELBO accumulated while it learned.
  r.details[run.options.integer("--epochs") == 0 ? "elbo" : "elbo_online"] = online.elbo;
  return r;
}

} // namespace

VariationalSmoothFit fit_variational_smoother(const MethodRun& run,
                                              const VariationalSmoothOptions& o) {
  const ModelInfo& info = run.info;
  const ObsData& data = *run.data;
  const int64_t T = data.T; // all series'
  if (T < 1)
    throw Error("smooth --method variational: the data has no time step");
  const int64_t n_series = std::max<int64_t>(1, data.series.count());
  torch::set_num_threads(std::max(1, o.threads));
  // The parameters and data values the kernels read; with --learn-params the parameters move.
  std::vector<double> fixed = *run.fixed; // not o.fixed, the names --fix keeps
  // A linear-Gaussian model's matrices: every step's for the closed form and the marginals'
  // report, else the first two (to start from), so that online memory does not grow with T.
  const bool linear = info.linear_gaussian && run.model.linear_gaussian;
  const int64_t lg_steps = o.gradient == "analytic" || o.marginals ? T : 2;
  // Each series under the one guide (the guide is amortised: its prior, transition and encoder
  // serve every series), with the model's densities at its own frames.
  struct Series {
    std::unique_ptr<ObsData> own; // a series of several (data.one_series)
    const ObsData* data = nullptr;
    torch::Tensor y; // [T_k, m], NaN where missing
    std::unique_ptr<ModelDensities> densities;
    LinearGaussian lg;
  };
  std::vector<Series> series(n_series);
  for (int64_t k = 0; k < n_series; ++k) {
    Series& s = series[k];
    if (n_series > 1)
      s.own = std::make_unique<ObsData>(data.one_series(k));
    s.data = n_series > 1 ? s.own.get() : &data;
    s.y = torch::from_blob(const_cast<double*>(s.data->y.data()), {s.data->T, s.data->n_obs}, f64())
              .clone();
    s.densities = std::make_unique<ModelDensities>(run.model, info, fixed, *s.data);
    if (linear)
      s.lg = linear_gaussian(run.model, info, fixed, *s.data, lg_steps);
  }
  std::vector<torch::Tensor> all_y;
  for (const Series& s : series)
    all_y.push_back(s.y);
  MethodRun first = run; // the start's simulation reads the first series' frames
  first.data = series[0].data;
  BackwardGuide guide = starting_guide(first, o, torch::cat(all_y), series[0].lg);
  const auto start = std::chrono::steady_clock::now(); // training's clock, after the start
  const bool analytic = o.gradient == "analytic";
  torch::Generator gen = at::detail::createCPUGenerator(o.seed);

  // --learn-params: the learned parameters' unconstrained point u, moved by Adam beside the
  // guide; the gradient in them is E_q[grad_theta log p(x, y)] (q does not depend on them), the
  // score terms' mean over trajectories of the guide.
  std::optional<ParameterSpace> space;
  torch::Tensor u, good_u;
  std::vector<double> theta_gradient;
  const auto n_theta = static_cast<size_t>(info.n_theta);
  if (o.learn_params) {
    space.emplace(info, o.fixed);
    u = torch::tensor(space->unconstrain({fixed.data(), n_theta}), f64()).requires_grad_(true);
    good_u = u.detach().clone();
  }
  auto move_parameters = [&] { // to u, wherever the model is read
    space->constrain(nn::to_vector(u), {fixed.data(), n_theta});
    for (Series& s : series) {
      s.densities->set_parameters(fixed);
      if (linear)
        s.lg = linear_gaussian(run.model, info, fixed, *s.data, lg_steps);
    }
  };

  // One evaluation over every series: the loss to minimise (-ELBO / T, or the score surrogate's
  // negative) and each series' per-step terms: the closed form's and the pathwise estimate's,
  // which add up to its ELBO, or the score recursion's estimates of L_t, whose last is its ELBO.
  // With --learn-params and autograd on, also the parameters' gradient (theta_gradient), at the
  // pathwise estimate's trajectories or at --samples new ones.
  using PerStep = std::vector<torch::Tensor>;
  auto evaluate = [&](PerStep& per_step) {
    per_step.assign(n_series, torch::Tensor());
    torch::Tensor loss = torch::zeros({}, f64());
    if (space)
      theta_gradient.assign(n_theta, 0.0);
    for (int64_t k = 0; k < n_series; ++k) {
      Series& s = series[k];
      const GuidePass q = guide->run(s.y, analytic);
      torch::Tensor draws;
      if (analytic) {
        per_step[k] = closed_form_elbo(q, s.lg, s.y);
        loss = loss - per_step[k].sum();
      } else if (o.gradient == "pathwise") {
        PathwiseStep step = pathwise_step(q, *s.densities, o.samples, gen);
        per_step[k] = step.per_step;
        draws = step.draws;
        loss = loss - step.surrogate;
      } else {
        ScoreStep step = score_step(q, *s.densities, o.samples, gen);
        per_step[k] = step.per_step;
        loss = loss - step.surrogate;
      }
      if (space && torch::GradMode::is_enabled()) {
        torch::NoGradGuard no_grad;
        if (!draws.defined())
          draws = draw_trajectories(q, o.samples, gen);
        const std::vector<double> g = s.densities->parameter_gradient(draws);
        for (size_t c = 0; c < n_theta; ++c)
          theta_gradient[c] += g[c];
      }
    }
    return loss / static_cast<double>(T);
  };
  // The ELBO over all series.
  auto elbo_of = [&](const PerStep& per_step) {
    double sum = 0;
    for (const torch::Tensor& v : per_step)
      sum += o.gradient == "score" ? v[v.size(0) - 1].item<double>() : v.sum().item<double>();
    return sum;
  };
  // The first series and step whose term is not finite, or (-1, -1).
  auto non_finite = [&](const PerStep& per_step) {
    for (int64_t k = 0; k < static_cast<int64_t>(per_step.size()); ++k)
      if (per_step[k].defined())
        if (const int64_t t = first_non_finite(per_step[k].detach()); t >= 0)
          return std::pair{k, t};
    return std::pair<int64_t, int64_t>{-1, -1};
  };

  VariationalSmoothFit fit;
  std::vector<double> trace;
  std::vector<torch::Tensor> good = snapshot(guide);
  int64_t done = 0, evaluations = 0, rejected = 0;
  auto fail = [&](int64_t iteration, const PerStep& per_step, const std::string& why) {
    restore(guide, good);
    if (space) {
      torch::NoGradGuard no_grad;
      u.copy_(good_u);
      move_parameters();
    }
    // Where: the guide's own recursion first, else the ELBO's terms.
    std::pair<int64_t, int64_t> at{-1, -1};
    for (int64_t k = 0; k < n_series && at.first < 0; ++k)
      if (const int64_t t = first_bad_step(guide, series[k].y); t >= 0)
        at = {k, t};
    if (at.first < 0)
      at = non_finite(per_step);
    const auto [k, t] = at;
    fit.failure = fmt::format(
        "smooth --method variational: {} at iteration {}{}; training stopped (the guide is "
        "Gaussian: a log-density of the model that is -inf somewhere in the state, as one with "
        "bounded support, makes the ELBO -inf)",
        why, iteration,
        t >= 0 ? fmt::format(", first at t={}{} ({})", t,
                             n_series > 1 ? fmt::format(" of series {}", data.series.names[k]) : "",
                             data_row_text(info, *series[k].data, t))
               : "");
  };
  OnlineTraining online;
  if (o.online) {
    std::vector<OnlineStream> streams;
    for (int64_t k = 0; k < n_series; ++k)
      streams.push_back({series[k].densities.get(), series[k].y, series[k].data,
                         n_series > 1 ? data.series.names[k] : ""});
    // --learn-params: the parameters move at every step, the model's densities with them (a
    // linear-Gaussian model's matrices, which only the report reads, once at the end).
    OnlineParameters learning;
    if (space)
      learning = {&*space, u, o.param_learning_rate > 0 ? o.param_learning_rate : 0.05, [&] {
                    space->constrain(nn::to_vector(u), {fixed.data(), n_theta});
                    for (Series& s : series)
                      s.densities->set_parameters(fixed);
                  }};
    online = train_online(guide, streams, run, o, !o.marginals, gen, space ? &learning : nullptr);
    if (space && linear)
      for (Series& s : series)
        s.lg = linear_gaussian(run.model, info, fixed, *s.data, lg_steps);
    done = evaluations = online.updates;
    trace = online.epoch_elbo;
    fit.failure = online.failure;
  } else if (o.optimizer == "lbfgs" && o.iterations > 0) {
    // An evaluation outside the family (a covariance that is not positive definite) or with a
    // non-finite ELBO counts as +inf, which the line search backs off from; L-BFGS restarts from
    // the best point with half the step while it stalls there and evaluations remain.
    double best = INFINITY, rate = o.learning_rate;
    bool stalled = false;
    auto closure = [&]() -> torch::Tensor {
      ++evaluations;
      PerStep per_step;
      torch::Tensor loss;
      bool ok = true;
      try {
        loss = evaluate(per_step);
        ok = torch::isfinite(loss).item<bool>();
      } catch (const c10::LinAlgError&) {
        ok = false;
      }
      for (torch::Tensor& p : guide->parameters())
        if (p.grad().defined())
          p.grad().zero_();
      if (!ok) {
        ++rejected;
        stalled = true;
        return torch::full({}, INFINITY, f64());
      }
      loss.backward();
      if (loss.item<double>() < best) {
        best = loss.item<double>();
        good = snapshot(guide);
      }
      trace.push_back(elbo_of(per_step));
      if (o.progress)
        o.progress(std::min<int64_t>(evaluations, o.iterations), o.iterations);
      return loss.detach();
    };
    while (evaluations < o.iterations) {
      torch::optim::LBFGS optimizer(guide->parameters(), torch::optim::LBFGSOptions(rate)
                                                             .max_iter(o.iterations - evaluations)
                                                             .max_eval(o.iterations - evaluations)
                                                             .tolerance_change(o.tolerance)
                                                             .tolerance_grad(1e-12)
                                                             .history_size(20)
                                                             .line_search_fn("strong_wolfe"));
      stalled = false;
      const int64_t before = evaluations;
      optimizer.step(closure);
      restore(guide, good); // the best point evaluated
      if (trace.empty()) {
        fail(0, PerStep(), "the ELBO of the starting guide is not finite");
        break;
      }
      if (!stalled || evaluations == before)
        break; // converged, or out of evaluations
      rate /= 2;
    }
    done = static_cast<int64_t>(trace.size());
  } else {
    // The ELBO's gradient over the whole series at each step.
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(guide->parameters(),
                        std::make_unique<torch::optim::AdamOptions>(o.learning_rate));
    if (space)
      groups.emplace_back(std::vector<torch::Tensor>{u},
                          std::make_unique<torch::optim::AdamOptions>(
                              o.param_learning_rate > 0 ? o.param_learning_rate : o.learning_rate));
    torch::optim::Adam optimizer(std::move(groups), torch::optim::AdamOptions(o.learning_rate));
    for (int64_t it = 0; it < o.iterations; ++it) {
      optimizer.zero_grad();
      ++evaluations;
      PerStep per_step;
      torch::Tensor loss;
      try {
        loss = evaluate(per_step);
      } catch (const c10::LinAlgError&) {
        fail(it, PerStep(), "a covariance of the guide stopped being positive definite");
        break;
      }
      if (!torch::isfinite(loss).item<bool>() || non_finite(per_step).first >= 0) {
        fail(it, per_step, "the ELBO is not finite");
        break;
      }
      good = snapshot(guide);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(guide->parameters(), 100.0);
      if (space) {
        good_u = u.detach().clone();
        const std::vector<double> g = space->gradient(nn::to_vector(u), theta_gradient, false);
        u.mutable_grad() = torch::tensor(g, f64()) / -static_cast<double>(T);
      }
      optimizer.step();
      if (space) {
        try {
          move_parameters();
        } catch (const Error& e) {
          fail(it, PerStep(), fmt::format("the parameters left their space ({})", e.what()));
          break;
        }
      }
      trace.push_back(elbo_of(per_step));
      done = it + 1;
      if (o.progress)
        o.progress(it + 1, o.iterations);
    }
  }
  if (fit.failure.empty() && !o.online && o.optimizer != "lbfgs" && done > 0) {
    // The last step's guide has not been evaluated yet.
    PerStep per_step;
    try {
      torch::NoGradGuard no_grad;
      if (!torch::isfinite(evaluate(per_step)).item<bool>() || non_finite(per_step).first >= 0)
        fail(done, per_step, "the ELBO is not finite");
    } catch (const c10::LinAlgError&) {
      fail(done, PerStep(), "a covariance of the guide stopped being positive definite");
    }
  }
  fit.guide = guide->save();
  if (space)
    fit.theta.assign(fixed.begin(), fixed.begin() + static_cast<int64_t>(n_theta));
  if (!fit.failure.empty())
    return fit;
  const auto fitted = std::chrono::steady_clock::now();

  torch::NoGradGuard no_grad;
  SmoothResult& r = fit.result;
  if (!o.marginals) {
    r = report_online(online, run);
  } else {
    for (int64_t k = 0; k < n_series; ++k) {
      const Series& s = series[k];
      SmoothResult one =
          report_marginals(guide, s.y, *s.densities, s.lg, run, *s.data, fixed, o, gen);
      if (k == 0)
        r = std::move(one);
      else
        add_series_report(r, one);
    }
    if (!data.series.start.empty()) // as smooth_each_series: the CSV names the series
      r.series = data.series;
  }
  if (!o.online && !o.online_out.empty()) // one series (check())
    write_step_moments(guide, series[0].y, info, o.online_out);
  if (space) // the learned parameters, as a --params file has them
    r.details["params"] = params_json(info, fixed);
  nlohmann::json details = {
      {"gradient", o.gradient},           {"init", o.load_guide.empty() ? o.init : "load"},
      {"encoder", guide->spec().encoder}, {"family", guide->spec().diagonal ? "diagonal" : "full"},
      {"optimizer", o.optimizer},         {"iterations", done},
      {"evaluations", evaluations},       {"rejected_evaluations", rejected}};
  if (info.backward_guide) // the guide statement the family came from
    details["guide"] = info.backward_guide->where;
  if (o.marginals)
    details["draws"] = o.draws;
  if (!analytic || space)
    details["samples"] = o.samples;
  if (space) {
    std::vector<std::string> learned;
    for (const LearnedParam& l : space->learned())
      learned.push_back(info.params[l.index].name);
    details["learned"] = learned;
    details["param_learning_rate"] =
        o.param_learning_rate > 0 ? o.param_learning_rate : o.learning_rate;
  }
  if (o.online) {
    details["training"] = o.epochs == 0 ? "none" : o.epochs == 1 ? "streaming" : "epochs";
    details["epochs"] = o.epochs;
    details["learning_rate"] = o.learning_rate;
    if (o.optimizer == "sgd")
      details["step_size"] = {
          {"gamma0", o.learning_rate}, {"hold", o.step_hold}, {"decay", o.step_decay}};
    if (o.optimizer == "sgd")
      details["clip"] = o.clip;
    if (online.epoch_elbo.size() > 1)
      details["epoch_elbo"] = online.epoch_elbo;
    if (space) { // the ELBO's gradient in every parameter at the end, as `score` has the score
      details["parameter_gradient"] = params_json(info, nn::to_vector(online.parameter_gradient));
      details["clip"] = o.clip;
      details["clipped_parameter_steps"] = online.clipped_parameter_steps;
      // Clipped at most steps: a rate too large for the parameters' scale (smooth prints it).
      if (online.updates >= 20 && 2 * online.clipped_parameter_steps > online.updates)
        r.details["warnings"].push_back(fmt::format(
            "smooth --learn-params: the parameters' step was clipped (--clip {:g}) at {} of {} "
            "steps, so they moved by --clip a step: --param-learning-rate {:g} is likely too large "
            "for their scale, and they may have run far from the data's values",
            o.clip, online.clipped_parameter_steps, online.updates,
            o.param_learning_rate > 0 ? o.param_learning_rate : o.learning_rate));
    }
  }
  // Those the family reads: a Cholesky factor's lower triangle, a diagonal family's diagonals.
  int64_t n_params = 0;
  for (const auto& item : guide->named_parameters()) {
    const torch::Tensor& v = item.value();
    const bool chol = item.key().ends_with("_chol");
    const bool diagonal = guide->spec().diagonal && (chol || item.key() == "transition");
    const int64_t n = v.size(-1), blocks = v.numel() / std::max<int64_t>(1, n * n);
    n_params += diagonal ? blocks * n : chol ? blocks * n * (n + 1) / 2 : v.numel();
  }
  details["guide_parameters"] = n_params;
  const size_t stride = std::max<size_t>(1, (trace.size() + 199) / 200);
  nlohmann::json tr = nlohmann::json::array();
  for (size_t k = 0; k < trace.size(); k += stride)
    tr.push_back(trace[k]);
  details["elbo_trace"] = tr;
  details["elbo_trace_stride"] = stride;
  const auto end = std::chrono::steady_clock::now();
  r.filter_s = std::chrono::duration<double>(fitted - start).count();
  r.smooth_s = std::chrono::duration<double>(end - fitted).count();
  details["seconds_per_evaluation"] =
      evaluations > 0 ? r.filter_s / static_cast<double>(evaluations) : NAN;
  if (o.online) // a step of the recursion, with its update or without
    details["seconds_per_step"] =
        r.filter_s / static_cast<double>(std::max<int64_t>(1, o.epochs) * T);
  r.details["details"] = details;
  return fit;
}

} // namespace ssm::vsmooth
