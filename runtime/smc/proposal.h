// The particle filter's proposals, one implementation per file: bootstrap (the transition,
// proposal.cpp), guided (the model's proposal, guided_proposal.cpp), auxiliary (a look-ahead
// first stage, then the transition, auxiliary_proposal.cpp) and random-weight (an SDE's draws
// weighted by estimates of its density, random_weight_proposal.cpp). ParticleFilter chooses one per
// run; it calls first_stage() and for_step() once per step, then draw() and correct() once per
// block of kParticleBlock particles, never per particle (or correct_step() once per step).
#pragma once

#include "core/metadata.h"
#include "core/thread_pool.h"
#include "kernel/abi.h"
#include "smc/resample.h"

#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace ssm {

struct FilterOptions;

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

// The int[lo..hi] state components, and per block of particles the first draw outside one.
class RangeCheck {
public:
  RangeCheck(const ModelInfo& info, int64_t blocks, int64_t stride);
  // Records the first of particles [begin, end) of x outside its range in block `block`'s slot.
  void find_outside(int64_t block, const double* x, int64_t begin, int64_t end);
  // Throws naming the first particle (over all blocks) whose draw at t left its range, if any.
  void check(int64_t t, const char* drawn_by) const;

private:
  struct Outside {
    int64_t particle = -1; // -1: none
    int range = -1;
    double value = 0;
  };
  int64_t stride_;
  std::vector<IntegerRange> ranges_;
  std::vector<Outside> outside_;
};

// The filter at step t > 0 as a proposal sees it.
struct ProposalStep {
  const double* th; // the kernels' frame at t
  int64_t t, stride;
  const double* y;
  const double* prev;       // particles at t-1
  const int64_t* ancestors; // null: a_n = n
  double* cur;              // particles at t, to draw
  const double* w;          // weights at t-1 (first_stage)
};

// The auxiliary filter's first stage writes the ancestors and the new particles' log-weights.
struct FirstStage {
  int64_t* anc;
  double* lw;
};

class Proposal {
public:
  virtual ~Proposal() = default;
  // Before the draws at t > 0: a first stage that resamples (the auxiliary filter) fills fs and
  // returns true; the filter then skips its own resampling.
  virtual bool first_stage(const ProposalStep& /*s*/, const FirstStage& /*fs*/) { return false; }
  // The proposal to draw step t with: this one, or the bootstrap's when it cannot apply.
  virtual Proposal& for_step(const ProposalStep& /*s*/) { return *this; }
  // Draws particles [begin, end) of s.cur (blocks run in parallel: disjoint ranges only).
  virtual void draw(const ProposalStep& s, int64_t begin, int64_t end) = 0;
  // Adds the weight correction log(f / q) of particles [begin, end) to inc (log p(y | x) there).
  virtual void correct(const ProposalStep& /*s*/, int64_t /*begin*/, int64_t /*end*/,
                       double* /*inc*/) {}
  // A correction that needs every particle of the step at once (Wald's identity over all N):
  // then correct() is not called; correct_step() adds the corrections of all N particles, once
  // per step after every block's draws, running its own loops on `pool`.
  virtual bool corrects_whole_step() const { return false; }
  virtual void correct_step(const ProposalStep& /*s*/, int64_t /*N*/, double* /*inc*/,
                            ThreadPool& /*pool*/) {}
  // Non-empty when the filter's log-likelihood estimate is not unbiased with this proposal: why.
  virtual std::string likelihood_caveat() const { return {}; }
  virtual const char* drawn_by() const { return "the transition"; } // for range errors
};

// What every proposal is built from.
struct ProposalContext {
  const ssm_model& model;
  const ModelInfo& info;
  const FilterOptions& opt;
  ThreadPool& pool;
  RangeCheck& ranges;
  int64_t N, nb, stride;
};

// The bootstrap proposal: draws from the transition (proposal.cpp).
class BootstrapProposal : public Proposal {
public:
  BootstrapProposal(const ssm_model& model, const FilterOptions& opt);
  void draw(const ProposalStep& s, int64_t begin, int64_t end) override;

private:
  const ssm_model& model_;
  uint64_t seed_;
};

std::unique_ptr<Proposal> make_guided_proposal(const ProposalContext& ctx); // guided_proposal.cpp
// The random-weight filter's proposal for an SDE transition (random_weight_proposal.cpp), and why
// it cannot run a model (empty when it can).
std::unique_ptr<Proposal> make_random_weight_proposal(const ProposalContext& ctx);
std::string random_weight_problem(const ssm_model& model, const ModelInfo& info);
// Non-empty when the random-weight filter's estimates need Wald's identity (signed ones), so that
// its log-likelihood is biased: why.
std::string random_weight_likelihood_caveat(const ModelInfo& info);
// What the random-weight filter draws from, for run summaries: the model's proposal, one Euler
// step over dt, or (a scalar SDE with the General Poisson estimator, whose coefficient reads the
// path) one Euler step in Lamperti's coordinate, taken back to the path's (sde/lamperti.h).
std::string random_weight_proposal_name(const ssm_model& model, const ModelInfo& info);
// Adds that caveat as "log_likelihood_caveat" to a run's JSON summary whose log-likelihood came
// from the random-weight filter (`random_weight`), when there is one.
void add_random_weight_caveat(nlohmann::json& summary, const ModelInfo& info, bool random_weight);
// The random-weight filter's streams: its Euler draws' Philox site (the model's own sites are
// small), and the key of its estimator's seed (bis's backward estimates use the filter's seed).
inline constexpr uint32_t kSiteEulerProposal = 0xFFFF0004u;
inline constexpr uint64_t kRandomWeightSeedKey = 0x5DEECE66DA3B9F21ull;
// The auxiliary first stage, then `draws`' draws (auxiliary_proposal.cpp).
std::unique_ptr<Proposal> make_auxiliary_proposal(const ProposalContext& ctx,
                                                  std::unique_ptr<Proposal> draws);
// The proposal that the options ask for.
std::unique_ptr<Proposal> make_proposal(const ProposalContext& ctx);

} // namespace ssm
