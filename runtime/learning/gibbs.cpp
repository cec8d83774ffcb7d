// Gibbs sampling of plate models and time series: see gibbs.h.
#include "learning/gibbs.h"
#include "core/csv.h"
#include "core/error.h"
#include "core/frame.h"
#include "core/thread_pool.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"
#include "kernel/rng.h"
#include "kernel/sampler_algorithms.h"
#include "learning/conjugate_draws.h"
#include "learning/parameter_space.h"

#include <Eigen/Eigenvalues>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numbers>

namespace ssm {

namespace {

constexpr uint32_t kSiteLatent = 0x47600000, kSiteChainStart = 0x47610000;

// `x.52` (item 52, 1-based) or `z.3.2`, as Stan names the elements of generated quantities.
std::string imputed_name(const VarInfo& v, int64_t item, int64_t k) {
  std::vector<int64_t> index(v.shape.size());
  for (size_t d = v.shape.size(); d-- > 0;) { // row-major: the last index varies fastest
    index[d] = k % v.shape[d];
    k /= v.shape[d];
  }
  std::string name = fmt::format("{}.{}", v.name, item + 1);
  for (int64_t i : index)
    name += fmt::format(".{}", i + 1);
  return name;
}

// Whether gibbs can draw the latents (a plate's) or the state path (a time series') exactly:
// finite states to enumerate, or linear-Gaussian ones for the Kalman filter.
bool exact_latents(const ssm_model& model, const ModelInfo& info) {
  return enumerable(info) || (info.linear_gaussian && model.linear_gaussian);
}

// The data's items, split by whether the data gives their latent values.
struct Items {
  int64_t T = 0;
  std::vector<int64_t> given, free;
  std::vector<double> latents; // T x n_state; NaN for the free items until drawn
  std::vector<std::pair<int64_t, int64_t>> missing; // (item, observation component)
  // What a draw records besides theta, item by item: its latents when free (component c of the
  // state, obs = false), then its missing observations (component c of y, obs = true).
  struct Imputed {
    int64_t item = 0, c = 0;
    bool obs = false;
  };
  std::vector<Imputed> imputed;
};

Items split_items(const ModelInfo& info, const ObsData& data) {
  Items out;
  out.T = data.T;
  out.latents.assign(static_cast<size_t>(data.T * info.n_state), std::nan(""));
  const CsvTable table = read_csv(data.source);
  std::vector<std::pair<int64_t, std::string>> columns(static_cast<size_t>(info.n_state), {-1, ""});
  for (const VarInfo& v : info.state) {
    const std::vector<std::string> names = column_names(v.name, v.shape);
    for (int64_t k = 0; k < v.size; ++k) {
      const auto at = std::find(table.header.begin(), table.header.end(), names[k]);
      columns[v.offset + k] = {at == table.header.end() ? -1 : at - table.header.begin(), names[k]};
    }
  }
  for (int64_t t = 0; t < data.T; ++t) {
    const std::vector<std::string>& row = table.rows[t];
    const int64_t line = table.lines[t];
    std::string given_name, missing_name;
    for (const VarInfo& v : info.state)
      for (int64_t k = 0; k < v.size; ++k) {
        const auto& [column, name] = columns[v.offset + k];
        double value = 0;
        if (column < 0 || !parse_cell(row[column], value, table.source, line, name)) {
          missing_name = name;
          continue;
        }
        if (v.integer && (value != std::floor(value) || value < v.lower || value > v.upper))
          throw Error(fmt::format("{}:{}: column '{}': {} is not a value of latent '{}' "
                                  "(integers {}..{})",
                                  table.source, line, name, row[column], v.name, v.lower, v.upper));
        out.latents[t * info.n_state + v.offset + k] = value;
        given_name = name;
      }
    if (!given_name.empty() && !missing_name.empty())
      throw Error(fmt::format("{}:{}: column '{}' is given but '{}' is not: gibbs needs an item's "
                              "latent values all given (a labelled item) or all missing",
                              table.source, line, given_name, missing_name));
    (missing_name.empty() ? out.given : out.free).push_back(t);
    for (int64_t k = 0; k < info.n_obs; ++k)
      if (std::isnan(data.at(t)[k])) {
        // obs_sample draws every observation of the item afresh: the draw of a missing one is
        // its conditional only when no relation reads another observation.
        if (!info.em_steps.observations_read.empty())
          throw Error(fmt::format("{}:{}: column '{}' is missing, and the model's observations "
                                  "read each other: gibbs draws a missing observation from its "
                                  "relation given the item's latents alone",
                                  table.source, line, obs_columns(info)[k]));
        out.missing.push_back({t, k});
      }
  }
  for (int64_t t = 0, k = 0, next = 0; t < data.T; ++t) {
    if (next < static_cast<int64_t>(out.free.size()) && out.free[next] == t) {
      ++next;
      for (int64_t c = 0; c < info.n_state; ++c)
        out.imputed.push_back({t, c, false});
    }
    for (; k < static_cast<int64_t>(out.missing.size()) && out.missing[k].first == t; ++k)
      out.imputed.push_back({t, out.missing[k].second, true});
  }
  return out;
}

struct Setup {
  const MethodRun& run;
  const ParameterSpace& space;
  const SampleOptions& opt;
  const ConjugateDraws& draws;
  const Items& items;
  bool finite = false;
};

// The frame of item t: its covariates' (input x[n]) when the model has them, else the one
// frame every item shares.
using ItemFrame = std::function<const double*(int64_t t)>;

// The free items' latents given theta, each from its exact conditional, and log p(their
// observations | theta). Items are independent, so each conditional is one Bayes update of the
// item's prior: for linear-Gaussian latents a Kalman update, for finite ones the prior times
// each state's likelihood. Without covariates the items share the prior, and the Kalman gain
// and covariance are shared by the items that observe the same components (only the mean is
// per item); with covariates each item's prior and update are its own.
class FreeItems {
public:
  FreeItems(const ssm_model& model, const ModelInfo& info, bool finite)
      : model_(model), info_(info), finite_(finite), per_item_(info.n_inputs > 0) {
    if (finite)
      states_ = enumerate_states(info);
  }

