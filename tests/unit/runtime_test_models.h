// Hand-written models for the runtime tests, standing in for compiled kernels: a scalar AR(1)
// plus Gaussian noise (exact answers by a Kalman filter), a two-component version with a joint
// vector observation, and an AR(1) with uniform observation noise (weights can be exactly zero).
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"
#include "kernel/distributions.h"

#include <cmath>
#include <vector>

namespace rt_test {

// theta = [phi, sigma, tau]: x0 ~ N(0, sigma / sqrt(1 - phi^2)), x_t ~ N(phi x_{t-1}, sigma),
// y_t ~ N(x_t, tau) for every state component c (components independent).
inline void ar_init_sample(const double* th, uint64_t seed, int64_t begin, int64_t end,
                           int64_t stride, double* x, int64_t dim) {
  const double sd0 = th[1] / std::sqrt(1 - th[0] * th[0]);
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t n = begin; n < end; ++n)
      x[c * stride + n] = ssm::sample_normal(seed, n, 0, 10 + c, 0.0, sd0);
}
inline void ar_transition_sample(const double* th, uint64_t seed, int64_t t, int64_t begin,
                                 int64_t end, int64_t stride, const double* xp, const int64_t* anc,
                                 double* x, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t n = begin; n < end; ++n) {
      const int64_t a = anc ? anc[n] : n;
      x[c * stride + n] = ssm::sample_normal(seed, n, t, 20 + c, th[0] * xp[c * stride + a], th[1]);
    }
}
inline void ar_transition_logpdf(const double* th, int64_t, int64_t begin, int64_t end,
                                 int64_t stride, const double* xp, const int64_t* anc,
                                 const double* x, double* out, int64_t dim) {
  for (int64_t n = begin; n < end; ++n) {
    const int64_t a = anc ? anc[n] : n;
    double s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += ssm::lpdf_normal(x[c * stride + n], th[0] * xp[c * stride + a], th[1]);
    out[n] = s;
  }
}
inline void ar_init_logpdf(const double* th, int64_t begin, int64_t end, int64_t stride,
                           const double* x, double* out, int64_t dim) {
  const double sd0 = th[1] / std::sqrt(1 - th[0] * th[0]);
  for (int64_t n = begin; n < end; ++n) {
    double s = 0;
    for (int64_t c = 0; c < dim; ++c)
      s += ssm::lpdf_normal(x[c * stride + n], 0.0, sd0);
    out[n] = s;
  }
}
inline void ar_obs_logpdf(const double* th, int64_t, int64_t begin, int64_t end, int64_t stride,
                          const double* x, const double* y, double* out, int64_t dim) {
  for (int64_t n = begin; n < end; ++n) {
    double s = 0;
    for (int64_t c = 0; c < dim; ++c)
      if (!std::isnan(y[c]))
        s += ssm::lpdf_normal(y[c], x[c * stride + n], th[2]);
    out[n] = s;
  }
}
inline void ar_obs_sample(const double* th, uint64_t seed, int64_t t, int64_t begin, int64_t end,
                          int64_t stride, const double* x, double* y, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t n = begin; n < end; ++n)
      y[c * stride + n] = ssm::sample_normal(seed, n, t, 30 + c, x[c * stride + n], th[2]);
}

template <int D> struct ArKernels {
  static void init_sample(const double* th, uint64_t seed, int64_t b, int64_t e, int64_t s,
                          double* x) {
    ar_init_sample(th, seed, b, e, s, x, D);
  }
  static void init_logpdf(const double* th, int64_t b, int64_t e, int64_t s, const double* x,
                          double* out) {
    ar_init_logpdf(th, b, e, s, x, out, D);
  }
  static void transition_sample(const double* th, uint64_t seed, int64_t t, int64_t b, int64_t e,
                                int64_t s, const double* xp, const int64_t* a, double* x) {
    ar_transition_sample(th, seed, t, b, e, s, xp, a, x, D);
  }
  static void transition_logpdf(const double* th, int64_t t, int64_t b, int64_t e, int64_t s,
                                const double* xp, const int64_t* a, const double* x, double* out) {
    ar_transition_logpdf(th, t, b, e, s, xp, a, x, out, D);
  }
  static void obs_logpdf(const double* th, int64_t t, int64_t b, int64_t e, int64_t s,
                         const double* x, const double* y, double* out) {
    ar_obs_logpdf(th, t, b, e, s, x, y, out, D);
  }
  static void obs_sample(const double* th, uint64_t seed, int64_t t, int64_t b, int64_t e,
                         int64_t s, const double* x, double* y) {
    ar_obs_sample(th, seed, t, b, e, s, x, y, D);
  }
};

