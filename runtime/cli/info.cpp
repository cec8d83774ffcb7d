// `info`: the model's dimensions, parameters (current values and priors), the compiler's
// structure report and the methods that apply, as text or JSON.
#include "cli/command.h"
#include "learning/score.h"
#include "lfi/ratio_samplers.h"
#include "smoothing/methods.h"

#include <fmt/format.h>

#include <sstream>

namespace ssm::cli {

namespace {

// The names of the methods of a task that apply to the model, `auto`'s choice first.
std::vector<std::string> applicable(const Context& c, Task task) {
  std::vector<std::string> out;
  for (const Method* m : c.registry.applicable(task, c.model, c.info))
    out.push_back(m->name);
  if (task == Task::Smooth && !out.empty()) { // smooth's default wants the marginals
    const std::string first = smooth_auto_choice(c.registry, c.model, c.info, true).name;
    std::erase(out, first);
    out.insert(out.begin(), first);
  }
  return out;
}

// The smoother `score` would run (auto's choice for the score terms), or why there is none.
std::pair<std::string, Refusal> score_method(const Context& c) {
  if (Refusal why = networks_refusal(c.info))
    return {"", why};
  if (Refusal why = score_refusal(c.model, c.info))
    return {"", why};
  const ScoreModel sm = score_model(c.model, c.info);
  return {c.registry.choose(Task::Smooth, sm.model, sm.info).name, std::nullopt};
}

nlohmann::json vars_json(const std::vector<VarInfo>& vs, bool obs) {
  nlohmann::json a = nlohmann::json::array();
  for (const VarInfo& v : vs) {
    if (v.hidden)
      continue;
    nlohmann::json e = {{"name", v.name},
                        {"shape", v.shape},
                        {"offset", v.offset},
                        {"size", v.size},
                        {"columns", column_names(v.name, v.shape)}};
    if (obs)
      e["joint"] = v.joint;
    a.push_back(e);
  }
  return a;
}

void print_info_json(const Context& c, const ParamValues& values) {
  const ModelInfo& info = c.info;
  nlohmann::json j;
  j["model"] = info.name;
  j["source"] = info.source;
  if (info.simulation)
    j["simulation"] = {{"params", info.simulation->params},
                       {"likelihood", info.simulation->likelihood},
                       {"no_likelihood_reason", info.simulation->no_likelihood_reason}};
  j["n_state"] = info.n_state;
  j["n_obs"] = info.n_obs;
  j["n_theta"] = info.n_theta;
  j["state"] = vars_json(info.state, false);
  j["obs"] = vars_json(info.obs, true);
  nlohmann::json ps = nlohmann::json::array();
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ParamInfo& p = info.params[i];
    ps.push_back({{"name", p.name},
                  {"type", p.type},
                  {"shape", p.shape},
                  {"value", values[i] ? param_value_json(p, *values[i]) : nlohmann::json(nullptr)},
                  {"prior", p.prior},
                  {"lower", p.lower ? nlohmann::json(*p.lower) : nlohmann::json(nullptr)},
                  {"upper", p.upper ? nlohmann::json(*p.upper) : nlohmann::json(nullptr)}});
  }
  j["params"] = ps;
  j["structure"] = info.structure;
  j["methods"] = {
      {"filter", applicable(c, Task::Filter)}, {"smooth", applicable(c, Task::Smooth)},
      {"decode", applicable(c, Task::Decode)}, {"optimize", applicable(c, Task::Optimize)},
      {"rml", applicable(c, Task::Rml)},       {"sample", applicable(c, Task::Sample)}};
  const auto [score_by, no_score] = score_method(c);
  j["methods"]["score"] = no_score ? nlohmann::json(nullptr) : nlohmann::json(score_by);
  j["methods"]["vi"] = applicable(c, Task::Vi);
  if (!info.guide.empty()) {
    nlohmann::json guide = nlohmann::json::array();
    for (const GuideInfo::Relation& r : info.guide.relations)
      guide.push_back({{"latent", r.latent}, {"dist", r.dist}});
    j["guide"] = guide;
  }
  if (const std::optional<BackwardGuideInfo>& g = info.backward_guide) {
    nlohmann::json reads = nlohmann::json::array();
    for (const BackwardGuideInfo::Observation& o : g->observations)
      reads.push_back(o.name);
    j["guide"] = {{"state", g->state},
                  {"dist", "backward"},
                  {"encoder", g->encoder},
                  {"observations", reads}};
    if (g->encoder == "mlp")
      j["guide"]["net"] = info.nets.at(g->net).name;
  }
  print_json(c, j);
}

void print_variables(const Context& c) {
  const ModelInfo& info = c.info;
  const int64_t shown = static_cast<int64_t>(state_columns(info).size());
  int64_t outputs = 0; // hidden components that hold networks' outputs
  for (const NetCallInfo& call : info.net_calls)
    outputs += call.size;
  std::string hidden;
  if (shown + outputs < info.n_state)
    hidden += fmt::format(", and {} hidden that carry past values", info.n_state - shown - outputs);
  if (outputs > 0)
    hidden += fmt::format(", and {} hidden that hold networks' outputs", outputs);
  fmt::print(c.out, "state ({} component{}{}):\n", shown, shown == 1 ? "" : "s", hidden);
  for (const VarInfo& v : info.state)
    if (!v.hidden)
      fmt::print(c.out, "  {} : {}\n", v.name, type_string(v));
  fmt::print(c.out, "observations ({} component{}):\n", info.n_obs, info.n_obs == 1 ? "" : "s");
  for (const VarInfo& v : info.obs)
    fmt::print(c.out, "  {} : {}{}\n", v.name, type_string(v),
               v.joint && v.size > 1 ? " (joint: all or none of its columns may be missing)" : "");
  if (!info.inputs.empty()) {
    fmt::print(c.out, "{}\n",
               info.step == "n"
                   ? "covariates per item (columns of --data; simulate: --inputs FILE.csv):"
                   : "inputs (--inputs FILE.csv, a value per time step):");
    for (const VarInfo& v : info.inputs)
      fmt::print(c.out, "  {} : {}\n", v.name, type_string(v));
  }
  if (!info.data.empty()) {
    fmt::print(c.out, "data items (--data-file FILE.json):\n");
    for (const VarInfo& v : info.data)
      fmt::print(c.out, "  {} : {}\n", v.name, type_string(v));
  }
}

// A simulator: its draws' parts, the compiler's report, and what `posterior` can use.
void print_simulator_info(const Context& c) {
  const ModelInfo& info = c.info;
  fmt::print(c.out, "simulator {}{}\n", info.name,
             info.source.empty() ? "" : " (" + info.source + ")");
  for (size_t s = 0; s < info.state.size(); ++s)
    if (!info.state[s].hidden)
      fmt::print(c.out, "  {} {} : {}\n",
                 static_cast<int>(s) < info.simulation->params ? "param " : "latent",
                 info.state[s].name, type_string(info.state[s]));
  for (const VarInfo& v : info.obs)
    fmt::print(c.out, "  obs    {} : {}\n", v.name, type_string(v));
  for (const VarInfo& v : info.data)
    fmt::print(c.out, "  data   {} : {} (--data-file FILE.json)\n", v.name, type_string(v));
  std::istringstream lines(info.structure);
  for (std::string line; std::getline(lines, line);)
    fmt::print(c.out, "{}\n", line);
  std::vector<std::string> samplers;
  for (const lfi::RatioSamplerInfo& s : lfi::ratio_samplers())
    samplers.emplace_back(s.name);
  fmt::print(c.out, "methods:\n  ratio: nre (NRE-A, NRE-B){}\n  posterior samplers: {}\n",
             info.simulation->likelihood ? ", or exact" : "", fmt::join(samplers, ", "));
}

void print_info_text(const Context& c, const ParamValues& values) {
  const ModelInfo& info = c.info;
  if (info.simulation)
    return print_simulator_info(c);
  fmt::print(c.out, "model {}{}\n", info.name, info.source.empty() ? "" : " (" + info.source + ")");
  print_variables(c);
  fmt::print(c.out, "parameters ({} value{} in theta):\n", info.n_theta,
             info.n_theta == 1 ? "" : "s");
  for (size_t i = 0; i < info.params.size(); ++i) {
    const ParamInfo& p = info.params[i];
    fmt::print(c.out, "  {} : {} = {}{}\n", p.name, type_string(p),
               values[i] ? format_param_value(p, *values[i]) : std::string("(no value)"),
               p.prior.empty() ? "" : "  ~ " + p.prior);
  }
  if (!info.structure.empty()) {
    fmt::print(c.out, "structure:\n");
    std::istringstream lines(info.structure);
    for (std::string line; std::getline(lines, line);)
      fmt::print(c.out, "  {}\n", line);
  }
  const std::vector<std::string> decoders = applicable(c, Task::Decode);
  const Refusal no_decoder = c.registry.ranked(Task::Decode).front()->why_not(c.model, info);
  auto listed = [&](Task task) {
    const std::vector<std::string> names = applicable(c, task);
    return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
  };
  fmt::print(c.out, "methods (auto's choice first):\n  filter: {}\n  smooth: {}\n  decode: {}\n",
             listed(Task::Filter), listed(Task::Smooth),
             decoders.empty() ? "none (" + no_decoder.value_or("") + ")"
                              : fmt::format("{}", fmt::join(decoders, ", ")));
  const auto [score_by, no_score] = score_method(c);
  fmt::print(c.out, "  score: {}\n", no_score ? "none (" + *no_score + ")" : "by " + score_by);
  const std::vector<std::string> optimizers = applicable(c, Task::Optimize);
  const Refusal no_optimizer = c.registry.ranked(Task::Optimize).front()->why_not(c.model, info);
  fmt::print(c.out, "  optimize: {}\n",
             optimizers.empty() ? "none (" + no_optimizer.value_or("") + ")"
                                : fmt::format("{}", fmt::join(optimizers, ", ")));
  fmt::print(c.out, "  rml: {}\n", listed(Task::Rml));
  fmt::print(c.out, "  sample: {}\n", listed(Task::Sample));
  if (const std::vector<std::string> vi = applicable(c, Task::Vi); !vi.empty())
    fmt::print(c.out, "  vi: {}\n", fmt::join(vi, ", "));
  for (const NetCallInfo& call : info.net_calls) {
    const NetInfo& net = info.nets[call.net];
    std::vector<std::string> args;
    for (const NetCallInfo::Argument& a : call.arguments)
      args.push_back(a.name);
    fmt::print(c.out, "network {} : {}, called as {}({}){}\n", net.name,
               net_declaration(net, info.nets), net.name, fmt::join(args, ", "),
               call.for_guide() ? " in the guide" : "");
  }
  for (const GuideInfo::Relation& r : info.guide.relations)
    fmt::print(c.out, "guide {}[n] ~ {}(...)\n", r.latent, r.dist);
  if (const std::optional<BackwardGuideInfo>& g = info.backward_guide) {
    std::vector<std::string> reads;
    for (const BackwardGuideInfo::Observation& o : g->observations)
      reads.push_back(o.name + "[t]");
    const std::string encoder =
        g->encoder == "mlp"
            ? fmt::format("{}({})", info.nets.at(g->net).name, fmt::join(reads, ", "))
            : fmt::format("{}", fmt::join(reads, ", "));
    fmt::print(c.out, "guide {}[t] ~ backward({}) (smooth --method variational){}\n", g->state,
               encoder,
               g->encoder == "mlp" ? fmt::format("; network {} : {}", info.nets.at(g->net).name,
                                                 net_declaration(info.nets.at(g->net)))
                                   : "");
  }
}

class Info : public Command {
public:
  explicit Info(CLI::App* app) : Command(app) { app->add_flag("--json", json_, "Print as JSON"); }