  double draw(const ItemFrame& frame, const Items& items, const ObsData& data, uint64_t seed,
              uint32_t chain, uint32_t iteration, std::vector<double>& x) {
    return finite_ ? draw_finite(frame, items, data, seed, chain, iteration, x)
                   : draw_gaussian(frame, items, data, seed, chain, iteration, x);
  }

private:
  const ssm_model& model_;
  const ModelInfo& info_;
  bool finite_, per_item_;
  StateSpace states_;
  std::vector<double> buffer_, log_prior_, log_lik_;

  double draw_finite(const ItemFrame& item_frame, const Items& items, const ObsData& data,
                     uint64_t seed, uint32_t chain, uint32_t iteration, std::vector<double>& x) {
    const int64_t K = states_.size, d = info_.n_state;
    log_prior_.resize(K);
    log_lik_.resize(K);
    if (!per_item_ && !items.free.empty())
      model_.init_logpdf(item_frame(items.free[0]), 0, K, K, states_.values.data(),
                         log_prior_.data());
    double total = 0;
    for (int64_t t : items.free) {
      const double* frame = item_frame(t);
      if (per_item_)
        model_.init_logpdf(frame, 0, K, K, states_.values.data(), log_prior_.data());
      model_.obs_logpdf(frame, t, 0, K, K, states_.values.data(), data.at(t), log_lik_.data());
      double top = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < K; ++k)
        top = std::max(top, log_lik_[k] += log_prior_[k]);
      if (!std::isfinite(top))
        throw Error(fmt::format("sample (gibbs): the item on line {} of {} has probability 0 "
                                "under every latent value at iteration {} of chain {}",
                                data.line(t), data.source, iteration, chain + 1));
      double sum = 0;
      for (int64_t k = 0; k < K; ++k)
        sum += (log_lik_[k] = std::exp(log_lik_[k] - top));
      total += top + std::log(sum);
      const double u = philox_u01(seed, chain, iteration, kSiteLatent, static_cast<uint32_t>(t));
      int64_t pick = K - 1;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        if ((acc += log_lik_[k] / sum) > u) {
          pick = k;
          break;
        }
      for (int64_t c = 0; c < d; ++c)
        x[static_cast<size_t>(t * d + c)] = states_.values[c * K + pick];
    }
    return total;
  }

  struct Update { // the Kalman update of the prior by the observed components `seen`
    Eigen::MatrixXd gain, root, S_inverse;
    double log_det = 0;
  };

