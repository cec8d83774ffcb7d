// What the SDE tests share: the linear-Gaussian models that Euler-Maruyama makes of an
// Ornstein-Uhlenbeck SDE, exact references for the filters and smoothers of SDE transitions, and
// the check of an estimated score against an exact one, and of the filter and bis against a grid.
#pragma once

#include "kalman.h"
#include "support.h"

#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace e2e {

// The AR(1) that M Euler-Maruyama substeps of dX = -K X dt + S dW over dt make.
inline void euler_ar1(const Eigen::MatrixXd& K, const Eigen::MatrixXd& S, double dt, int steps,
                      Eigen::MatrixXd& A, Eigen::MatrixXd& Q) {
  const double h = dt / steps;
  const int d = static_cast<int>(K.rows());
  const Eigen::MatrixXd step = Eigen::MatrixXd::Identity(d, d) - h * K;
  A = Eigen::MatrixXd::Identity(d, d);
  Q = Eigen::MatrixXd::Zero(d, d);
  for (int j = 0; j < steps; ++j) { // X_M = step^M X_0 + sum_j step^j sqrt(h) S Z_{M-1-j}
    Q += h * A * S * S.transpose() * A.transpose();
    A = step * A;
  }
}

// The 2-D Ornstein-Uhlenbeck SDE dX = -K X dt + S dW of the ou2 test models, K = [[1.0, 0.3],
// [-0.4, 0.6]], S = [[0.5, 0.0], [0.2, 0.4]], from N(0, I), observed with noise 0.3 per
// component, as the AR(1) of `steps` Euler substeps over dt.
inline LinearGaussianModel ou2_euler_model(double dt, int steps) {
  LinearGaussianModel m;
  m.m0 = Eigen::VectorXd::Zero(2);
  m.P0 = Eigen::MatrixXd::Identity(2, 2);
  Eigen::MatrixXd K(2, 2), S(2, 2);
  K << 1.0, 0.3, -0.4, 0.6;
  S << 0.5, 0.0, 0.2, 0.4;
  euler_ar1(K, S, dt, steps, m.A, m.Q);
  m.B = Eigen::MatrixXd::Identity(2, 2);
  m.R = 0.09 * Eigen::MatrixXd::Identity(2, 2);
  return m;
}

// The OU SDE observed every dt with noise sd r, in the state (x, 1) so that the mean mu enters
// the transition matrix: x_t = a x_{t-1} + (1 - a) mu + N(0, s^2 (1 - a^2) / (2 kappa)).
inline LinearGaussianModel ou_observed(double kappa, double mu, double s, double dt, double r) {
  const double a = std::exp(-kappa * dt);
  LinearGaussianModel m;
  m.m0 = Eigen::Vector2d(0, 1);
  m.P0 = Eigen::Vector2d(1, 0).asDiagonal();
  m.A = Eigen::Matrix2d{{a, (1 - a) * mu}, {0, 1}};
  m.Q = Eigen::Vector2d(s * s * (1 - a * a) / (2 * kappa), 0).asDiagonal();
  m.B = Eigen::RowVector2d(1, 0);
  m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
  return m;
}

// The source of model `name`: dX = kappa (mu - X) dt + 0.6 dW observed every 0.5 with noise 0.5,
// from a diffuse prior (the filter cloud at t = 0 is wide beside the noise over dt); kappa and
// mu are parameters (0.8, 0.5), ou_observed's model for a Kalman filter.
inline std::string ou_sde_source(const std::string& name) {
  return "model " + name + R"( {
  param kappa : real(0, inf) = 0.8;
  param mu : real = 0.5;
  state x : real;
  obs y : real;
  x[0] ~ normal(0, 1);
  x[t] ~ diffusion(kappa * (mu - x[t]), 0.6, 0.5, 400);
  y[t] ~ normal(x[t], 0.5);
}
)";
}

// Exact answers for a scalar SDE dX = a(X) dt + dW observed with N(x, r^2) noise (NaN: missing),
// x_0 ~ N(0, 1), on a grid of 400 points: the transition over dt is the Euler kernel of step
// dt / 2^k (a Gaussian sampled on the grid, rows normalised) raised to the power 2^k by squaring;
// each quantity is Richardson-extrapolated from k = 6 and 7, which removes Euler's O(dt / 2^k)
// error (what is left is near 1e-4 on the Sine model, bench/README.md).
struct GridSde {
  std::function<double(double)> drift;
  double dt, r;
  std::vector<double> y;
  // The quantity whose means are given, a function of the grid's value (an SDE written in other
  // coordinates, X = f(Y), has the means of f(Y)).
  std::function<double(double)> of = [](double v) { return v; };

  struct Pass {
    std::vector<double> filtering, smoothing; // means per t
    double log_likelihood = 0;
  };

