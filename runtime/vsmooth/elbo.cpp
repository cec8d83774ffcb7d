// The ELBO of a backward guide: see elbo.h.
#include "vsmooth/elbo.h"
#include "core/results.h"
#include "nn/tensor_values.h"

#include <cmath>

namespace ssm::vsmooth {

namespace {

using torch::indexing::Slice;

// The states structure-of-arrays, as the kernels read them: component c of state k at c K + k.
std::vector<double> to_soa(const torch::Tensor& x) {
  const torch::Tensor soa = x.t().contiguous();
  return {soa.data_ptr<double>(), soa.data_ptr<double>() + soa.numel()};
}

// E log N(v; 0, S) for v of mean r and covariance V, batched.
torch::Tensor expected_log_gaussian(const torch::Tensor& r, const torch::Tensor& V,
                                    const torch::Tensor& S) {
  const torch::Tensor L = torch::linalg_cholesky(S);
  const torch::Tensor quad =
      (r.unsqueeze(-2).matmul(torch::cholesky_solve(r.unsqueeze(-1), L))).squeeze(-1).squeeze(-1);
  const torch::Tensor trace = torch::diagonal(torch::cholesky_solve(V, L), 0, -2, -1).sum(-1);
  const torch::Tensor log_det = 2 * torch::log(torch::diagonal(L, 0, -2, -1)).sum(-1);
  return -0.5 * (static_cast<double>(r.size(-1)) * kLog2Pi + log_det + quad + trace);
}

// x_{t-1} as the kernels read it beside x_t's `xs`: NaN at t = 0, where no term may read it.
std::vector<double> prev_soa(int64_t t, const torch::Tensor& prev, const std::vector<double>& xs) {
  return t == 0 ? std::vector<double>(xs.size(), NAN) : to_soa(prev);
}

} // namespace

ModelDensities::ModelDensities(const ssm_model& model, const ModelInfo& info,
                               const std::vector<double>& fixed, const ObsData& data)
    : model_(model), info_(info), data_(data), frame_(info, fixed) {}

torch::Tensor ModelDensities::initial(const torch::Tensor& x) const {
  const int64_t K = x.size(0);
  const std::vector<double> soa = to_soa(x);
  std::vector<double> a(K), b(K);
  model_.init_logpdf(frame(0), 0, K, K, soa.data(), a.data());
  model_.obs_logpdf(frame(0), 0, 0, K, K, soa.data(), data_.at(0), b.data());
  for (int64_t k = 0; k < K; ++k)
    a[k] += b[k];
  return torch::tensor(a, f64());
}

torch::Tensor ModelDensities::observation(int64_t t, const torch::Tensor& x) const {
  const int64_t K = x.size(0);
  const std::vector<double> soa = to_soa(x);
  std::vector<double> out(K);
  model_.obs_logpdf(frame(t), t, 0, K, K, soa.data(), data_.at(t), out.data());
  return torch::tensor(out, f64());
}

torch::Tensor ModelDensities::transition(int64_t t, const torch::Tensor& prev,
                                         const torch::Tensor& x, bool pairs) const {
  const int64_t I = x.size(0), J = prev.size(0), n = pairs ? I * J : I;
  const int64_t p = x.size(1);
  // The kernel reads x_prev with the stride of x: a buffer of n slots, the first J used.
  std::vector<double> xs(p * n), prevs(p * n, 0.0), out(n);
  std::vector<int64_t> ancestors(n);
  const torch::Tensor xc = x.contiguous(), pc = prev.contiguous();
  const double* xv = xc.data_ptr<double>();
  const double* pv = pc.data_ptr<double>();
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = pairs ? k / J : k, j = pairs ? k % J : k;
    ancestors[k] = j;
    for (int64_t c = 0; c < p; ++c)
      xs[c * n + k] = xv[i * p + c];
  }
  for (int64_t j = 0; j < J; ++j)
    for (int64_t c = 0; c < p; ++c)
      prevs[c * n + j] = pv[j * p + c];
  model_.transition_logpdf(frame(t), t, 0, n, n, prevs.data(), ancestors.data(), xs.data(),
                           out.data());
  const torch::Tensor result = torch::tensor(out, f64());
  return pairs ? result.view({I, J}) : result;
}