  double draw_gaussian(const ItemFrame& item_frame, const Items& items, const ObsData& data,
                       uint64_t seed, uint32_t chain, uint32_t iteration, std::vector<double>& x) {
    const int64_t n = info_.n_state, m = info_.n_obs;
    // An item's prior is the initial distribution (plate items' transitions copy it).
    LinearGaussianStep s;
    if (!per_item_ && !items.free.empty())
      s = linear_gaussian_step(model_, item_frame(items.free[0]), 0, n, m, buffer_);
    const Eigen::VectorXd &m0 = s.m0, &dm = s.d;
    const Eigen::MatrixXd &P0 = s.P0, &H = s.H, &R = s.R;
    std::map<std::vector<bool>, Update> updates;
    double total = 0;
    Eigen::VectorXd z(n), e;
    for (int64_t t : items.free) {
      if (per_item_) { // the item's own prior and observation model: its own update
        s = linear_gaussian_step(model_, item_frame(t), 0, n, m, buffer_);
        updates.clear();
      }
      const double* y = data.at(t);
      std::vector<bool> seen(static_cast<size_t>(m));
      std::vector<Eigen::Index> rows;
      for (int64_t k = 0; k < m; ++k)
        if ((seen[k] = !std::isnan(y[k])))
          rows.push_back(k);
      auto [at, fresh] = updates.try_emplace(seen);
      Update& u = at->second;
      const auto o = static_cast<Eigen::Index>(rows.size());
      if (fresh) {
        Eigen::MatrixXd Ho(o, n), Ro(o, o);
        for (Eigen::Index a = 0; a < o; ++a) {
          Ho.row(a) = H.row(rows[a]);
          for (Eigen::Index b = 0; b < o; ++b)
            Ro(a, b) = R(rows[a], rows[b]);
        }
        const Eigen::MatrixXd S = Ho * P0 * Ho.transpose() + Ro;
        const Eigen::LLT<Eigen::MatrixXd> llt(S);
        if (o > 0 && llt.info() != Eigen::Success)
          throw Error(fmt::format("sample (gibbs): the covariance of the observations on line {} "
                                  "of {} is not positive definite at iteration {} of chain {}",
                                  data.line(t), data.source, iteration, chain + 1));
        u.S_inverse = o > 0 ? Eigen::MatrixXd(llt.solve(Eigen::MatrixXd::Identity(o, o)))
                            : Eigen::MatrixXd(0, 0);
        u.log_det = 0;
        for (Eigen::Index a = 0; a < o; ++a)
          u.log_det += 2 * std::log(Eigen::MatrixXd(llt.matrixL())(a, a));
        u.gain = P0 * Ho.transpose() * u.S_inverse;
        const Eigen::MatrixXd cov = P0 - u.gain * Ho * P0;
        const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (cov + cov.transpose()));
        u.root = eig.eigenvectors() * eig.eigenvalues().cwiseMax(0.0).cwiseSqrt().asDiagonal();
      }
      e.resize(o);
      for (Eigen::Index a = 0; a < o; ++a)
        e[a] = y[rows[a]] - dm[rows[a]] - H.row(rows[a]).dot(m0);
      if (o > 0)
        total += -0.5 * (static_cast<double>(o) * std::log(2 * std::numbers::pi) + u.log_det +
                         e.dot(u.S_inverse * e));
      for (int64_t c = 0; c < n; ++c)
        z[c] = detail::std_normal_at(seed, chain, iteration, kSiteLatent,
                                     static_cast<uint32_t>(t * n + c));
      const Eigen::VectorXd draw = m0 + u.gain * e + u.root * z;
      for (int64_t c = 0; c < n; ++c)
        x[static_cast<size_t>(t * n + c)] = draw[c];
    }
    return total;
  }
};

// The start of a chain: the given values for the first, dispersed ones on the unconstrained
// scale for the others (as pmmh's), so that R-hat can see a chain that has not mixed.
std::vector<double> chain_start(const MethodRun& run, const ParameterSpace& space, uint32_t chain) {
  std::vector<double> theta = *run.fixed;
  if (chain > 0) {
    const size_t n = static_cast<size_t>(space.n_theta());
    std::vector<double> u = space.unconstrain({theta.data(), n});
    for (size_t k = 0; k < u.size(); ++k)
      u[k] += philox_u01(run.seed, chain, 0, kSiteChainStart, static_cast<uint32_t>(k)) - 0.5;
    space.constrain(u, {theta.data(), n});
  }
  return theta;
}

// lp__ (the log posterior of theta up to a constant: the log prior plus `log_likelihood`),
// theta and the imputed values, as a kept draw.
void keep(const ModelInfo& info, const ssm_model& model, const std::vector<double>& theta,
          double log_likelihood, Posterior::Chain& out, std::vector<double>& prior) {
  prior.assign(1 + static_cast<size_t>(info.n_theta), 0.0);
  model.prior_logpdf(theta.data(), prior.data());
  out.theta.emplace_back(theta.begin(), theta.begin() + info.n_theta);
  out.lp.push_back(prior[0] + log_likelihood);
  out.accept_stat.push_back(1.0);
  out.imputed.emplace_back();
}

