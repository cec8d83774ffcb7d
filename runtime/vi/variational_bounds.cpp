// The bounds of a plate model's variational fit, per item and (--param-guide) over the
// parameters' draws: see variational_problem.h.
#include "vi/variational_problem.h"

#include <numeric>

namespace ssm {

int64_t items_per_chunk(const VariationalProblem::Impl& p, int64_t K) {
  int64_t per_item = K * p.plan.enumeration * std::max<int64_t>(1, p.run.info.n_state);
  // A dif's density at its M points per draw runs its weight network on M^2 rows.
  for (const GuidePlan::Dif& d : p.plan.difs)
    per_item += K * d.components * d.components *
                (2 * d.width + d.components + 2 * static_cast<int64_t>(d.columns.size()));
  // A recurrent network runs on each row's longest sequence: its states and its outputs.
  int64_t longest = 0;
  for (const torch::Tensor& lengths : p.item_sequences.lengths)
    longest = std::max(longest, lengths.numel() > 0 ? lengths.max().item<int64_t>() : 0);
  for (const NetInfo& net : p.run.info.nets)
    if (net.over_sequences())
      per_item += K * p.plan.enumeration * longest *
                  (net.embedding + net.inputs +
                   (net.cell == "gru" ? 4 : 6) * net.hidden.at(0) * net.layers + net.vocab);
  return std::max<int64_t>(1, (int64_t{1} << 22) / per_item);
}

VariationalFit::Bounds evaluate_bounds(VariationalProblem::Impl& p) {
  torch::NoGradGuard no_grad;
  VariationalFit::Bounds b;
  const int64_t N = p.data.T, K = p.opt.eval_samples;
  b.samples = K;
  const int64_t chunk = items_per_chunk(p, K);
  std::vector<double> z_mean, z_sd; // [n * C + c]
  for (int64_t first = 0; first < N; first += chunk) {
    std::vector<int64_t> items(std::min(chunk, N - first));
    std::iota(items.begin(), items.end(), first);
    // Draws of their own: the steps after training's.
    const ObjectiveTerms t = p.terms(items, K, p.opt.iterations + 1 + first / chunk, true);
    // Monte Carlo standard errors: of a mean of K draws, and of log of the mean of the weights
    // by the delta method, sd(w) / (sqrt(K) mean(w)) (0 with one draw).
    const double k = static_cast<double>(K);
    const torch::Tensor elbo_se =
        K > 1 ? t.value_k.std(1) / std::sqrt(k) : torch::zeros_like(t.elbo);
    const torch::Tensor w = (t.log_w - std::get<0>(t.log_w.max(1, true))).exp();
    const torch::Tensor iwae_se =
        K > 1 ? w.std(1) / (std::sqrt(k) * w.mean(1)) : torch::zeros_like(t.elbo);
    if (t.z_mean.defined())
      for (const auto& [out, v] : {std::pair{&z_mean, t.z_mean}, {&z_sd, t.z_sd}}) {
        const std::vector<double> vals = to_vector(v);
        out->insert(out->end(), vals.begin(), vals.end());
      }
    for (const auto& [out, v] : {std::pair{&b.elbo, t.elbo},
                                 {&b.iwae, t.iwae},
                                 {&b.kl, t.kl},
                                 {&b.elbo_se, elbo_se},
                                 {&b.iwae_se, iwae_se}}) {
      const std::vector<double> vals = to_vector(v);
      out->insert(out->end(), vals.begin(), vals.end());
    }
  }
  b.guide_columns = p.guide.columns();
  b.guide = p.guide.moments(p.items_given);
  // A bounded component's mean and sd on its own scale, from the draws; every component's
  // marginal over θ's draws when the guides are conditional on them.
  const int64_t C = static_cast<int64_t>(p.plan.continuous.size());
  if (p.item_mean.defined()) {
    const std::vector<double> m = to_vector(p.item_mean), s = to_vector(p.item_sd);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) {
        b.guide[n][2 * c] = m[n * C + c];
        b.guide[n][2 * c + 1] = s[n * C + c];
      }
    return b;
  }
  for (int64_t c = 0; c < C; ++c)
    if (p.guide.moments_from_draws(c))
      for (int64_t n = 0; n < N; ++n) {
        b.guide[n][2 * c] = z_mean[n * C + c];
        b.guide[n][2 * c + 1] = z_sd[n * C + c];
      }
  return b;
}

