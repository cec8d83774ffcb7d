// The particle filter, whatever its proposal (smc/proposal.h: bootstrap, guided, auxiliary).
// Particles are stored structure-of-arrays in two buffers (previous and current states); resampling
// only produces an ancestor array that the transition kernel reads through, so particles are never
// copied. Work is split into fixed blocks of kParticleBlock particles and every reduction is
// combined in block order, which makes the output independent of the thread count.
#include "smc/filter.h"
#include "core/error.h"
#include "core/frame.h"
#include "kernel/vectorised.h"
#include "smc/filter_methods.h"
#include "smc/proposal.h"
#include "smc/resample.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <new>

namespace ssm {

struct ParticleFilter::Buffers {
  AlignedArray<double> xa, xb;
  Frame frame;
  Buffers(int64_t n, const ModelInfo& info, const std::vector<double>& fixed)
      : xa(n), xb(n), frame(info, fixed) {}
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
    throw Error(fmt::format("filter --method {}: the model has no proposal; add one for the "
                            "states it should guide, as in `proposal x[t] ~ normal(m, s);` with m "
                            "and s reading x[t-1] and y[t] (docs/language.md#proposals)",
                            particle_filter_name(opt)));
  if (opt.guided && !info.transition_tractable)
    throw Error(fmt::format("filter --method {}: the guided filter weights particles by the "
                            "transition density, but the transition has none ({}); use --method "
                            "{}",
                            particle_filter_name(opt), info.sample_only_reason,
                            particle_filter_name(FilterOptions{})));
  start_ = std::chrono::steady_clock::now();
  N_ = opt.particles;
  stride_ = (N_ + 7) / 8 * 8;
  nb_ = (N_ + kParticleBlock - 1) / kParticleBlock;
  const int64_t ns = info.n_state, T = data.T;
  buf_ = std::make_unique<Buffers>(ns * stride_, info, fixed);
  if (opt.auxiliary)
    lookahead_ = lookahead_for(model);
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
  ranges_ = std::make_unique<RangeCheck>(info, nb_, stride_);
  proposal_ = make_proposal({model, info, opt_, pool, *ranges_, N_, nb_, stride_});
  res_.likelihood_caveat = proposal_->likelihood_caveat();
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

void ParticleFilter::set_parameters(const double* theta) {
  buf_->frame.set_parameters(theta);
}

std::unique_ptr<ParticleFilter> ParticleFilter::clone(uint64_t seed, ThreadPool& pool) const {
  FilterOptions options = opt_;
  options.seed = seed;
  auto c =
      std::make_unique<ParticleFilter>(model_, info_, buf_->frame.fixed(), data_, options, pool);
  const int64_t n = info_.n_state * stride_;
  std::copy(buf_->xa.ptr.get(), buf_->xa.ptr.get() + n, c->buf_->xa.data());
  std::copy(buf_->xb.ptr.get(), buf_->xb.ptr.get() + n, c->buf_->xb.data());
  c->buf_->frame.copy_values(buf_->frame);
  const bool prev_is_a = prev_ == buf_->xa.ptr.get();
  c->prev_ = prev_is_a ? c->buf_->xa.data() : c->buf_->xb.data();
  c->cur_ = prev_is_a ? c->buf_->xb.data() : c->buf_->xa.data();
  c->frame_values_ = frame_values_ ? c->buf_->frame.values() : nullptr;
  c->t_ = t_;
  c->lw_ = lw_;
  c->inc_ = inc_;
  c->w_ = w_;
  c->anc_ = anc_;
  c->bmax_ = bmax_;
  c->bsum_ = bsum_;
  c->bsum2_ = bsum2_;
  c->bx_ = bx_;
  c->bvar_ = bvar_;
  c->mean_ = mean_;
  c->lookahead_ = lookahead_;
  c->resampled_ = resampled_;
  c->weight_sum_ = weight_sum_;
  c->log_sum_prev_ = log_sum_prev_;
  c->ess_prev_ = ess_prev_;
  c->res_ = res_;
  c->start_ = start_;
  return c;
}

bool ParticleFilter::step() {
  if (t_ + 1 >= data_.T)
    return false;
  const int64_t t = ++t_;
  const int64_t slot = opt_.history ? t : 0; // where this step's moments go
  if (t > 0)
    std::swap(prev_, cur_);
  const int64_t N = N_;
  double* lw = lw_.data();
  double* w = w_.data();
  const double* y = data_.at(t);
  require_previous_obs(info_, data_, t);
  const double* th = buf_->frame.step(data_.inputs_at(t), t > 0 ? data_.at(t - 1) : nullptr);
  frame_values_ = th;
  resampled_ = false;
  ProposalStep ps{th, t, stride_, y, prev_, nullptr, cur_, w};
  // The auxiliary filter's first stage resamples itself and sets the new log-weights.
  const bool first_stage = t > 0 && proposal_->first_stage(ps, {anc_.data(), lw});
  if (first_stage) {
    resampled_ = true;
    ++res_.resample_count;
    log_sum_prev_ = std::log(static_cast<double>(N));
  } else if (t > 0 && (opt_.ess_threshold >= 1 || ess_prev_ < opt_.ess_threshold * N)) {
    resample(opt_.resampling, w, N, opt_.seed, static_cast<uint32_t>(t), kSiteResample,
             anc_.data());
    resampled_ = true;
    ++res_.resample_count;
    log_sum_prev_ = std::log(static_cast<double>(N));
  }
  const bool flat_prev = t == 0 || (resampled_ && !first_stage); // previous log-weights all 0
  ps.ancestors = this->ancestors();
  Proposal* proposal = t > 0 ? &proposal_->for_step(ps) : nullptr; // null: the initial draw

  const double m = propagate(ps, proposal, flat_prev);
  double S = 0, S2 = 0;
  weigh(m, slot, S, S2);
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

double ParticleFilter::propagate(const ProposalStep& ps, Proposal* proposal, bool flat_prev) {
  const int64_t t = ps.t, N = N_, nb = nb_, stride = stride_;
  const uint64_t seed = opt_.seed;
  const ssm_model& model = model_;
  const double *th = ps.th, *y = ps.y;
  double* cur = cur_;
  double* lw = lw_.data();
  double* inc = inc_.data();
  // Each block's log-weights and their largest.
  auto weigh_block = [&](int64_t b, int64_t begin, int64_t end) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t n = begin; n < end; ++n) {
      double v = (flat_prev ? 0.0 : lw[n]) + inc[n];
      if (std::isnan(v))
        v = -std::numeric_limits<double>::infinity();
      lw[n] = v;
      m = std::max(m, v);
    }
    bmax_[b] = m;
  };
  // A proposal that corrects the whole step at once (Wald's identity) gets every draw first.
  const bool whole_step = t > 0 && proposal->corrects_whole_step();
  pool_.parallel_for(nb, [&](int64_t b) {
    const int64_t begin = b * kParticleBlock, end = std::min(N, begin + kParticleBlock);
    if (t == 0)
      model.init_sample(th, seed, begin, end, stride, cur);
    else
      proposal->draw(ps, begin, end);
    ranges_->find_outside(b, cur, begin, end);
    model.obs_logpdf(th, t, begin, end, stride, cur, y, inc);
    if (whole_step)
      return;
    if (t > 0)
      proposal->correct(ps, begin, end, inc);
    weigh_block(b, begin, end);
  });
  if (whole_step) {
    proposal->correct_step(ps, N, inc, pool_);
    pool_.parallel_for(nb, [&](int64_t b) {
      const int64_t begin = b * kParticleBlock;
      weigh_block(b, begin, std::min(N, begin + kParticleBlock));
    });
  }
  ranges_->check(t, t == 0 ? "the initial draw" : proposal->drawn_by());
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

  return m;
}

void ParticleFilter::weigh(double m, int64_t slot, double& S, double& S2) {
  const int64_t N = N_, ns = info_.n_state, nb = nb_, stride = stride_;
  const double* cur = cur_;
  double* lw = lw_.data();
  double* w = w_.data();
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
    for (int64_t c = 0; c < (opt_.moments ? ns : 0); ++c) {
      const double* xc = cur + c * stride;
      double sx = 0;
      for (int64_t n = begin; n < end; ++n)
        if (w[n] > 0) // a zero-weight particle may hold a non-finite state
          sx += w[n] * xc[n];
      bx_[b * ns + c] = sx;
    }
  });
  for (int64_t b = 0; b < nb; ++b) {
    S += bsum_[b];
    S2 += bsum2_[b];
  }
  if (!opt_.moments) {
    for (int64_t c = 0; c < ns; ++c)
      res_.mean[slot * ns + c] = res_.var[slot * ns + c] = NAN;
    return;
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