Posterior::Chain run_chain(const Setup& s, uint32_t chain,
                           const std::function<void(int64_t, int64_t)>& progress) {
  const MethodRun& run = s.run;
  const ModelInfo& info = run.info;
  const ObsData& data = *run.data;
  const Items& items = s.items;
  const int64_t d = info.n_state, m = info.n_obs;
  const uint64_t seed = run.seed;
  std::vector<double> theta = chain_start(run, s.space, chain);
  std::vector<double> x = items.latents, y = data.y, ybuf(static_cast<size_t>(m)), prior;
  FreeItems free_items(run.model, info, s.finite);
  ClosedFormMStep stats = s.draws.statistics();
  Posterior::Chain out;
  const int64_t total = s.opt.warmup + s.opt.iterations;
  StepPoints one;
  one.count = 1;
  one.prev.assign(static_cast<size_t>(d), std::nan(""));
  one.weight = {1.0};
  for (int64_t i = 1; i <= total; ++i) {
    const auto it = static_cast<uint32_t>(i);
    Frame frame(info, theta);
    const double* shared = frame.step(nullptr, nullptr);
    const ItemFrame item_frame = [&](int64_t t) {
      return info.n_inputs > 0 ? frame.step(data.inputs_at(t), nullptr) : shared;
    };
    // The free items' latents given theta.
    const double log_likelihood =
        items.free.empty() || d == 0 ? 0
                                     : free_items.draw(item_frame, items, data, seed, chain, it, x);
    // Missing observations given the latents.
    const uint64_t obs_seed = mix_seed(seed ^ mix_seed((static_cast<uint64_t>(chain) << 40) + it));
    for (size_t k = 0; k < items.missing.size(); ++k) {
      const auto [t, c] = items.missing[k];
      if (k == 0 || items.missing[k - 1].first != t)
        run.model.obs_sample(item_frame(t), obs_seed, t, 0, 1, 1, x.data() + t * d, ybuf.data());
      y[static_cast<size_t>(t * m + c)] = ybuf[static_cast<size_t>(c)];
    }
    if (i > s.opt.warmup) {
      // The likelihood: the free items' observations, and the given items' latents and
      // observations.
      double ll = log_likelihood;
      for (int64_t t : items.given) {
        double a = 0, b = 0;
        const double* f = item_frame(t);
        if (d > 0)
          run.model.init_logpdf(f, 0, 1, 1, x.data() + t * d, &a);
        run.model.obs_logpdf(f, t, 0, 1, 1, x.data() + t * d, data.at(t), &b);
        ll += a + b;
      }
      keep(info, run.model, theta, ll, out, prior);
      std::vector<double>& imputed = out.imputed.back();
      for (const Items::Imputed& v : items.imputed)
        imputed.push_back(v.obs ? y[static_cast<size_t>(v.item * m + v.c)]
                                : x[static_cast<size_t>(v.item * d + v.c)]);
    }
    // The parameters given the completed data.
    stats.reset();
    for (int64_t t = 0; t < items.T; ++t) {
      one.cur.assign(x.begin() + t * d, x.begin() + (t + 1) * d);
      stats.add(t, one, &y[static_cast<size_t>(t * m)], data.inputs_at(t));
    }
    s.draws.draw(theta, stats, seed, chain, it);
    if (progress)
      progress(i, total);
  }
  out.acceptance_rate = 1;
  return out;
}

// What every gibbs posterior says before its chains run: the learned parameters, the warmup and
// iterations, and each parameter's conditional (the caller adds its own details).
Posterior gibbs_posterior(const ModelInfo& info, const ParameterSpace& space,
                          const SampleOptions& opt, const ConjugateDraws& draws) {
  Posterior post;
  post.exact_likelihood = true;
  post.warmup = opt.warmup;
  post.iterations = opt.iterations;
  for (const LearnedParam& p : space.learned())
    post.learned.push_back(info.params[p.index].name);
  nlohmann::json conditionals = nlohmann::json::object();
  for (const auto& [name, what] : draws.conditionals())
    conditionals[name] = what;
  post.details = {{"conditionals", conditionals}};
  return post;
}

