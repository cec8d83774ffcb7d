// The Kalman filter, RTS smoother and unscented Kalman filter (exact/kalman.h) with Eigen. Both
// filters share one Gaussian update (by the observed components); the smoother gain
// solves with a complete orthogonal decomposition, so a singular predicted covariance (a state
// component without noise) is handled.
#include "exact/kalman.h"
#include "core/error.h"
#include "core/results.h"
#include "exact/methods.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <numbers>

namespace ssm {

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

} // namespace

LinearGaussianStep linear_gaussian_step(const ssm_model& model, const double* frame, int64_t t,
                                        int64_t n, int64_t m, std::vector<double>& buffer) {
  buffer.assign(n + 3 * n * n + n + m * n + m + m * m, NAN);
  model.linear_gaussian(frame, t, buffer.data());
  const double* p = buffer.data();
  auto vec = [&](int64_t k) {
    VectorXd v = Eigen::Map<const VectorXd>(p, k);
    p += k;
    return v;
  };
  auto mat = [&](int64_t r, int64_t c) {
    MatrixXd a = Eigen::Map<const RowMajor>(p, r, c);
    p += r * c;
    return a;
  };
  LinearGaussianStep s;
  s.m0 = vec(n);
  s.P0 = mat(n, n);
  s.F = mat(n, n);
  s.c = vec(n);
  s.Q = mat(n, n);
  s.H = mat(m, n);
  s.d = vec(m);
  s.R = mat(m, m);
  return s;
}