torch::Tensor ModelDensities::pair_terms(ssm_functional_terms_fn kernel, int64_t width, int64_t t,
                                         const torch::Tensor& prev, const torch::Tensor& x) const {
  const int64_t K = x.size(0);
  const std::vector<double> xs = to_soa(x);
  const std::vector<double> ps = prev_soa(t, prev, xs);
  std::vector<double> out(width * K);
  kernel(frame(t), t, 0, K, K, ps.data(), nullptr, xs.data(), data_.at(t), out.data());
  return torch::tensor(out, f64()).view({width, K}).t();
}

torch::Tensor ModelDensities::functionals(int64_t t, const torch::Tensor& prev,
                                          const torch::Tensor& x) const {
  return pair_terms(model_.functional_terms, info_.n_functional, t, prev, x);
}

torch::Tensor ModelDensities::parameter_terms(int64_t t, const torch::Tensor& prev,
                                              const torch::Tensor& x) const {
  return pair_terms(model_.score_terms, info_.n_theta, t, prev, x);
}

std::pair<torch::Tensor, torch::Tensor>
ModelDensities::gradient(int64_t t, const torch::Tensor& prev, const torch::Tensor& x) const {
  const int64_t K = x.size(0), p = x.size(1);
  const std::vector<double> xs = to_soa(x);
  const std::vector<double> ps = prev_soa(t, prev, xs);
  std::vector<double> gx(p * K), gp(p * K);
  model_.state_gradient(frame(t), t, 0, K, K, ps.data(), nullptr, xs.data(), data_.at(t),
                        gx.data());
  model_.prev_state_gradient(frame(t), t, 0, K, K, ps.data(), nullptr, xs.data(), data_.at(t),
                             gp.data());
  return {torch::tensor(gx, f64()).view({p, K}).t(), torch::tensor(gp, f64()).view({p, K}).t()};
}

LinearGaussian linear_gaussian(const ssm_model& model, const ModelInfo& info,
                               const std::vector<double>& fixed, const ObsData& data,
                               int64_t steps) {
  const int64_t n = info.n_state, m = info.n_obs;
  const int64_t T = steps < 0 ? data.T : std::min(steps, data.T);
  const int64_t size = n + 3 * n * n + n + m * n + m + m * m;
  Frame frame(info, fixed);
  torch::Tensor all = torch::empty({T, size}, f64());
  for (int64_t t = 0; t < T; ++t)
    model.linear_gaussian(frame.step(data.inputs_at(t), t > 0 ? data.at(t - 1) : nullptr), t,
                          all[t].data_ptr<double>());
  LinearGaussian lg;
  int64_t at = 0;
  auto take = [&](std::vector<int64_t> shape) {
    int64_t k = 1;
    for (int64_t s : shape)
      k *= s;
    shape.insert(shape.begin(), T);
    torch::Tensor v = all.index({Slice(), Slice(at, at + k)}).reshape(shape);
    at += k;
    return v;
  };
  lg.m0 = take({n})[0];
  lg.P0 = take({n, n})[0];
  lg.F = take({n, n});
  lg.c = take({n});
  lg.Q = take({n, n});
  lg.H = take({m, n});
  lg.d = take({m});
  lg.R = take({m, m});
  return lg;
}