// Runs `opt.chains` chains, `chain(c, progress)` each, in parallel on the run's threads; chain 1
// reports progress.
template <class Chain>
void run_chains(const MethodRun& run, const SampleOptions& opt, Posterior& post,
                const Chain& chain) {
  post.chains.resize(static_cast<size_t>(opt.chains));
  run_independent(opt.chains, run.threads, [&](int64_t c) {
    post.chains[static_cast<size_t>(c)] =
        chain(static_cast<uint32_t>(c), c == 0 ? run.progress : nullptr);
  });
}

// A time series: each sweep draws every series' state path from its exact smoothing law
// (forward filtering, backward sampling), then the parameters given the paths and the
// observations (a missing one leaves its pieces out at its step: it is marginalised).
struct SeriesSetup {
  const MethodRun& run;
  const ParameterSpace& space;
  const SampleOptions& opt;
  const ConjugateDraws& draws;
  const std::vector<ObsData>& series;
  const std::vector<int64_t>& first_row; // of each series in the data
  bool finite = false;
};

Posterior::Chain run_series_chain(const SeriesSetup& s, uint32_t chain,
                                  const std::function<void(int64_t, int64_t)>& progress) {
  const MethodRun& run = s.run;
  const ModelInfo& info = run.info;
  const int64_t d = info.n_state;
  const uint64_t seed = run.seed;
  std::vector<double> theta = chain_start(run, s.space, chain), prior;
  std::vector<std::vector<double>> paths(s.series.size());
  ClosedFormMStep stats = s.draws.statistics();
  Posterior::Chain out;
  const int64_t total = s.opt.warmup + s.opt.iterations;
  StepPoints one;
  one.count = 1;
  one.weight = {1.0};
  for (int64_t i = 1; i <= total; ++i) {
    const auto it = static_cast<uint32_t>(i);
    double log_likelihood = 0;
    for (size_t k = 0; k < s.series.size(); ++k) {
      const auto row = static_cast<uint32_t>(s.first_row[k]);
      double ll = 0;
      paths[k] = s.finite ? finite_path_draw(
                                run.model, info, theta, s.series[k],
                                [&](int64_t t) {
                                  return philox_u01(seed, chain, it, kSiteLatent,
                                                    row + static_cast<uint32_t>(t));
                                },
                                ll)
                          : kalman_path_draw(
                                run.model, info, theta, s.series[k],
                                [&](int64_t t, int64_t c) {
                                  return detail::std_normal_at(seed, chain, it, kSiteLatent,
                                                               (row + static_cast<uint32_t>(t)) *
                                                                       static_cast<uint32_t>(d) +
                                                                   static_cast<uint32_t>(c));
                                },
                                ll);
      log_likelihood += ll;
    }
    if (i > s.opt.warmup) {
      keep(info, run.model, theta, log_likelihood, out, prior);
      for (const std::vector<double>& path : paths)
        out.imputed.back().insert(out.imputed.back().end(), path.begin(), path.end());
    }
    stats.reset();
    for (size_t k = 0; k < s.series.size(); ++k)
      for (int64_t t = 0; t < s.series[k].T; ++t) {
        const auto at = paths[k].begin() + t * d;
        if (t == 0)
          one.prev.assign(static_cast<size_t>(d), std::nan(""));
        else
          one.prev.assign(at - d, at);
        one.cur.assign(at, at + d);
        stats.add(t, one, s.series[k].at(t), s.series[k].inputs_at(t));
      }
    s.draws.draw(theta, stats, seed, chain, it);
    if (progress)
      progress(i, total);
  }
  out.acceptance_rate = 1;
  return out;
}

