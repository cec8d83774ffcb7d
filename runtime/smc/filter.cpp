// The particle filter: bootstrap, guided (the model's proposal) and auxiliary. Particles are stored
// structure-of-arrays in two buffers (previous and current states); resampling only produces an
// ancestor array that the transition kernel reads through, so particles are never copied. Work is
// split into fixed blocks of kParticleBlock particles and every reduction is combined in block
// order, which makes the output independent of the thread count.
#include "smc/filter.h"
#include "core/error.h"
#include "core/frame.h"
#include "kernel/vectorised.h"
#include "smc/resample.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <new>

namespace ssm {

namespace {

// 64-byte aligned array so each state component row starts on a cache line.
template <class T> struct AlignedArray {
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<T[], Free> ptr;
  explicit AlignedArray(size_t n)
      : ptr(static_cast<T*>(
            ::operator new[](std::max<size_t>(n, 1) * sizeof(T), std::align_val_t(64)))) {
    std::fill(ptr.get(), ptr.get() + n, T());
  }
  T* data() { return ptr.get(); }
  T& operator[](size_t i) { return ptr[i]; }
};

} // namespace

struct ParticleFilter::Buffers {
  AlignedArray<double> xa, xb, pred; // pred: the auxiliary filter's predictions (else empty)
  Frame frame;
  Buffers(int64_t n, bool auxiliary, const ModelInfo& info, const std::vector<double>& fixed)
      : xa(n), xb(n), pred(auxiliary ? n : 0), frame(info, fixed) {}
};

ParticleFilter::ParticleFilter(const ssm_model& model, const ModelInfo& info,
                               const std::vector<double>& fixed, const ObsData& data,
                               const FilterOptions& opt, ThreadPool& pool)
    : model_(model), info_(info), data_(data), opt_(opt), pool_(pool) {
  if (opt.particles < 1)
    throw Error("filter: the number of particles must be at least 1");
  if (!(opt.ess_threshold >= 0 && opt.ess_threshold <= 1))
    throw Error("filter: the ESS threshold must be in [0, 1]");
  if (data.n_obs != info.n_obs)
    throw Error("filter: the data do not match the model's observation dimension");
  if (static_cast<int64_t>(fixed.size()) != info.n_theta + info.n_data)
    throw Error("filter: theta does not match the model's parameter and data layout");
  if (data.n_inputs != info.n_inputs)
    throw Error("filter: the data do not match the model's inputs");
  if (opt.guided && !model.proposal_sample)
    throw Error("filter --method guided: the model has no proposal; add one for the states it "
                "should guide, as in `proposal x[t] ~ normal(m, s);` with m and s reading x[t-1] "
                "and y[t] (docs/language.md#proposals)");
  if (opt.guided && !info.transition_tractable)
    throw Error(fmt::format("filter --method guided: the guided filter weights particles by the "
                            "transition density, but the transition has none ({}); use --method "
                            "bootstrap",
                            info.sample_only_reason));
  start_ = std::chrono::steady_clock::now();
  N_ = opt.particles;
  stride_ = (N_ + 7) / 8 * 8;
  nb_ = (N_ + kParticleBlock - 1) / kParticleBlock;
  const int64_t ns = info.n_state, T = data.T;
  buf_ = std::make_unique<Buffers>(ns * stride_, opt.auxiliary, info, fixed);
  if (opt.guided) {
    logq_.assign(stride_, 0.0);
    logf_.assign(stride_, 0.0);
  }
  if (opt.auxiliary) {
    loglam_.assign(stride_, 0.0);
    aux_w_.assign(N_, 0.0);
    lookahead_ = lookahead_for(model);
  }
  prev_ = buf_->xa.data();
  cur_ = buf_->xb.data();
  lw_.assign(N_, 0.0);
  inc_.assign(N_, 0.0);
  w_.assign(N_, 0.0);
  anc_.assign(N_, 0);
  bmax_.assign(nb_, 0.0);
  bsum_.assign(nb_, 0.0);
  bsum2_.assign(nb_, 0.0);
  bx_.assign(nb_ * ns, 0.0);
  bvar_.assign(nb_ * ns, 0.0);
  mean_.assign(ns, 0.0);
  ranges_ = integer_ranges(info.state);
  outside_.assign(nb_, {-1, -1});
  res_.T = T;
  res_.particles = N_;
  res_.n_state = ns;
  const int64_t steps = opt_.history ? T : std::min<int64_t>(T, 1);
  res_.mean.assign(steps * ns, 0.0);
  res_.var.assign(steps * ns, 0.0);
  res_.ess.assign(steps, 0.0);
  res_.loglik_increment.assign(steps, 0.0);
  res_.resampled.assign(steps, 0);
  res_.ess_min = T == 0 ? static_cast<double>(N_) : std::numeric_limits<double>::infinity();
  log_sum_prev_ = std::log(static_cast<double>(N_)); // log sum exp of the weights before t
  ess_prev_ = static_cast<double>(N_);
}

ParticleFilter::~ParticleFilter() = default;

void ParticleFilter::find_outside(int64_t block, const double* x, int64_t begin, int64_t end) {
  if (ranges_.empty() || outside_[block].particle >= 0)
    return;
  const auto [n, r] = first_outside(ranges_, x, begin, end, stride_);
  if (n >= 0)
    outside_[block] = {n, r, x[ranges_[r].component * stride_ + n]};
}

void ParticleFilter::check_ranges(int64_t t, const char* drawn_by) const {
  for (const Outside& o : outside_) // blocks in particle order: the first particle overall
    if (o.particle >= 0)
      throw Error(out_of_range_message("filter", ranges_[o.range], o.value, t,
                                       fmt::format("{} of particle {}", drawn_by, o.particle)));
}

double ParticleFilter::lookahead(const double* th, int64_t t, const double* y) {
  const int64_t N = N_, nb = nb_, stride = stride_, ns = info_.n_state;
  const double* prev = prev_;
  double* pred = buf_->pred.data();
  double* loglam = loglam_.data();
  if (lookahead_ == Lookahead::User) {
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      model_.lookahead(th, t, begin, end, stride, prev, y, pred);
      model_.obs_logpdf(th, t, begin, end, stride, pred, y, loglam);
    });
  } else if (lookahead_ == Lookahead::Mean) {
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      std::vector<double> x(ns), mean(ns), cov(ns * ns);
      for (int64_t n = begin; n < end; ++n) {
        for (int64_t c = 0; c < ns; ++c)
          x[c] = prev[c * stride + n];
        model_.gaussian_moments(th, t, 1, x.data(), mean.data(), cov.data());
        for (int64_t c = 0; c < ns; ++c)
          pred[c * stride + n] = mean[c];
      }
    });
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      model_.obs_logpdf(th, t, begin, end, stride, pred, y, loglam);
    });
  } else {
    // lambda_i = the average of p(y_t | x~) over kLookaheadDraws draws x~ from the transition: an
    // unbiased estimate of the predictive density p(y_t | x_{t-1}^i), less noisy than one draw.
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      std::vector<double> one(stride);
      for (int64_t k = 0; k < kLookaheadDraws; ++k) {
        model_.transition_sample(th, opt_.seed ^ (kLookaheadSeedKey + static_cast<uint64_t>(k)), t,
                                 begin, end, stride, prev, nullptr, pred);
        find_outside(b, pred, begin, end);
        model_.obs_logpdf(th, t, begin, end, stride, pred, y, k == 0 ? loglam : one.data());
        if (k > 0) // log(exp(a) + exp(b)), then the mean at the end
          for (int64_t n = begin; n < end; ++n) {
            const double hi = std::max(loglam[n], one[n]), lo = std::min(loglam[n], one[n]);
            loglam[n] = std::isinf(hi) ? hi : hi + std::log1p(std::exp(lo - hi));
          }
      }
      for (int64_t n = begin; n < end; ++n)
        loglam[n] -= std::log(static_cast<double>(kLookaheadDraws));
    });
    check_ranges(t, "the look-ahead draw from the transition");
  }
  // Floor the first-stage factors at 10^-3 of the largest among particles of positive weight, so
  // no particle is excluded because its prediction explains y_t badly (any positive factor keeps
  // the filter consistent and its likelihood unbiased; a zero one would not).
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < N; ++i)
    if (w_[i] > 0 && loglam[i] > top)
      top = loglam[i];
  if (!std::isfinite(top))
    top = 0; // no prediction explains y_t (or it is missing): plain resampling
  const double floor = std::log(1e-3);
  double sw = 0, swl = 0;
  for (int64_t i = 0; i < N; ++i) { // log(lambda_i / max lambda), in [log 1e-3, 0]
    loglam[i] = std::isnan(loglam[i]) ? floor : std::clamp(loglam[i] - top, floor, 0.0);
    sw += w_[i];
    swl += w_[i] * std::exp(loglam[i]);
  }
  return std::log(swl / sw); // the scale max lambda cancels between the two stages
}