ParameterVariationalFit evaluate_parameters(VariationalProblem::Impl& p, int64_t first_step) {
  torch::NoGradGuard no_grad;
  const flows::DensityModel& q = *p.q_theta;
  const ParameterVariationalOptions& o = *p.opt.parameter_guide;
  const int64_t N = p.data.T, J = o.draws, n_theta = p.run.info.n_theta;
  ParameterVariationalFit fit;
  describe_parameters(fit, p.run.info, *p.space, !p.prior->from_file());
  fit.likelihood = fmt::format("estimated: per item, the mean of {} importance weight{} of the "
                               "items' guides{}",
                               p.opt.samples, p.opt.samples == 1 ? "" : "s",
                               p.items_conditional ? " q(z_n | θ)" : "");
  fit.item_guide = p.items_conditional ? "linear" : "independent";
  fit.family = flows::describe(q.density->spec());
  fit.family_parameters = q.parameter_count();
  const int64_t chunk = items_per_chunk(p, p.opt.samples);
  const torch::Tensor u = q.sample(J).to(torch::kFloat64).contiguous();
  const torch::Tensor log_q = q.log_prob(u);
  auto log_p = torch::empty({J}, torch::kFloat64);
  std::vector<double> elbo(J);
  // Conditional guides: each item's first and second moments summed over the draws, and the
  // number of draws behind them.
  const int64_t C = static_cast<int64_t>(p.plan.continuous.size());
  const bool moments = p.items_conditional && C > 0;
  torch::Tensor m1 = torch::zeros({N, C}, torch::kFloat64), m2 = torch::zeros_like(m1);
  int64_t moment_draws = 0;
  for (int64_t j = 0; j < J; ++j) {
    double lp = -INFINITY, e = -INFINITY;
    try { // θ that overflows, far out on a log or logit scale: -inf
      const std::vector<double> point = to_vector(u[j]);
      const double prior = p.prior->value(point);
      const torch::Tensor theta = p.theta_at(u[j]), given = p.standardised(u[j]);
      double iwae = 0, elbo_items = 0;
      torch::Tensor draw_m1 = torch::zeros_like(m1), draw_m2 = torch::zeros_like(m2);
      for (int64_t first = 0; first < N; first += chunk) {
        std::vector<int64_t> items(std::min(chunk, N - first));
        std::iota(items.begin(), items.end(), first);
        // Each draw's latents from steps of its own, after training's and the bounds'.
        const ObjectiveTerms t = p.terms(items, p.opt.samples,
                                         first_step + j * ((N + chunk - 1) / chunk) + first / chunk,
                                         true, 1, {}, theta, given);
        iwae += t.iwae.sum().item<double>();
        elbo_items += t.elbo.sum().item<double>();
        if (moments) {
          const int64_t I = static_cast<int64_t>(items.size());
          draw_m1.narrow(0, first, I).copy_(t.z_mean);
          draw_m2.narrow(0, first, I).copy_(t.z_square);
        }
      }
      if (moments && std::isfinite(iwae)) {
        m1 += draw_m1;
        m2 += draw_m2;
        ++moment_draws;
      }
      lp = iwae + prior;
      e = elbo_items + prior - log_q[j].item<double>();
    } catch (const Error&) {
    }
    log_p.data_ptr<double>()[j] = lp;
    elbo[j] = std::isnan(e) ? -INFINITY : e;
  }
  if (moment_draws > 0) { // the law of total variance over θ's draws and each item's
    const double n = static_cast<double>(moment_draws * p.opt.samples);
    p.item_mean = m1 / static_cast<double>(moment_draws);
    p.item_sd =
        ((m2 / static_cast<double>(moment_draws) - p.item_mean.pow(2)) * (n / std::max(1.0, n - 1)))
            .clamp_min(0)
            .sqrt();
  }
  // As the state-space path's: the mean of the draws' terms and its standard error.
  const torch::Tensor terms = torch::tensor(elbo, torch::kFloat64);
  fit.elbo = terms.mean().item<double>();
  fit.elbo_se = J > 1 ? terms.std().item<double>() / std::sqrt(static_cast<double>(J)) : NAN;
  fit.eval_samples = J;
  std::vector<double> base = p.fixed;
  record_parameter_draws(
      fit, u, log_q, log_p,
      [&](std::span<const double> point) {
        std::vector<double> theta = base;
        p.space->constrain(point, {theta.data(), static_cast<size_t>(n_theta)});
        theta.resize(static_cast<size_t>(n_theta));
        return theta;
      },
      n_theta);
  fit.guide_state = flows::density_model_bytes(q);
  return fit;
}

} // namespace ssm
