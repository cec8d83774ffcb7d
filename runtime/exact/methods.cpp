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
                              "--method bootstrap",
                              name, *why));
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

void register_exact_decoders(MethodRegistry& registry) {
  Method viterbi_method;
  viterbi_method.name = "viterbi";
  viterbi_method.title = "Viterbi";
  viterbi_method.task = Task::Decode;
  viterbi_method.applies = [](const ssm_model&, const ModelInfo& info) -> Refusal {
    if (!enumerable(info))
      return "the state is not finite";
    return std::nullopt;
  };
  viterbi_method.check = [](const MethodRun& run) {
    const ModelInfo& info = run.info;
    if (!info.finite_state)
      throw Error(fmt::format("decode: the state of model '{}' is not finite (see `info` for "
                              "the reason); Viterbi decoding needs every state int[lo..hi]",
                              info.name));
    enumerate_states(info); // refuses one too large, before any work
  };
  viterbi_method.decode = [](const MethodRun& run) {
    Decoding d = viterbi(run.model, run.info, *run.fixed, *run.data);
    d.states = enumerate_states(run.info).size;
    return d;
  };
  registry.add(std::move(viterbi_method));
}

} // namespace ssm