// y_t ~ uniform(x_t - 1, x_t + 1): a particle's weight is exactly zero when |y_t - x_t| > 1.
inline void uniform_obs_logpdf(const double*, int64_t, int64_t begin, int64_t end, int64_t,
                               const double* x, const double* y, double* out) {
  for (int64_t n = begin; n < end; ++n)
    out[n] = std::isnan(y[0]) ? 0.0 : ssm::lpdf_uniform(y[0], x[n] - 1, x[n] + 1);
}

inline const char* kAr1Meta = R"json({"name":"ar1","source":"tests/ar1.ssm","n_state":1,"n_obs":1,
 "n_theta":3,
 "state":[{"name":"x","shape":[],"offset":0,"size":1}],
 "obs":[{"name":"y","shape":[],"offset":0,"size":1,"joint":false}],
 "params":[
  {"name":"phi","type":"real","shape":[],"offset":0,"size":1,"default":[0.9],"lower":-1,
   "upper":1,"prior":"uniform(-1, 1)"},
  {"name":"sigma","type":"real","shape":[],"offset":1,"size":1,"default":[0.5],"lower":0,
   "upper":null,"prior":"half_normal(1)"},
  {"name":"tau","type":"real","shape":[],"offset":2,"size":1,"default":[1.0],"lower":0,
   "upper":null,"prior":"half_normal(1)"}],
 "structure":"linear-Gaussian\nfirst-order Markov"})json";

inline const char* kAr2Meta = R"json({"name":"ar2d","source":"tests/ar2d.ssm","n_state":2,"n_obs":2,
 "n_theta":3,
 "state":[{"name":"x","shape":[2],"offset":0,"size":2}],
 "obs":[{"name":"y","shape":[2],"offset":0,"size":2,"joint":true}],
 "params":[
  {"name":"phi","type":"real","shape":[],"offset":0,"size":1,"default":[0.8],"lower":-1,
   "upper":1,"prior":"uniform(-1, 1)"},
  {"name":"sigma","type":"real","shape":[],"offset":1,"size":1,"default":[0.7],"lower":0,
   "upper":null,"prior":"half_normal(1)"},
  {"name":"tau","type":"real","shape":[],"offset":2,"size":1,"default":[0.6],"lower":0,
   "upper":null,"prior":"half_normal(1)"}],
 "structure":""})json";

// The AR(K) test model's table: its kernels, the optional ones null.
template <int K> ssm_model ar_model(const char* metadata) {
  using Kernels = ArKernels<K>;
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.metadata_json = metadata;
  m.init_sample = Kernels::init_sample;
  m.init_logpdf = Kernels::init_logpdf;
  m.transition_sample = Kernels::transition_sample;
  m.transition_logpdf = Kernels::transition_logpdf;
  m.obs_logpdf = Kernels::obs_logpdf;
  m.obs_sample = Kernels::obs_sample;
  return m;
}
inline ssm_model ar1_model() {
  return ar_model<1>(kAr1Meta);
}
inline ssm_model ar2_model() {
  return ar_model<2>(kAr2Meta);
}
inline ssm_model ar1_uniform_obs_model() {
  ssm_model m = ar1_model();
  m.obs_logpdf = uniform_obs_logpdf;
  return m;
}

struct Kalman {
  double log_likelihood = 0;
  std::vector<double> mean, var; // filtering moments per t
};

// Exact filter for one component of the AR(1) model; NaN observations are skipped.
inline Kalman kalman_ar1(double phi, double sigma, double tau, const std::vector<double>& y) {
  Kalman k;
  double m = 0, P = sigma * sigma / (1 - phi * phi);
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0) {
      m = phi * m;
      P = phi * phi * P + sigma * sigma;
    }
    if (!std::isnan(y[t])) {
      const double S = P + tau * tau, e = y[t] - m;
      k.log_likelihood += -0.5 * (std::log(2 * M_PI * S) + e * e / S);
      const double K = P / S;
      m += K * e;
      P *= 1 - K;
    }
    k.mean.push_back(m);
    k.var.push_back(P);
  }
  return k;
}

} // namespace rt_test