torch::Tensor closed_form_elbo(const GuidePass& q, const LinearGaussian& lg,
                               const torch::Tensor& y) {
  const int64_t T = y.size(0);
  const torch::Tensor& ms = q.smooth_mean;
  const torch::Tensor& Ps = q.smooth_cov;
  std::vector<torch::Tensor> terms(T);
  // Initial.
  terms[0] = expected_log_gaussian(ms[0] - lg.m0, Ps[0], lg.P0);
  // Transitions: x_t - F x_{t-1} - c has mean r and covariance V under q.
  if (T > 1) {
    const torch::Tensor F = lg.F.index({Slice(1, T)}), Ft = F.transpose(1, 2);
    const torch::Tensor prev = ms.index({Slice(0, T - 1)}), cur = ms.index({Slice(1, T)});
    const torch::Tensor r =
        cur - F.matmul(prev.unsqueeze(-1)).squeeze(-1) - lg.c.index({Slice(1, T)});
    const torch::Tensor FC = F.matmul(q.cross_cov); // F Cov(x_{t-1}, x_t)
    const torch::Tensor V = Ps.index({Slice(1, T)}) +
                            F.matmul(Ps.index({Slice(0, T - 1)})).matmul(Ft) - FC -
                            FC.transpose(1, 2);
    const torch::Tensor trans = expected_log_gaussian(r, V, lg.Q.index({Slice(1, T)}));
    for (int64_t t = 1; t < T; ++t)
      terms[t] = trans[t - 1];
  }
  // Observations, by their observed components.
  const torch::Tensor seen = ~torch::isnan(y);
  const torch::Tensor complete = seen.all(1);
  if (complete.all().item<bool>()) {
    const torch::Tensor e = y - lg.H.matmul(ms.unsqueeze(-1)).squeeze(-1) - lg.d;
    const torch::Tensor W = lg.H.matmul(Ps).matmul(lg.H.transpose(1, 2));
    const torch::Tensor obs = expected_log_gaussian(e, W, lg.R);
    for (int64_t t = 0; t < T; ++t)
      terms[t] = terms[t] + obs[t];
  } else {
    for (int64_t t = 0; t < T; ++t) {
      const torch::Tensor idx = torch::nonzero(seen[t]).squeeze(1);
      if (idx.numel() == 0)
        continue;
      const torch::Tensor H = lg.H[t].index_select(0, idx);
      const torch::Tensor e =
          y[t].index_select(0, idx) - H.matmul(ms[t]) - lg.d[t].index_select(0, idx);
      const torch::Tensor R = lg.R[t].index_select(0, idx).index_select(1, idx);
      terms[t] = terms[t] + expected_log_gaussian(e, H.matmul(Ps[t]).matmul(H.t()), R);
    }
  }
  return torch::stack(terms) + entropy_terms(q);
}

torch::Tensor entropy_terms(const GuidePass& q) {
  const int64_t T = q.mean.size(0), p = q.mean.size(1);
  const double gaussian = 0.5 * static_cast<double>(p) * (kLog2Pi + 1); // H(N(0, I_p))
  const torch::Tensor last = gaussian + 0.5 * torch::logdet(q.cov[T - 1]);
  if (T == 1)
    return last.view({1});
  const torch::Tensor backward =
      gaussian + torch::log(torch::diagonal(q.noise_chol, 0, -2, -1)).sum(-1); // [T-1]
  return torch::cat({torch::zeros({1}, f64()), backward.index({Slice(0, T - 2)}),
                     (backward[T - 2] + last).view({1})});
}

torch::Tensor draw_trajectories(const GuidePass& q, int64_t K, torch::Generator& gen) {
  const int64_t T = q.mean.size(0), p = q.mean.size(1);
  std::vector<torch::Tensor> x(T); // x[t]: [K, p]
  x[T - 1] = q.mean[T - 1] +
             torch::randn({K, p}, gen, f64()).matmul(torch::linalg_cholesky(q.cov[T - 1]).t());
  for (int64_t t = T - 1; t >= 1; --t)
    x[t - 1] = x[t].matmul(q.gain[t - 1].t()) + q.offset[t - 1] +
               torch::randn({K, p}, gen, f64()).matmul(q.noise_chol[t - 1].t());
  return torch::stack(x);
}

std::vector<double> ModelDensities::parameter_gradient(const torch::Tensor& x) const {
  const int64_t T = x.size(0);
  torch::Tensor sum = torch::zeros({info_.n_theta}, f64());
  for (int64_t t = 0; t < T; ++t)
    sum += parameter_terms(t, x[std::max<int64_t>(t - 1, 0)], x[t]).mean(0);
  return nn::to_vector(sum);
}