Posterior sample_series(const MethodRun& run, const SampleOptions& opt,
                        const ParameterSpace& space) {
  const ModelInfo& info = run.info;
  const ObsData& data = *run.data;
  const bool finite = enumerable(info); // else linear-Gaussian: gibbs_refusal checked
  // A missing observation that another relation reads: the statistics would drop its piece at
  // that step, though the other relation's density still depends on its parameters.
  const std::vector<int64_t>& read = info.em_steps.observations_read;
  for (int64_t t = 0; t < data.T; ++t)
    for (int64_t c : read)
      if (std::isnan(data.at(t)[c]))
        throw Error(fmt::format("{}:{}: column '{}' is missing, and another relation reads it: "
                                "the parameters' conditionals would not be exact (gibbs "
                                "marginalises a missing observation of a time series only when "
                                "nothing else reads it)",
                                data.source, data.line(t), obs_columns(info)[c]));
  std::vector<ObsData> series;
  std::vector<int64_t> first_row;
  const bool several = !data.series.start.empty();
  for (int64_t k = 0; k < data.series.count(); ++k) {
    series.push_back(several ? data.one_series(k) : data);
    first_row.push_back(several ? data.series.start[k] : 0);
  }
  const ConjugateDraws draws(run.model, info, space, *run.fixed, series);
  Posterior post = gibbs_posterior(info, space, opt, draws);
  post.likelihood = finite ? "forward" : "kalman";
  for (int64_t t = 0; t < data.T; ++t) // the rows of the data, 1-based as Stan's indices
    for (const VarInfo& v : info.state)
      for (int64_t c = 0; c < v.size; ++c)
        post.imputed_names.push_back(imputed_name(v, t, c));
  post.details["series"] = series.size();
  post.details["steps"] = data.T;
  post.details["states"] = "the state path, drawn by forward filtering and backward sampling";
  const SeriesSetup setup{run, space, opt, draws, series, first_row, finite};
  run_chains(run, opt, post, [&](uint32_t c, const auto& progress) {
    return run_series_chain(setup, c, progress);
  });
  return post;
}

} // namespace

Refusal gibbs_refusal(const ssm_model& model, const ModelInfo& info) {
  if (Refusal why = networks_refusal(info))
    return why;
  if (!info.net_calls.empty()) // a guide's: their outputs sit in the state beside the latents
    return "the model declares a guide with networks, which only vi runs";
  if (info.em_steps.params.empty())
    return "the model's metadata has no em-m-steps analysis (built by an older ssmc)";
  if (!model.prior_logpdf)
    return fmt::format("the compiler derived no prior density: {}", info.no_prior_reason);
  if (info.step != "n" && !exact_latents(model, info))
    return "gibbs draws a time series' state path exactly, which needs finite or "
           "linear-Gaussian states (`info` says why this model's are neither); sample by pmmh";
  return std::nullopt;
}

Posterior sample_gibbs(const MethodRun& run, const SampleOptions& opt) {
  const ModelInfo& info = run.info;
  if (Refusal why = gibbs_refusal(run.model, info))
    throw Error(fmt::format("sample --method gibbs: {}", *why));
  for (const VarInfo& v : info.state)
    if (v.hidden) // x@lag2: a copy of x[t-2] that makes the state first-order
      throw Error(fmt::format("sample --method gibbs: the model reads '{}' at a lag beyond 1, "
                              "carried in a hidden copy of the state, which gibbs does not draw "
                              "yet; sample by pmmh",
                              v.name.substr(0, v.name.find('@'))));
  const ParameterSpace space = sampled_parameters(run, opt.fixed);
  if (info.step != "n")
    return sample_series(run, opt, space);
  const ConjugateDraws draws(run.model, info, space, *run.fixed, {});
  const Items items = split_items(info, *run.data);
  const bool finite = enumerable(info);
  if (!items.free.empty() && info.n_state > 0 && !exact_latents(run.model, info))
    throw Error(fmt::format("sample --method gibbs: {} items do not give their latent values "
                            "(the first on line {} of {}), and gibbs draws them exactly only "
                            "when the latents are finite or linear-Gaussian (`info` says why "
                            "this model's are neither); give them, or sample by pmmh",
                            items.free.size(), run.data->line(items.free[0]), run.data->source));

  Posterior post = gibbs_posterior(info, space, opt, draws);
  post.likelihood = items.free.empty() || info.n_state == 0 ? "none: every latent value given"
                    : finite                                ? "forward"
                                                            : "kalman";
  auto var_of = [](const std::vector<VarInfo>& vars, int64_t c) -> const VarInfo& {
    return *std::find_if(vars.begin(), vars.end(),
                         [&](const VarInfo& v) { return c >= v.offset && c < v.offset + v.size; });
  };
  for (const Items::Imputed& v : items.imputed) {
    const VarInfo& var = var_of(v.obs ? info.obs : info.state, v.c);
    post.imputed_names.push_back(imputed_name(var, v.item, v.c - var.offset));
  }

  post.details["items"] = items.T;
  post.details["items_given"] = items.given.size();
  post.details["items_drawn"] = items.free.size();
  post.details["observations_drawn"] = items.missing.size();
  const Setup setup{run, space, opt, draws, items, finite};
  run_chains(run, opt, post,
             [&](uint32_t c, const auto& progress) { return run_chain(setup, c, progress); });
  return post;
}

} // namespace ssm