  void run(const Context& c, const ParamValues& values) override {
    if (json_)
      print_info_json(c, values);
    else
      print_info_text(c, values);
  }

private:
  bool json_ = false;
};

} // namespace

std::string type_string(const VarInfo& v) {
  auto bound = [](double b) {
    return std::isfinite(b) ? fmt::format("{}", b) : std::string(b < 0 ? "-inf" : "inf");
  };
  if (v.sequence) // tokens 0..V-1, one per row of the item
    return fmt::format("sequence[{}]", bound(v.upper + 1));
  const bool bounded = std::isfinite(v.lower) || std::isfinite(v.upper);
  std::string scalar = "real";
  if (v.integer)
    scalar = bounded ? fmt::format("int[{}..{}]", bound(v.lower), bound(v.upper)) : "int";
  else if (bounded)
    scalar = fmt::format("real({}, {})", bound(v.lower), bound(v.upper));
  if ((v.type == "simplex" || v.type == "cov_matrix") && !v.shape.empty())
    return fmt::format("{}[{}]", v.type, v.shape[0]);
  if (v.shape.empty())
    return scalar;
  const std::string shaped = v.shape.size() == 1
                                 ? fmt::format("vector[{}]", v.shape[0])
                                 : fmt::format("matrix[{}]", fmt::join(v.shape, ", "));
  return scalar == "real" ? shaped : fmt::format("{} of {}", shaped, scalar);
}

std::unique_ptr<Command> add_info(CLI::App& app, const Context&) {
  return std::make_unique<Info>(app.add_subcommand(
      "info", "Model dimensions, parameters (current values and priors) and structure report"));
}

} // namespace ssm::cli