namespace {

// The Gaussian update of (mean, cov) by the observed components of y, given the predicted
// observation yhat, its covariance S and the cross-covariance C = Cov(x, y); returns the
// log-likelihood increment (0 when nothing is observed).
double gaussian_update(VectorXd& mean, MatrixXd& cov, const double* y, const VectorXd& yhat,
                       const MatrixXd& S, const MatrixXd& C, int64_t t, const char* who) {
  std::vector<int64_t> seen;
  for (int64_t k = 0; k < yhat.size(); ++k)
    if (!std::isnan(y[k]))
      seen.push_back(k);
  if (seen.empty())
    return 0;
  const auto o = static_cast<int64_t>(seen.size());
  VectorXd v(o);
  MatrixXd So(o, o), Co(mean.size(), o);
  for (int64_t a = 0; a < o; ++a) {
    v[a] = y[seen[a]] - yhat[seen[a]];
    Co.col(a) = C.col(seen[a]);
    for (int64_t b = 0; b < o; ++b)
      So(a, b) = S(seen[a], seen[b]);
  }
  const Eigen::LLT<MatrixXd> llt(So);
  if (llt.info() != Eigen::Success || !So.allFinite())
    throw Error(fmt::format("{}: the innovation covariance at t={} is not positive definite (an "
                            "observation without noise, or invalid parameters)",
                            who, t));
  const MatrixXd K = llt.solve(Co.transpose()).transpose(); // C S^-1
  double log_det = 0;
  for (int64_t a = 0; a < o; ++a)
    log_det += 2 * std::log(llt.matrixL()(a, a));
  mean += K * v;
  cov -= K * So * K.transpose();
  cov = 0.5 * (cov + cov.transpose());
  return -0.5 *
         (static_cast<double>(o) * std::log(2 * std::numbers::pi) + log_det + v.dot(llt.solve(v)));
}

// A result with room for the moments and increments of T steps.
FilterResult sized_result(int64_t T, int64_t n) {
  FilterResult r;
  r.T = T;
  r.n_state = n;
  r.mean.resize(T * n);
  r.var.resize(T * n);
  r.loglik_increment.resize(T);
  return r;
}

// Step t of a Gaussian filter into its result: moments, increment, log-likelihood. A value that
// is not finite (an observation far in the tail: its squared distance overflows) stops the run
// naming the step, rather than giving a log-likelihood of -inf or NaN.
void record_step(FilterResult& r, int64_t t, const VectorXd& mean, const MatrixXd& cov,
                 double increment, const char* who, const ModelInfo& info, const ObsData& data) {
  if (!std::isfinite(increment) || !mean.allFinite() || !cov.allFinite())
    throw Error(fmt::format("{}: the log-likelihood is not finite at t={} ({}): the observation is "
                            "too far from its prediction to evaluate in double precision; check "
                            "the data on that line and the parameter values (--param)",
                            who, t, data_row_text(info, data, t)));
  const int64_t n = mean.size();
  r.loglik_increment[t] = increment;
  r.log_likelihood += increment;
  for (int64_t c = 0; c < n; ++c) {
    r.mean[t * n + c] = mean[c];
    r.var[t * n + c] = cov(c, c);
  }
}

// Everything the smoother needs from the forward pass.
struct Forward {
  FilterResult result;
  std::vector<VectorXd> pred_mean, filt_mean; // per t
  std::vector<MatrixXd> pred_cov, filt_cov;
  std::vector<MatrixXd> F; // F of each step (F[t] maps x_{t-1} to x_t; F[0] unused)
};

// The smoother's gain of x_t on x_{t+1}, G = P_f F' P_pred^-1, from P_pred G' = F P_f: a
// complete orthogonal decomposition, so a singular predicted covariance is handled. RTS and the
// backward sampling of a path both condition x_t on x_{t+1} through it.
MatrixXd smoother_gain(const Forward& f, int64_t t) {
  return f.pred_cov[t + 1]
      .completeOrthogonalDecomposition()
      .solve(f.F[t + 1] * f.filt_cov[t])
      .transpose();
}

Forward run_forward(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
                    const ObsData& data) {
  if (!model.linear_gaussian)
    throw Error("the model table has no linear_gaussian kernel (the model is not "
                "linear-Gaussian, or was compiled by an older ssmc)");
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = info.n_state, m = info.n_obs, T = data.T;
  const std::vector<double> frames = all_frames(info, fixed, data);
  Forward f;
  f.result = sized_result(T, n);
  FilterResult& r = f.result;
  f.pred_mean.resize(T);
  f.filt_mean.resize(T);
  f.pred_cov.resize(T);
  f.filt_cov.resize(T);
  f.F.resize(T);
  std::vector<double> buffer;
  VectorXd mean;
  MatrixXd cov;
  for (int64_t t = 0; t < T; ++t) {
    require_previous_obs(info, data, t);
    const LinearGaussianStep s =
        linear_gaussian_step(model, frames.data() + t * info.n_frame, t, n, m, buffer);
    if (t == 0) {
      mean = s.m0;
      cov = s.P0;
    } else {
      mean = s.F * mean + s.c;
      cov = s.F * cov * s.F.transpose() + s.Q;
      f.F[t] = s.F;
    }
    if (!mean.allFinite() || !cov.allFinite())
      throw Error(fmt::format("{}: the predicted state at t={} is not finite (check the "
                              "parameters)",
                              kKalmanName, t));
    f.pred_mean[t] = mean;
    f.pred_cov[t] = cov;
    // Update: predicted observation H m + d, its covariance H P H' + R, Cov(x, y) = P H'.
    const double increment =
        gaussian_update(mean, cov, data.at(t), s.H * mean + s.d, s.H * cov * s.H.transpose() + s.R,
                        cov * s.H.transpose(), t, kKalmanName);
    f.filt_mean[t] = mean;
    f.filt_cov[t] = cov;
    record_step(r, t, mean, cov, increment, kKalmanName, info, data);
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return f;
}

// Symmetric square root of a covariance (robust to semi-definite ones).
MatrixXd square_root(const MatrixXd& cov) {
  const Eigen::SelfAdjointEigenSolver<MatrixXd> eig(0.5 * (cov + cov.transpose()));
  return eig.eigenvectors() * eig.eigenvalues().cwiseMax(0.0).cwiseSqrt().asDiagonal() *
         eig.eigenvectors().transpose();
}

// Sigma points of N(mean, cov) with alpha = 1, beta = 2, kappa = 0: the mean and mean +- sqrt(n)
// times the columns of a square root of cov; weights for the mean (wm) and the covariance (wc).
struct SigmaPoints {
  std::vector<VectorXd> points;
  std::vector<double> wm, wc;
};

SigmaPoints sigma_points(const VectorXd& mean, const MatrixXd& cov) {
  const auto n = mean.size();
  const MatrixXd L = square_root(cov) * std::sqrt(static_cast<double>(n));
  SigmaPoints s;
  s.points.push_back(mean);
  s.wm.push_back(0.0);
  s.wc.push_back(2.0); // 1 - alpha^2 + beta with lambda = 0
  for (Eigen::Index i = 0; i < n; ++i) {
    s.points.push_back(mean + L.col(i));
    s.points.push_back(mean - L.col(i));
    for (int k = 0; k < 2; ++k) {
      s.wm.push_back(0.5 / static_cast<double>(n));
      s.wc.push_back(0.5 / static_cast<double>(n));
    }
  }
  return s;
}

// The moments of a Gaussian block at each sigma point, combined: the mean of the means, the
// spread of the means plus the average noise covariance, and the cross-covariance with the points.
struct Propagated {
  VectorXd mean;
  MatrixXd cov, cross;
};

Propagated propagate(const ssm_model& model, const double* frame, int64_t t, int32_t block,
                     const SigmaPoints& s, int64_t dim) {
  const auto n = s.points[0].size();
  std::vector<VectorXd> mu(s.points.size(), VectorXd(dim));
  Propagated p{VectorXd::Zero(dim), MatrixXd::Zero(dim, dim), MatrixXd::Zero(n, dim)};
  RowMajor noise(dim, dim);
  for (size_t i = 0; i < s.points.size(); ++i) {
    model.gaussian_moments(frame, t, block, s.points[i].data(), mu[i].data(), noise.data());
    p.mean += s.wm[i] * mu[i];
    p.cov += s.wm[i] * MatrixXd(noise);
  }
  for (size_t i = 0; i < s.points.size(); ++i) {
    const VectorXd d = mu[i] - p.mean;
    p.cov += s.wc[i] * d * d.transpose();
    p.cross += s.wc[i] * (s.points[i] - s.points[0]) * d.transpose();
  }
  return p;
}

} // namespace

FilterResult unscented_kalman_filter(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data) {
  if (!model.gaussian_moments)
    throw Error(fmt::format(
        "filter --method {}: the model is not Gaussian ({})", kUnscentedKalmanName,
        info.not_gaussian_reason.empty() ? "the model table has no gaussian_moments kernel"
                                         : info.not_gaussian_reason));
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = info.n_state, m = info.n_obs, T = data.T;
  const std::vector<double> frames = all_frames(info, fixed, data);
  FilterResult r = sized_result(T, n);
  VectorXd mean(n);
  MatrixXd cov(n, n);
  RowMajor cov0(n, n);
  for (int64_t t = 0; t < T; ++t) {
    require_previous_obs(info, data, t);
    const double* frame = frames.data() + t * info.n_frame;
    if (t == 0) {
      model.gaussian_moments(frame, 0, 0, nullptr, mean.data(), cov0.data());
      cov = cov0;
    } else {
      const Propagated pred = propagate(model, frame, t, 1, sigma_points(mean, cov), n);
      mean = pred.mean;
      cov = 0.5 * (pred.cov + pred.cov.transpose());
    }
    if (!mean.allFinite() || !cov.allFinite())
      throw Error(fmt::format("{}: the predicted state at t={} is not finite (check the "
                              "parameters)",
                              kUnscentedKalmanName, t));
    // The cross-covariance uses the points' offsets from the mean: the centre has weight wc = 2
    // but a zero offset.
    const Propagated obs = propagate(model, frame, t, 2, sigma_points(mean, cov), m);
    const double increment = gaussian_update(mean, cov, data.at(t), obs.mean, obs.cov, obs.cross, t,
                                             kUnscentedKalmanName);
    record_step(r, t, mean, cov, increment, kUnscentedKalmanName, info, data);
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

FilterResult extended_kalman_filter(const ssm_model& model, const ModelInfo& info,
                                    const std::vector<double>& fixed, const ObsData& data) {
  if (!model.gaussian_moments || !model.gaussian_jacobian)
    throw Error(fmt::format(
        "filter --method {}: the model is not Gaussian ({})", kExtendedKalmanName,
        info.not_gaussian_reason.empty() ? "the model table has no gaussian_jacobian kernel"
                                         : info.not_gaussian_reason));
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = info.n_state, m = info.n_obs, T = data.T;
  const std::vector<double> frames = all_frames(info, fixed, data);
  FilterResult r = sized_result(T, n);
  VectorXd mean(n), mu(n), yhat(m);
  MatrixXd cov(n, n);
  RowMajor noise(n, n), obs_noise(m, m), F(n, n), H(m, n);
  for (int64_t t = 0; t < T; ++t) {
    require_previous_obs(info, data, t);
    const double* frame = frames.data() + t * info.n_frame;
    if (t == 0) {
      model.gaussian_moments(frame, 0, 0, nullptr, mean.data(), noise.data());
      cov = noise;
    } else { // linearise the transition's mean at the filtering mean
      model.gaussian_moments(frame, t, 1, mean.data(), mu.data(), noise.data());
      model.gaussian_jacobian(frame, t, 1, mean.data(), F.data());
      mean = mu;
      cov = F * cov * F.transpose() + MatrixXd(noise);
      cov = 0.5 * (cov + cov.transpose());
    }
    if (!mean.allFinite() || !cov.allFinite())
      throw Error(fmt::format("{}: the predicted state at t={} is not finite (check the "
                              "parameters)",
                              kExtendedKalmanName, t));
    model.gaussian_moments(frame, t, 2, mean.data(), yhat.data(), obs_noise.data());
    model.gaussian_jacobian(frame, t, 2, mean.data(), H.data());
    const MatrixXd Hd = H, S = Hd * cov * Hd.transpose() + MatrixXd(obs_noise);
    const double increment = gaussian_update(mean, cov, data.at(t), yhat, S, cov * Hd.transpose(),
                                             t, kExtendedKalmanName);
    record_step(r, t, mean, cov, increment, kExtendedKalmanName, info, data);
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

FilterResult kalman_filter(const ssm_model& model, const ModelInfo& info,
                           const std::vector<double>& fixed, const ObsData& data) {
  return run_forward(model, info, fixed, data).result;
}

namespace {

// The RTS smoother's result: per t the smoothing mean and covariance, and the gain of x_t on
// x_{t+1}, with the forward pass it ran on.
struct Smoothed {
  Forward f;
  std::vector<VectorXd> mean;
  std::vector<MatrixXd> cov, gain;
};

Smoothed rts(const ssm_model& model, const ModelInfo& info, const std::vector<double>& fixed,
             const ObsData& data) {
  Smoothed s{run_forward(model, info, fixed, data), {}, {}, {}};
  const Forward& f = s.f;
  const int64_t T = data.T;
  s.mean.resize(T);
  s.cov.resize(T);
  s.gain.resize(T);
  if (T > 0) {
    s.mean[T - 1] = f.filt_mean[T - 1];
    s.cov[T - 1] = f.filt_cov[T - 1];
  }
  for (int64_t t = T - 2; t >= 0; --t) {
    s.gain[t] = smoother_gain(f, t);
    s.mean[t] = f.filt_mean[t] + s.gain[t] * (s.mean[t + 1] - f.pred_mean[t + 1]);
    s.cov[t] =
        f.filt_cov[t] + s.gain[t] * (s.cov[t + 1] - f.pred_cov[t + 1]) * s.gain[t].transpose();
    s.cov[t] = 0.5 * (s.cov[t] + s.cov[t].transpose());
    if (!s.mean[t].allFinite() || !s.cov[t].allFinite())
      throw Error(fmt::format("{}: the smoothing distribution at t={} is not finite", kRtsName, t));
  }
  return s;
}

// The symmetric cubature rule over the smoothing Gaussian of x_0 (t = 0) or of (x_{t-1}, x_t):
// 2d points at mean +- sqrt(d) L e_i, equally weighted; exact for polynomials of degree <= 3.
StepPoints cubature_points(const Smoothed& s, int64_t t) {
  const int64_t n = s.mean[t].size(), d = t == 0 ? n : 2 * n, P = 2 * d;
  VectorXd mu(d);
  MatrixXd joint(d, d);
  if (t == 0) {
    mu = s.mean[0];
    joint = s.cov[0];
  } else {
    const MatrixXd lag = s.cov[t] * s.gain[t - 1].transpose(); // Cov[x_t, x_{t-1}]
    mu << s.mean[t - 1], s.mean[t];
    joint << s.cov[t - 1], lag.transpose(), lag, s.cov[t];
  }
  const MatrixXd L = square_root(joint) * std::sqrt(static_cast<double>(d));
  StepPoints out;
  out.count = P;
  out.prev.assign(n * P, NAN);
  out.cur.resize(n * P);
  out.weight.assign(P, 1.0 / static_cast<double>(P));
  for (int64_t p = 0; p < P; ++p) {
    const VectorXd z = p < d ? VectorXd(mu + L.col(p)) : VectorXd(mu - L.col(p - d));
    for (int64_t c = 0; c < n; ++c) {
      if (t > 0)
        out.prev[c * P + p] = z[c];
      out.cur[c * P + p] = z[t == 0 ? c : n + c];
    }
  }
  return out;
}

// The hidden copies of augment-lags (`x@lagK` holds x[t-K]) and the state each copies: at t = 0
// every copy takes x[0]; after, x@lagK[t] = x@lag(K-1)[t-1], x@lag0 being x.
struct LagCopy {
  const VarInfo* copy;
  const VarInfo* initial; // x
  const VarInfo* source;  // x@lag(K-1), or x
};

std::vector<LagCopy> lag_copies(const ModelInfo& info) {
  auto find = [&](const std::string& name) -> const VarInfo* {
    for (const VarInfo& w : info.state)
      if (w.name == name)
        return &w;
    return nullptr;
  };
  std::vector<LagCopy> out;
  for (const VarInfo& v : info.state) {
    const size_t at = v.name.rfind("@lag");
    if (!v.hidden || at == std::string::npos)
      continue;
    const std::string base = v.name.substr(0, at);
    const int k = std::stoi(v.name.substr(at + 4));
    const VarInfo* initial = find(base);
    const VarInfo* source = k == 1 ? initial : find(fmt::format("{}@lag{}", base, k - 1));
    if (initial && source)
      out.push_back({&v, initial, source});
  }
  return out;
}

// The copies at each cubature point, set exactly from their sources: the points of a singular
// Gaussian hold them equal only to rounding, and the copies' dirac densities are -inf off
// equality.
void snap_lag_copies(const std::vector<LagCopy>& copies, int64_t t, StepPoints& s) {
  for (const LagCopy& c : copies) {
    const VarInfo& from = t == 0 ? *c.initial : *c.source;
    const std::vector<double>& values = t == 0 ? s.cur : s.prev;
    for (int64_t i = 0; i < c.copy->size; ++i)
      for (int64_t p = 0; p < s.count; ++p)
        s.cur[(c.copy->offset + i) * s.count + p] = values[(from.offset + i) * s.count + p];
  }
}

} // namespace

std::vector<StepPoints> rts_points(const ssm_model& model, const ModelInfo& info,
                                   const std::vector<double>& fixed, const ObsData& data,
                                   double& log_likelihood) {
  const Smoothed s = rts(model, info, fixed, data);
  log_likelihood = s.f.result.log_likelihood;
  std::vector<StepPoints> out;
  out.reserve(data.T);
  const std::vector<LagCopy> copies = lag_copies(info);
  for (int64_t t = 0; t < data.T; ++t) {
    out.push_back(cubature_points(s, t));
    snap_lag_copies(copies, t, out.back());
  }
  return out;
}

SmoothResult smooth_rts(const ssm_model& model, const ModelInfo& info,
                        const std::vector<double>& fixed, const ObsData& data) {
  const auto start = std::chrono::steady_clock::now();
  const Smoothed s = rts(model, info, fixed, data);
  const std::vector<VectorXd>& mean = s.mean;
  const std::vector<MatrixXd>& cov = s.cov;
  const int64_t n = info.n_state, T = data.T;
  SmoothResult r = make_result(info, SmoothMethod::Rts, T, 0, true);
  r.filter_s = s.f.result.elapsed_s;
  r.log_likelihood = s.f.result.log_likelihood;
  r.lag_one_cov.assign(T * n * n, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < n; ++c) {
      r.mean[t * n + c] = mean[t][c];
      r.var[t * n + c] = std::max(0.0, cov[t](c, c));
    }
    if (t > 0) { // Cov[x_t, x_{t-1} | y] = P_s[t] G[t-1]'
      const RowMajor lag = cov[t] * s.gain[t - 1].transpose();
      std::copy(lag.data(), lag.data() + n * n, r.lag_one_cov.begin() + t * n * n);
    }
  }

  // Functionals: cubature over the Gaussian of (x_{t-1}, x_t), 2d points at mean +- sqrt(d) L e_i.
  const StatLayout lay(info, true);
  if (lay.nf > 0) {
    if (!model.functional_terms)
      throw Error("the model table has no functional_terms kernel");
    const std::vector<double> frames = all_frames(info, fixed, data);
    std::vector<double> sums(lay.nsum, 0.0), q(lay.per_step, 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const StepPoints points = cubature_points(s, t);
      const int64_t P = points.count;
      std::vector<double> terms(lay.nf * P);
      model.functional_terms(frames.data() + t * info.n_frame, t, 0, P, P, points.prev.data(),
                             nullptr, points.cur.data(), data.at(t), terms.data());
      const std::vector<double> ones(P, 1.0);
      check_terms(terms.data(), lay.nf, P, ones.data(), 0, P, t, info);
      for (int64_t k = 0; k < lay.nsum; ++k)
        for (int64_t p = 0; p < P; ++p)
          sums[k] += terms[lay.sum_comp[k] * P + p] / static_cast<double>(P);
      // Per-t functionals; the state moments come from the smoother itself.
      for (int64_t c = 0; c < n; ++c) {
        q[c] = mean[t][c];
        q[n + c] = cov[t](c, c) + mean[t][c] * mean[t][c];
      }
      for (size_t k = 0; k < lay.per_t_comp.size(); ++k) {
        double a = 0;
        for (int64_t p = 0; p < P; ++p)
          a += terms[lay.per_t_comp[k] * P + p] / static_cast<double>(P);
        q[2 * n + static_cast<int64_t>(k)] = a;
      }
      lay.store_estimates(t, q.data(), r, info);
    }
    lay.store_sums(sums.data(), r, info);
    // store_estimates recomputed the variances from E[x^2]: keep the smoother's own.
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < n; ++c)
        r.var[t * n + c] = std::max(0.0, cov[t](c, c));
  }
  if (lay.nf > 0)
    r.details = {{"functionals", "symmetric cubature over the pairwise smoothing Gaussian (exact "
                                 "for terms polynomial of degree <= 3 in the state)"}};
  r.smooth_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - r.filter_s;
  return r;
}

std::vector<double> kalman_path_draw(const ssm_model& model, const ModelInfo& info,
                                     const std::vector<double>& fixed, const ObsData& data,
                                     const std::function<double(int64_t, int64_t)>& normal,
                                     double& log_likelihood) {
  const Forward f = run_forward(model, info, fixed, data);
  log_likelihood = f.result.log_likelihood;
  const int64_t n = info.n_state, T = data.T;
  std::vector<double> path(static_cast<size_t>(T * n));
  VectorXd x, z(n);
  auto draw = [&](const VectorXd& mean, const MatrixXd& cov, int64_t t) {
    for (int64_t c = 0; c < n; ++c)
      z[c] = normal(t, c);
    return VectorXd(mean + square_root(cov) * z);
  };
  for (int64_t t = T - 1; t >= 0; --t) {
    if (t == T - 1) {
      x = draw(f.filt_mean[t], f.filt_cov[t], t);
    } else {
      // x_t | x_{t+1}, y_{0:t}: mean m_f + G (x_{t+1} - m_pred), covariance P_f - G F P_f.
      const MatrixXd G = smoother_gain(f, t);
      const MatrixXd cov = f.filt_cov[t] - G * (f.F[t + 1] * f.filt_cov[t]);
      x = draw(f.filt_mean[t] + G * (x - f.pred_mean[t + 1]), 0.5 * (cov + cov.transpose()), t);
    }
    if (!x.allFinite())
      throw Error(fmt::format("{}: the path drawn at t={} is not finite", kKalmanName, t));
    std::copy(x.data(), x.data() + n, path.begin() + t * n);
  }
  return path;
}

} // namespace ssm