bool ParticleFilter::step() {
  if (t_ + 1 >= data_.T)
    return false;
  const int64_t t = ++t_;
  const int64_t slot = opt_.history ? t : 0; // where this step's moments go
  if (t > 0)
    std::swap(prev_, cur_);
  const int64_t N = N_, ns = info_.n_state, nb = nb_, stride = stride_;
  const uint64_t seed = opt_.seed;
  const ssm_model& model = model_;
  double* prev = prev_;
  double* cur = cur_;
  double* lw = lw_.data();
  double* inc = inc_.data();
  double* w = w_.data();

  const double* y = data_.at(t);
  require_previous_obs(info_, data_, t);
  const double* th = buf_->frame.step(data_.inputs_at(t), t > 0 ? data_.at(t - 1) : nullptr);
  frame_values_ = th;
  resampled_ = false;
  const bool auxiliary = opt_.auxiliary && t > 0;
  if (auxiliary) {
    // First stage: resample with w_i lambda_i; the new particles start from log-weight
    // log(sum w lambda / sum w) - log lambda_{a_n}, and the increment is taken against log N.
    const double log_mean_lambda = lookahead(th, t, y);
    for (int64_t i = 0; i < N; ++i)
      aux_w_[i] = w[i] * std::exp(loglam_[i]);
    resample(opt_.resampling, aux_w_.data(), N, seed, static_cast<uint32_t>(t), kSiteResample,
             anc_.data());
    resampled_ = true;
    ++res_.resample_count;
    for (int64_t n = 0; n < N; ++n)
      lw[n] = log_mean_lambda - loglam_[anc_[n]];
    log_sum_prev_ = std::log(static_cast<double>(N));
  } else if (t > 0 && (opt_.ess_threshold >= 1 || ess_prev_ < opt_.ess_threshold * N)) {
    resample(opt_.resampling, w, N, seed, static_cast<uint32_t>(t), kSiteResample, anc_.data());
    resampled_ = true;
    ++res_.resample_count;
    log_sum_prev_ = std::log(static_cast<double>(N));
  }
  const bool flat_prev = t == 0 || (resampled_ && !auxiliary); // previous log-weights all 0
  const int64_t* ancestors = this->ancestors();
  const bool guided = opt_.guided && t > 0 &&
                      std::none_of(y, y + info_.n_obs, [](double v) { return std::isnan(v); });
  double* logq = logq_.data();
  double* logf = logf_.data();

  // Propagate, weight, and find each block's largest log-weight.
  pool_.parallel_for(nb, [&](int64_t b) {
    const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
    if (t == 0)
      model.init_sample(th, seed, begin, end, stride, cur);
    else if (guided)
      model.proposal_sample(th, seed, t, begin, end, stride, prev, ancestors, y, cur, logq);
    else
      model.transition_sample(th, seed, t, begin, end, stride, prev, ancestors, cur);
    find_outside(b, cur, begin, end);
    model.obs_logpdf(th, t, begin, end, stride, cur, y, inc);
    if (guided) {
      model.transition_logpdf(th, t, begin, end, stride, prev, ancestors, cur, logf);
      for (int64_t n = begin; n < end; ++n) // a draw q says is impossible gets weight 0
        inc[n] += std::isinf(logq[n]) && logq[n] < 0 ? -std::numeric_limits<double>::infinity()
                                                     : logf[n] - logq[n];
    }
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t n = begin; n < end; ++n) {
      double v = (flat_prev ? 0.0 : lw[n]) + inc[n];
      if (std::isnan(v))
        v = -std::numeric_limits<double>::infinity();
      lw[n] = v;
      m = std::max(m, v);
    }
    bmax_[b] = m;
  });
  check_ranges(t, t == 0 ? "the initial draw" : guided ? "the proposal" : "the transition");
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t b = 0; b < nb; ++b)
    m = std::max(m, bmax_[b]);
  if (m == std::numeric_limits<double>::infinity())
    throw Error(fmt::format(
        "filter: a particle has an infinite log-weight at t={} ({}); the "
        "observation density is degenerate there (e.g. a zero scale): check the model and the "
        "parameter values",
        t, data_row_text(info_, data_, t)));
  if (m == -std::numeric_limits<double>::infinity())
    throw Error(fmt::format(
        "filter: all {} particle weights are zero or NaN at t={} ({}). Try more "
        "particles (--particles), check the model's observation density and the data on that "
        "line, and the parameter values (--param)",
        N, t, data_row_text(info_, data_, t)));

  // Shift log-weights by the maximum, exponentiate, and accumulate weighted first moments.
  pool_.parallel_for(nb, [&](int64_t b) {
    const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
    double s = 0, s2 = 0;
    for (int64_t n = begin; n < end; ++n)
      lw[n] -= m;
    exp_run(lw + begin, w + begin, end - begin);
    for (int64_t n = begin; n < end; ++n) {
      s += w[n];
      s2 += w[n] * w[n];
    }
    bsum_[b] = s;
    bsum2_[b] = s2;
    for (int64_t c = 0; c < ns; ++c) {
      const double* xc = cur + c * stride;
      double sx = 0;
      for (int64_t n = begin; n < end; ++n)
        if (w[n] > 0) // a zero-weight particle may hold a non-finite state
          sx += w[n] * xc[n];
      bx_[b * ns + c] = sx;
    }
  });
  double S = 0, S2 = 0;
  for (int64_t b = 0; b < nb; ++b) {
    S += bsum_[b];
    S2 += bsum2_[b];
  }
  for (int64_t c = 0; c < ns; ++c) {
    double sx = 0;
    for (int64_t b = 0; b < nb; ++b)
      sx += bx_[b * ns + c];
    mean_[c] = sx / S;
  }

  // Weighted variances around the means (two passes for accuracy).
  if (ns > 0) {
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
      for (int64_t c = 0; c < ns; ++c) {
        const double* xc = cur + c * stride;
        const double mc = mean_[c];
        double sv = 0;
        for (int64_t n = begin; n < end; ++n)
          if (w[n] > 0) {
            const double d = xc[n] - mc;
            sv += w[n] * d * d;
          }
        bvar_[b * ns + c] = sv;
      }
    });
  }
  for (int64_t c = 0; c < ns; ++c) {
    double sv = 0;
    for (int64_t b = 0; b < nb; ++b)
      sv += bvar_[b * ns + c];
    res_.mean[slot * ns + c] = mean_[c];
    res_.var[slot * ns + c] = sv / S;
  }

  const double log_sum = m + std::log(S);
  const double ll_inc = log_sum - log_sum_prev_;
  res_.loglik_increment[slot] = ll_inc;
  res_.log_likelihood += ll_inc;
  ess_prev_ = S * S / S2;
  res_.ess[slot] = ess_prev_;
  res_.ess_min = std::min(res_.ess_min, ess_prev_);
  res_.resampled[slot] = resampled_;
  log_sum_prev_ = std::log(S); // lw now holds log-weights shifted by m
  weight_sum_ = S;
  if (t + 1 == data_.T)
    res_.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (opt_.progress)
    opt_.progress(t, data_.T);
  return true;
}

Lookahead lookahead_for(const ssm_model& model) {
  return model.lookahead          ? Lookahead::User
         : model.gaussian_moments ? Lookahead::Mean
                                  : Lookahead::Simulated;
}

const char* lookahead_name(Lookahead kind) {
  switch (kind) {
  case Lookahead::User:
    return "user";
  case Lookahead::Mean:
    return "mean";
  case Lookahead::Simulated:
    return "simulated";
  }
  return "?";
}

const char* filter_name(const FilterOptions& options) {
  return options.auxiliary ? "apf" : options.guided ? "guided" : "bootstrap";
}

FilterResult bootstrap_filter(const ssm_model& model, const ModelInfo& info,
                              const std::vector<double>& theta, const ObsData& data,
                              const FilterOptions& opt, ThreadPool& pool) {
  ParticleFilter pf(model, info, theta, data, opt, pool);
  while (pf.step()) {
  }
  return pf.take_result();
}

} // namespace ssm
