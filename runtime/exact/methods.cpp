// The exact methods' registration: when each applies, how `auto` ranks it, the refusals before
// any work, and the entry points (exact/kalman.h, exact/finite_state.h).
#include "exact/methods.h"
#include "core/error.h"
#include "exact/finite_state.h"
#include "exact/kalman.h"

#include <fmt/format.h>

namespace ssm {

namespace {

using FilterFn = FilterResult (*)(const ssm_model&, const ModelInfo&, const std::vector<double>&,
                                  const ObsData&);

Method exact_filter(std::string name, int rank, FilterFn fn) {
  Method m;
  m.name = std::move(name);
  m.task = Task::Filter;
  m.rank = rank;
  m.filter = [fn](const MethodRun& run) { return fn(run.model, run.info, *run.fixed, *run.data); };
  return m;
}

} // namespace

void register_exact_filters(MethodRegistry& registry) {
  Method kalman = exact_filter(kKalmanName, 1, kalman_filter);
  kalman.auto_help = "{} for a linear-Gaussian model";
  kalman.applies = [](const ssm_model& model, const ModelInfo& info) -> Refusal {
    if (!info.linear_gaussian)
      return "see `info` for the reason";
    if (!model.linear_gaussian)
      return "the model table has no linear_gaussian kernel";
    return std::nullopt;
  };
  kalman.check = [applies = kalman.applies, name = kalman.name](const MethodRun& run) {
    if (Refusal why = applies(run.model, run.info))
      throw Error(fmt::format("filter --method {}: the model is not linear-Gaussian ({}); use "
                              "--method {}",
                              name, *why, run.particle_choice()));
  };
  registry.add(std::move(kalman));

  Method forward = exact_filter(kForwardName, 2, forward_filter);
  forward.auto_help = "{} for a finite-state one";
  forward.applies = [](const ssm_model&, const ModelInfo& info) -> Refusal {
    if (!enumerable(info))
      return "the state is not finite";
    return std::nullopt;
  };
  // enumerate_states refuses a state space that is not finite, with the reason.
  forward.check = [](const MethodRun& run) { enumerate_states(run.info); };
  registry.add(std::move(forward));

  Method ekf = exact_filter(kExtendedKalmanName, 6, extended_kalman_filter);
  ekf.applies = [](const ssm_model& model, const ModelInfo&) -> Refusal {
    if (!model.gaussian_jacobian)
      return "the model table has no gaussian_jacobian kernel";
    return std::nullopt;
  };
  registry.add(std::move(ekf));

  Method ukf = exact_filter(kUnscentedKalmanName, 7, unscented_kalman_filter);
  ukf.title = "extended / unscented Kalman filters, approximations for nonlinear models with "
              "Gaussian noise";
  ukf.applies = [](const ssm_model& model, const ModelInfo&) -> Refusal {
    if (!model.gaussian_moments)
      return "the model table has no gaussian_moments kernel";
    return std::nullopt;
  };
  registry.add(std::move(ukf));
}

namespace {

using DecodeFn = Decoding (*)(const ssm_model&, const ModelInfo&, const std::vector<double>&,
                              const ObsData&);

// A decoder over the enumerated state space: both refuse the same models, before any work.
Method exact_decoder(std::string name, std::string title, int rank, DecodeFn fn) {
  Method m;
  m.name = std::move(name);
  m.title = std::move(title);
  m.task = Task::Decode;
  m.rank = rank;
  m.applies = [](const ssm_model&, const ModelInfo& info) -> Refusal {
    if (!enumerable(info))
      return "the state is not finite";
    return std::nullopt;
  };
  m.check = [](const MethodRun& run) {
    const ModelInfo& info = run.info;
    if (!info.finite_state)
      throw Error(fmt::format("decode: the state of model '{}' is not finite (see `info` for the "
                              "reason); decoding needs every state int[lo..hi]",
                              info.name));
    enumerate_states(info); // refuses one too large, before any work
  };
  m.decode = [fn](const MethodRun& run) { return fn(run.model, run.info, *run.fixed, *run.data); };
  return m;
}

} // namespace

void register_exact_decoders(MethodRegistry& registry) {
  Method viterbi_method = exact_decoder(kViterbiName, "the most probable path", 1, viterbi);
  viterbi_method.auto_help = "{}";
  registry.add(std::move(viterbi_method));
  registry.add(exact_decoder(kPosteriorDecodingName, "the most probable state at each t", 2,
                             posterior_decoding));
}

} // namespace ssm
