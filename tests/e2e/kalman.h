// A reference Kalman filter for the end-to-end tests: the exact log-likelihood and filtering
// moments of a linear-Gaussian state-space model
//   x_0 ~ N(m0, P0),  x_t = A x_{t-1} + N(0, Q),  y_t = B x_t + N(0, R),  t = 0 .. T-1,
// with missing observations (NaN components): only the observed components of y_t update, so a
// fully missing y_t means no update at t. Also a brute-force version (the joint Gaussian of all
// states and observations, conditioned directly) used to validate the recursion on tiny cases.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <vector>

namespace e2e {

struct LinearGaussianModel {
  Eigen::VectorXd m0;
  Eigen::MatrixXd P0, A, Q, B, R;
};

struct KalmanResult {
  double log_likelihood = 0;
  std::vector<double> loglik_increment; // log p(y_t | y_0..y_{t-1}), 0 when y_t is missing
  std::vector<Eigen::VectorXd> mean;    // E[x_t | y_0..y_t]
  std::vector<Eigen::MatrixXd> cov;     // Cov[x_t | y_0..y_t]
};

// Indices of the non-NaN components of y.
inline std::vector<int> observed_indices(const Eigen::VectorXd& y) {
  std::vector<int> idx;
  for (int i = 0; i < y.size(); ++i)
    if (!std::isnan(y[i]))
      idx.push_back(i);
  return idx;
}

// log N(v; 0, S) through a Cholesky factor.
inline double log_normal_density(const Eigen::VectorXd& v, const Eigen::MatrixXd& S) {
  Eigen::LLT<Eigen::MatrixXd> llt(S);
  if (llt.info() != Eigen::Success)
    throw std::runtime_error("log_normal_density: covariance not positive definite");
  const Eigen::VectorXd z = llt.matrixL().solve(v);
  const double logdet = 2 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  return -0.5 * (v.size() * std::log(2 * std::numbers::pi) + logdet + z.squaredNorm());
}

// ys[t] holds y_t, NaN for a missing component.
inline KalmanResult kalman_filter(const LinearGaussianModel& m,
                                  const std::vector<Eigen::VectorXd>& ys) {
  KalmanResult r;
  Eigen::VectorXd x = m.m0;
  Eigen::MatrixXd P = m.P0;
  for (size_t t = 0; t < ys.size(); ++t) {
    if (t > 0) {
      x = m.A * x;
      P = m.A * P * m.A.transpose() + m.Q;
    }
    const std::vector<int> idx = observed_indices(ys[t]);
    double inc = 0;
    if (!idx.empty()) {
      const int k = static_cast<int>(idx.size());
      Eigen::MatrixXd Bo(k, m.B.cols()), Ro(k, k);
      Eigen::VectorXd yo(k);
      for (int i = 0; i < k; ++i) {
        Bo.row(i) = m.B.row(idx[i]);
        yo[i] = ys[t][idx[i]];
        for (int j = 0; j < k; ++j)
          Ro(i, j) = m.R(idx[i], idx[j]);
      }
      const Eigen::VectorXd v = yo - Bo * x;
      const Eigen::MatrixXd S = Bo * P * Bo.transpose() + Ro;
      inc = log_normal_density(v, S);
      Eigen::LLT<Eigen::MatrixXd> llt(S);
      const Eigen::MatrixXd K = llt.solve(Bo * P).transpose(); // P Bo' S^-1
      x += K * v;
      // Joseph form keeps P symmetric positive definite.
      const Eigen::MatrixXd IKB = Eigen::MatrixXd::Identity(P.rows(), P.cols()) - K * Bo;
      P = IKB * P * IKB.transpose() + K * Ro * K.transpose();
    }
    r.loglik_increment.push_back(inc);
    r.log_likelihood += inc;
    r.mean.push_back(x);
    r.cov.push_back(P);
  }
  return r;
}

// The joint Gaussian of (x_0..x_{T-1}, y_0..y_{T-1}), stacked by time: the brute-force
// references below condition it directly. Cost cubic in T: tiny cases only.
struct JointGaussian {
  int T = 0, d = 0, p = 0;
  Eigen::VectorXd mx, my;
  Eigen::MatrixXd Sx, Syy, Sxy;
};

inline JointGaussian joint_gaussian(const LinearGaussianModel& m, int T) {
  JointGaussian g;
  const int d = static_cast<int>(m.m0.size()), p = static_cast<int>(m.B.rows());
  g.T = T;
  g.d = d;
  g.p = p;
  // Joint moments of the states: E x_t = A^t m0, Cov(x_s, x_t) = Cov(x_s, x_s) (A^{t-s})'.
  Eigen::VectorXd mx(T * d);
  Eigen::MatrixXd Sx(T * d, T * d);
  for (int t = 0; t < T; ++t) {
    mx.segment(t * d, d) = t == 0 ? m.m0 : Eigen::VectorXd(m.A * mx.segment((t - 1) * d, d));
    Sx.block(t * d, t * d, d, d) =
        t == 0 ? m.P0
               : Eigen::MatrixXd(m.A * Sx.block((t - 1) * d, (t - 1) * d, d, d) * m.A.transpose() +
                                 m.Q);
    for (int s = 0; s < t; ++s) {
      Sx.block(s * d, t * d, d, d) = Sx.block(s * d, (t - 1) * d, d, d) * m.A.transpose();
      Sx.block(t * d, s * d, d, d) = Sx.block(s * d, t * d, d, d).transpose();
    }
  }
  // y = H x + v with H block diagonal.
  Eigen::MatrixXd H = Eigen::MatrixXd::Zero(T * p, T * d), Rv = Eigen::MatrixXd::Zero(T * p, T * p);
  for (int t = 0; t < T; ++t) {
    H.block(t * p, t * d, p, d) = m.B;
    Rv.block(t * p, t * p, p, p) = m.R;
  }
  g.mx = mx;
  g.Sx = Sx;
  g.my = H * mx;
  g.Syy = H * Sx * H.transpose() + Rv;
  g.Sxy = Sx * H.transpose();
  return g;
}

// Filtering moments and likelihood increments by conditioning the joint Gaussian on y_0..y_t.
inline KalmanResult brute_force_filter(const LinearGaussianModel& m,
                                       const std::vector<Eigen::VectorXd>& ys) {
  const int T = static_cast<int>(ys.size());
  const JointGaussian g = joint_gaussian(m, T);
  const int d = g.d, p = g.p;
  const Eigen::VectorXd& mx = g.mx;
  const Eigen::VectorXd& my = g.my;
  const Eigen::MatrixXd& Sx = g.Sx;
  const Eigen::MatrixXd& Syy = g.Syy;
  const Eigen::MatrixXd& Sxy = g.Sxy;

  KalmanResult r;
  double prev = 0;
  for (int t = 0; t < T; ++t) {
    // Observed components of y_0..y_t.
    std::vector<int> idx;
    for (int s = 0; s <= t; ++s)
      for (int i : observed_indices(ys[s]))
        idx.push_back(s * p + i);
    const int k = static_cast<int>(idx.size());
    Eigen::VectorXd mean = mx.segment(t * d, d);
    Eigen::MatrixXd cov = Sx.block(t * d, t * d, d, d);
    double ll = 0;
    if (k > 0) {
      Eigen::VectorXd v(k);
      Eigen::MatrixXd S(k, k), C(d, k);
      for (int i = 0; i < k; ++i) {
        v[i] = ys[idx[i] / p][idx[i] % p] - my[idx[i]];
        C.col(i) = Sxy.block(t * d, idx[i], d, 1);
        for (int j = 0; j < k; ++j)
          S(i, j) = Syy(idx[i], idx[j]);
      }
      ll = log_normal_density(v, S);
      Eigen::LLT<Eigen::MatrixXd> llt(S);
      mean += C * llt.solve(v);
      cov -= C * llt.solve(C.transpose());
    }
    r.loglik_increment.push_back(ll - prev);
    prev = ll;
    r.log_likelihood = ll;
    r.mean.push_back(mean);
    r.cov.push_back(cov);
  }
  return r;
}

// Smoothing moments by conditioning the joint Gaussian on every observed component: the
// posterior mean of x_t and Cov(x_s, x_t | y) for all s, t (T d x T d).
struct SmoothingReference {
  Eigen::VectorXd mean;
  Eigen::MatrixXd cov;
  double log_likelihood = 0;
};

inline SmoothingReference brute_force_smoother(const LinearGaussianModel& m,
                                               const std::vector<Eigen::VectorXd>& ys) {
  const int T = static_cast<int>(ys.size());
  const JointGaussian g = joint_gaussian(m, T);
  std::vector<int> idx;
  for (int s = 0; s < T; ++s)
    for (int i : observed_indices(ys[s]))
      idx.push_back(s * g.p + i);
  const int k = static_cast<int>(idx.size());
  Eigen::VectorXd v(k);
  Eigen::MatrixXd S(k, k), C(T * g.d, k);
  for (int i = 0; i < k; ++i) {
    v[i] = ys[idx[i] / g.p][idx[i] % g.p] - g.my[idx[i]];
    C.col(i) = g.Sxy.col(idx[i]);
    for (int j = 0; j < k; ++j)
      S(i, j) = g.Syy(idx[i], idx[j]);
  }
  SmoothingReference r;
  Eigen::LLT<Eigen::MatrixXd> llt(S);
  r.mean = g.mx + C * llt.solve(v);
  r.cov = g.Sx - C * llt.solve(C.transpose());
  r.log_likelihood = k > 0 ? log_normal_density(v, S) : 0.0;
  return r;
}

} // namespace e2e