PathwiseStep pathwise_step(const GuidePass& q, const ModelDensities& model, int64_t K,
                           torch::Generator& gen) {
  const int64_t T = q.mean.size(0);
  const torch::Tensor xs = draw_trajectories(q, K, gen); // [T, K, p], with the guide's gradient
  const std::vector<torch::Tensor> x = xs.unbind(0);
  // The model at the draws, no gradient through it: each step's log-densities and their gradient
  // in x_t (the step's own and the next step's in its x_{t-1}).
  std::vector<torch::Tensor> log_p(T), grad(T);
  {
    torch::NoGradGuard no_grad;
    for (int64_t t = T - 1; t >= 0; --t) {
      const torch::Tensor cur = x[t].detach(), prev = t > 0 ? x[t - 1].detach() : cur;
      log_p[t] = t > 0 ? model.transition(t, prev, cur, false) + model.observation(t, cur)
                       : model.initial(cur);
      auto [at_t, at_prev] = model.gradient(t, prev, cur);
      grad[t] = grad[t].defined() ? grad[t] + at_t : at_t;
      if (t > 0)
        grad[t - 1] = at_prev;
    }
  }
  // log q at the draws by steps ([T, K]), the guide's parameters held fixed: -log q_{t-1|t} at t,
  // and log q_{T-1} at T - 1 too.
  std::vector<torch::Tensor> rows{torch::zeros({K}, f64())};
  if (T > 1) {
    using torch::indexing::Slice;
    const torch::Tensor next = xs.index({Slice(1, T)}), prev = xs.index({Slice(0, T - 1)});
    const torch::Tensor mean = next.matmul(q.gain.detach().transpose(1, 2)) +
                               q.offset.detach().unsqueeze(1); // [T-1, K, p]
    const torch::Tensor back =
        gaussian_log_density(prev, mean, q.noise_chol.detach().unsqueeze(1)); // [T-1, K]
    for (const torch::Tensor& row : back.unbind(0))
      rows.push_back(row);
  }
  rows.back() = rows.back() + gaussian_log_density(xs[T - 1], q.mean[T - 1].detach(),
                                                   torch::linalg_cholesky(q.cov[T - 1]).detach());
  const torch::Tensor log_q = torch::stack(rows); // [T, K]
  PathwiseStep step;
  step.draws = xs.detach();
  step.per_step = (torch::stack(log_p) - log_q.detach()).mean(1);
  torch::Tensor pathwise = (torch::stack(grad) * xs).sum();
  step.surrogate = (pathwise - log_q.sum()) / static_cast<double>(K);
  return step;
}