  Pass exact() const {
    const Pass a = run(6), b = run(7);
    Pass out;
    out.log_likelihood = 2 * b.log_likelihood - a.log_likelihood;
    for (size_t t = 0; t < y.size(); ++t) {
      out.filtering.push_back(2 * b.filtering[t] - a.filtering[t]);
      out.smoothing.push_back(2 * b.smoothing[t] - a.smoothing[t]);
    }
    return out;
  }

private:
  Pass run(int squarings) const {
    double lo = 0, hi = 0;
    for (double v : y)
      if (!std::isnan(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    const int G = 400;
    const Eigen::VectorXd x = Eigen::VectorXd::LinSpaced(G, lo - 6, hi + 6);
    const Eigen::VectorXd fx = x.unaryExpr(of);
    const double h = dt / std::pow(2.0, squarings), spacing = x[1] - x[0];
    Eigen::MatrixXd P(G, G);
    for (int i = 0; i < G; ++i) {
      const double m = x[i] + drift(x[i]) * h;
      for (int j = 0; j < G; ++j)
        P(i, j) = std::exp(-(x[j] - m) * (x[j] - m) / (2 * h));
      P.row(i) /= P.row(i).sum();
    }
    for (int k = 0; k < squarings; ++k)
      P = (P * P).eval();
    const auto T = static_cast<int>(y.size());
    const auto g = [&](int t) -> Eigen::RowVectorXd {
      if (std::isnan(y[t]))
        return Eigen::RowVectorXd::Ones(G);
      return ((x.array() - y[t]).square() / (-2 * r * r)).exp().matrix().transpose() /
             (r * std::sqrt(2 * std::numbers::pi));
    };
    Pass out;
    std::vector<Eigen::RowVectorXd> alpha(T);
    alpha[0] = ((-0.5 * x.array().square()).exp() / std::sqrt(2 * std::numbers::pi) * spacing)
                   .matrix()
                   .transpose()
                   .cwiseProduct(g(0));
    for (int t = 0; t < T; ++t) {
      if (t > 0)
        alpha[t] = (alpha[t - 1] * P).cwiseProduct(g(t));
      out.log_likelihood += std::log(alpha[t].sum());
      alpha[t] /= alpha[t].sum();
      out.filtering.push_back(alpha[t].dot(fx.transpose()));
    }
    out.smoothing.resize(T);
    Eigen::VectorXd beta = Eigen::VectorXd::Ones(G);
    for (int t = T - 1; t >= 0; --t) {
      const Eigen::RowVectorXd s = alpha[t].cwiseProduct(beta.transpose());
      out.smoothing[t] = s.dot(fx.transpose()) / s.sum();
      beta = P * g(t).transpose().cwiseProduct(beta);
      beta /= beta.sum();
    }
    return out;
  }
};

// 8 runs each of `filter --method auto` (10000 particles, seeds 20 to 27) and `smooth --method
// bis` (1000 particles, 100 backward samples, --marginals, seeds 50 to 57) of exe on data: the
// log-likelihood's mean within 4 standard errors of the grid's, the means of x given y_0:t and
// given y within 5 at every t. `check` sees each seed's filter and smoother runs.
inline void
check_filter_and_bis(const std::string& exe, const std::string& data, const GridSde::Pass& exact,
                     const std::string& name,
                     const std::function<void(const FilterRun&, const FilterRun&)>& check) {
  const auto T = static_cast<int>(exact.filtering.size());
  std::vector<double> loglik;
  std::vector<std::vector<double>> filtering(T), smoothing(T);
  for (int k = 0; k < 8; ++k) {
    const FilterRun f = run_filter(exe,
                                   {"--data", data, "--method", "auto", "--particles", "10000",
                                    "--seed", std::to_string(20 + k)},
                                   scratch_path(name + "-filter.csv"));
    loglik.push_back(f.summary.at("log_likelihood").get<double>());
    const FilterRun s =
        run_smooth(exe,
                   {"--data", data, "--method", "bis", "--particles", "1000", "--backward-samples",
                    "100", "--marginals", "--seed", std::to_string(50 + k)},
                   scratch_path(name + "-smooth.csv"));
    check(f, s);
    const std::vector<double> fm = f.table.column("mean_x"), sm = s.table.column("mean_x");
    REQUIRE(fm.size() == static_cast<size_t>(T));
    REQUIRE(sm.size() == static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) {
      filtering[t].push_back(fm[t]);
      smoothing[t].push_back(sm[t]);
    }
  }
  check_mean_close(loglik, exact.log_likelihood, 4, "log-likelihood");
  for (int t = 0; t < T; ++t) {
    check_mean_close(filtering[t], exact.filtering[t], 5, fmt::format("E[x_{} | y_0:{}]", t, t));
    check_mean_close(smoothing[t], exact.smoothing[t], 5, fmt::format("E[x_{} | y]", t));
  }
}

// `score --json`'s estimate of each parameter's score within 4 of its standard errors of the
// exact one (from `reference`, e.g. "Kalman"), that error below a tenth of max(1, |exact|) so
// that the check has power.
inline void check_score(const nlohmann::json& j,
                        const std::vector<std::pair<std::string, double>>& exact,
                        const std::string& reference) {
  for (const auto& [name, value] : exact) {
    const double score = j["score"][name].get<double>(), se = j["score_se"][name].get<double>();
    INFO(name << ": score " << score << " (se " << se << "), " << reference << " " << value);
    CHECK(std::fabs(score - value) < 4 * se);
    CHECK(se < 0.1 * std::max(1.0, std::fabs(value)));
  }
}

} // namespace e2e