ScoreStep score_step(const GuidePass& q, const ModelDensities& model, int64_t N,
                     torch::Generator& gen) {
  const int64_t T = q.mean.size(0), p = q.mean.size(1);
  const torch::Tensor L = torch::linalg_cholesky(q.cov);
  const torch::Tensor eps = torch::randn({T, N, p}, gen, f64());
  const torch::Tensor xi =
      (q.mean.unsqueeze(1) + L.unsqueeze(1).matmul(eps.unsqueeze(-1)).squeeze(-1)).detach();
  const torch::Tensor log_q = gaussian_log_density(xi, q.mean.unsqueeze(1), L.unsqueeze(1));
  const torch::Tensor lq = log_q.detach();
  torch::Tensor log_back; // [T-1, N(i), N(j)]: log q_{t-1|t}(xi_{t-1}^j | xi_t^i)
  if (T > 1) {
    const torch::Tensor back_mean =
        q.gain.unsqueeze(1).matmul(xi.index({Slice(1, T)}).unsqueeze(-1)).squeeze(-1) +
        q.offset.unsqueeze(1);
    // |L^-1 (xi_{t-1}^j - m_i)|^2 = |u_j|^2 + |v_i|^2 - 2 u_j . v_i with u = L^-1 xi_{t-1} and
    // v = L^-1 m: O(T N^2) memory rather than the differences' O(T N^2 p).
    const torch::Tensor eye = torch::eye(p, f64()).expand({T - 1, p, p});
    const torch::Tensor L_inv = torch::linalg_solve_triangular(q.noise_chol, eye, false);
    const torch::Tensor u = xi.index({Slice(0, T - 1)}).matmul(L_inv.transpose(1, 2));
    const torch::Tensor v = back_mean.matmul(L_inv.transpose(1, 2));
    const torch::Tensor quad = v.square().sum(-1).unsqueeze(2) + u.square().sum(-1).unsqueeze(1) -
                               2 * v.matmul(u.transpose(1, 2));
    const torch::Tensor log_det = 2 * torch::log(torch::diagonal(q.noise_chol, 0, -2, -1)).sum(-1);
    log_back = -0.5 * (static_cast<double>(p) * kLog2Pi + log_det.view({T - 1, 1, 1}) + quad);
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> H(T), weights(std::max<int64_t>(T - 1, 0)), incr(weights.size());
  H[0] = model.initial(xi[0]) - lq[0];
  for (int64_t t = 1; t < T; ++t) {
    const torch::Tensor lb = log_back[t - 1].detach();
    const torch::Tensor h = model.transition(t, xi[t - 1], xi[t], true) +
                            model.observation(t, xi[t]).unsqueeze(1) + lq[t - 1].unsqueeze(0) -
                            lq[t].unsqueeze(1) - lb; // compact h_t(xi_{t-1}^j, xi_t^i)
    weights[t - 1] = torch::softmax(lb - lq[t - 1].unsqueeze(0), 1);
    incr[t - 1] = H[t - 1].unsqueeze(0) + h;
    H[t] = (weights[t - 1] * incr[t - 1]).sum(1);
  }
  ScoreStep step;
  std::vector<torch::Tensor> means;
  for (const torch::Tensor& h : H)
    means.push_back(h.mean());
  step.per_step = torch::stack(means);
  torch::Tensor beta = torch::full({N}, 1.0 / static_cast<double>(N), f64());
  std::vector<torch::Tensor> coef(weights.size());
  for (int64_t t = T - 1; t >= 1; --t) {
    coef[t - 1] = beta.unsqueeze(1) * weights[t - 1] * (incr[t - 1] - H[t].unsqueeze(1));
    beta = (beta.unsqueeze(1) * weights[t - 1]).sum(0);
  }
  // The baseline of (4.12) leaves draw i out: mean_{k != i} H_T^k (the mean over all k would
  // scale the term by (N - 1) / N).
  const torch::Tensor last = (H[T - 1] - H[T - 1].mean()) / static_cast<double>(N - 1);
  {
    torch::AutoGradMode enable(true);
    step.surrogate = (last * log_q[T - 1]).sum();
    if (T > 1)
      step.surrogate = step.surrogate + (torch::stack(coef) * log_back).sum();
  }
  return step;
}

TrajectoryEstimates estimate_by_trajectories(const GuidePass& q, const ModelDensities& model,
                                             int64_t K, torch::Generator& gen) {
  const int64_t T = q.mean.size(0), p = q.mean.size(1);
  const int64_t nf = model.n_functional();
  TrajectoryEstimates e;
  e.functional_sums = torch::zeros({K, nf}, f64());
  e.functional_means = torch::zeros({T, nf}, f64());
  const torch::Tensor L = torch::linalg_cholesky(q.cov[T - 1]);
  torch::Tensor x = q.mean[T - 1] + torch::randn({K, p}, gen, f64()).matmul(L.t());
  e.log_weight = -gaussian_log_density(x, q.mean[T - 1], L);
  for (int64_t t = T - 1; t >= 1; --t) {
    const torch::Tensor mean = x.matmul(q.gain[t - 1].t()) + q.offset[t - 1];
    const torch::Tensor prev =
        mean + torch::randn({K, p}, gen, f64()).matmul(q.noise_chol[t - 1].t());
    e.log_weight = e.log_weight - gaussian_log_density(prev, mean, q.noise_chol[t - 1]) +
                   model.transition(t, prev, x, false) + model.observation(t, x);
    if (nf > 0) {
      const torch::Tensor terms = model.functionals(t, prev, x);
      e.functional_sums += terms;
      e.functional_means[t] = terms.mean(0);
    }
    x = prev;
  }
  e.log_weight = e.log_weight + model.initial(x);
  if (nf > 0) {
    const torch::Tensor terms = model.functionals(0, x, x);
    e.functional_sums += terms;
    e.functional_means[0] = terms.mean(0);
  }
  return e;
}

} // namespace ssm::vsmooth
