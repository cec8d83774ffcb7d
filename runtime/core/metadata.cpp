// Parsing and checking of the model metadata JSON (see docs/abi.md); the names it gives columns
// and types are in metadata_names.cpp.
#include "core/metadata.h"
#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

using nlohmann::json;

namespace ssm {

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error("invalid model metadata (the compiler and runtime disagree): " + what);
}

const json& field(const json& obj, const char* key, const std::string& ctx) {
  auto it = obj.find(key);
  if (it == obj.end())
    bad(fmt::format("{}: missing field '{}'", ctx, key));
  return *it;
}

int64_t get_int(const json& obj, const char* key, const std::string& ctx) {
  const json& v = field(obj, key, ctx);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    bad(fmt::format("{}: field '{}' must be a non-negative integer", ctx, key));
  return v.get<int64_t>();
}

std::string get_string(const json& obj, const char* key, const std::string& ctx) {
  const json& v = field(obj, key, ctx);
  if (!v.is_string())
    bad(fmt::format("{}: field '{}' must be a string", ctx, key));
  return v.get<std::string>();
}

std::vector<int64_t> get_shape(const json& obj, const std::string& ctx) {
  const json& v = field(obj, "shape", ctx);
  if (!v.is_array())
    bad(ctx + ": 'shape' must be an array");
  std::vector<int64_t> shape;
  for (const json& d : v) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1)
      bad(ctx + ": 'shape' entries must be positive integers");
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

int64_t shape_size(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void flatten_into(const json& v, std::vector<double>& out, const std::string& ctx) {
  if (v.is_number())
    out.push_back(v.get<double>());
  else if (v.is_array())
    for (const json& e : v)
      flatten_into(e, out, ctx);
  else
    bad(ctx + ": 'default' must hold numbers");
}

std::optional<double> get_bound(const json& obj, const char* key, const std::string& ctx) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    bad(fmt::format("{}: '{}' must be a number or null", ctx, key));
  return it->get<double>();
}

std::optional<double> get_integer_bound(const json& arr, size_t i, const std::string& ctx) {
  const json& v = arr[i];
  if (v.is_null())
    return std::nullopt;
  if (!v.is_number())
    bad(ctx + ": 'integer' bounds must be numbers or null");
  return v.get<double>();
}

std::vector<FunctionalInfo> parse_functionals(const json& root, const json* analysis,
                                              int64_t& n_components) {
  std::vector<FunctionalInfo> fs;
  n_components = 0;
  auto arr = root.find("functionals");
  if (arr == root.end())
    return fs;
  if (!arr->is_array())
    bad("'functionals' must be an array");
  for (const json& v : *arr) {
    FunctionalInfo f;
    f.name = get_string(v, "name", "functionals entry");
    const std::string ctx = fmt::format("functional '{}'", f.name);
    f.shape = get_shape(v, ctx);
    f.offset = get_int(v, "offset", ctx);
    f.size = get_int(v, "size", ctx);
    if (f.size != shape_size(f.shape) || f.offset != n_components)
      bad(ctx + ": 'offset' or 'size' does not match the layout");
    n_components += f.size;
    f.sum = v.value("additive", false); // the metadata's own flag is the `sum_t` form
    f.additive = f.sum;
    if (analysis && analysis->is_array())
      for (const json& a : *analysis)
        if (a.is_object() && a.value("name", "") == f.name) {
          f.additive = a.value("additive", f.additive);
          if (auto w = a.find("why_not"); w != a.end() && w->is_string())
            f.why_not = w->get<std::string>();
          if (auto m = a.find("methods"); m != a.end() && m->is_array())
            for (const json& e : *m)
              if (e.is_string())
                f.methods.push_back(e.get<std::string>());
        }
    fs.push_back(std::move(f));
  }
  return fs;
}

std::vector<VarInfo> parse_vars(const json& root, const char* key, int64_t n_total, bool is_obs) {
  const json& arr = field(root, key, "model");
  if (!arr.is_array())
    bad(fmt::format("'{}' must be an array", key));
  std::vector<VarInfo> vars;
  std::vector<bool> covered(n_total, false);
  for (const json& v : arr) {
    VarInfo var;
    std::string ctx = fmt::format("{} entry", key);
    var.name = get_string(v, "name", ctx);
    ctx = fmt::format("{} '{}'", key, var.name);
    var.shape = get_shape(v, ctx);
    var.offset = get_int(v, "offset", ctx);
    var.size = get_int(v, "size", ctx);
    if (var.size != shape_size(var.shape))
      bad(ctx + ": 'size' does not match 'shape'");
    if (var.offset + var.size > n_total)
      bad(fmt::format("{}: components [{}, {}) exceed the {} declared", ctx, var.offset,
                      var.offset + var.size, n_total));
    for (int64_t c = var.offset; c < var.offset + var.size; ++c) {
      if (covered[c])
        bad(ctx + ": overlaps another variable");
      covered[c] = true;
    }
    var.hidden = !is_obs && var.name.find('@') != std::string::npos;
    if (is_obs) {
      auto it = v.find("joint");
      var.joint = it != v.end() && it->is_boolean() && it->get<bool>();
      var.sequence = v.value("sequence", false);
    }
    if (auto it = v.find("integer"); it != v.end()) {
      if (!it->is_array() || it->size() != 2)
        bad(ctx + ": 'integer' must be [lower, upper]");
      var.integer = true;
      var.lower = get_integer_bound(*it, 0, ctx).value_or(-INFINITY);
      var.upper = get_integer_bound(*it, 1, ctx).value_or(INFINITY);
    } else {
      var.lower = get_bound(v, "lower", ctx).value_or(-INFINITY);
      var.upper = get_bound(v, "upper", ctx).value_or(INFINITY);
    }
    if (auto it = v.find("type"); it != v.end()) {
      if (!it->is_string())
        bad(ctx + ": 'type' must be a string");
      var.type = it->get<std::string>();
      const bool known = var.type == "real" || var.type == "vector" || var.type == "matrix" ||
                         var.type == "int" || var.type == "simplex" || var.type == "cov_matrix";
      if (!known)
        bad(fmt::format("{}: unknown type '{}'", ctx, var.type));
      if (var.type == "cov_matrix" && (var.shape.size() != 2 || var.shape[0] != var.shape[1]))
        bad(ctx + ": a cov_matrix must have a square shape");
      if (var.type == "simplex" && var.shape.size() != 1)
        bad(ctx + ": a simplex must be a vector");
    }
    vars.push_back(std::move(var));
  }
  for (int64_t c = 0; c < n_total; ++c)
    if (!covered[c])
      bad(fmt::format("component {} of '{}' belongs to no variable", c, key));
  return vars;
}

} // namespace

const EmStepsInfo::Verdict* EmStepsInfo::find(std::string_view name) const {
  for (const Verdict& v : params)
    if (v.name == name)
      return &v;
  return nullptr;
}

const ParamInfo* ModelInfo::param_of_component(int64_t theta) const {
  for (const ParamInfo& p : params)
    if (theta >= p.offset && theta < p.offset + p.size)
      return &p;
  return nullptr;
}

const ParamInfo* ModelInfo::find_param(std::string_view pname) const {
  for (const ParamInfo& p : params)
    if (p.name == pname)
      return &p;
  return nullptr;
}

namespace {

// The frame's layout beyond theta: data values, inputs and the previous observation.
void parse_frame(const json& root, ModelInfo& info) {
  // Models compiled before data and inputs existed have no frame beyond theta.
  info.data_offset = root.value("data_offset", info.n_theta);
  info.input_offset = root.value("input_offset", info.n_theta);
  info.previous_obs_offset = root.value("previous_obs_offset", info.n_theta);
  info.n_frame = root.value("n_frame", info.previous_obs_offset + info.n_obs);
  info.reads_previous_obs = root.value("reads_previous_obs", false);
  info.n_data = info.input_offset - info.data_offset;
  info.n_inputs = info.previous_obs_offset - info.input_offset;
  if (info.data_offset != info.n_theta || info.n_data < 0 || info.n_inputs < 0 ||
      info.n_frame != info.previous_obs_offset + info.n_obs)
    bad("the frame layout (data_offset, input_offset, previous_obs_offset, n_frame) is "
        "inconsistent");
  if (root.contains("data"))
    info.data = parse_vars(root, "data", info.n_data, false);
  if (root.contains("inputs"))
    info.inputs = parse_vars(root, "inputs", info.n_inputs, false);
}

// The networks and their calls, checked against the layout: every call's output inside the state
// and the sizes of its arguments adding up to the network's inputs.
void parse_nets(const json& root, ModelInfo& info) {
  if (auto nets = root.find("nets"); nets != root.end()) {
    if (!nets->is_array())
      bad("'nets' must be an array");
    for (const json& n : *nets) {
      NetInfo net;
      net.name = get_string(n, "name", "nets entry");
      net.kind = get_string(n, "kind", "net " + net.name);
      net.inputs = get_int(n, "inputs", "net " + net.name);
      net.outputs = get_int(n, "outputs", "net " + net.name);
      net.activation = get_string(n, "activation", "net " + net.name);
      const json& hidden = field(n, "hidden", "net " + net.name);
      if (!hidden.is_array())
        bad("net " + net.name + ": 'hidden' must be an array");
      for (const json& w : hidden)
        net.hidden.push_back(w.get<int64_t>());
      net.dim = n.value("dim", int64_t{0});
      net.components = n.value("components", int64_t{0});
      net.layers = n.value("layers", int64_t{0});
      net.maps = n.value("maps", std::string("affine"));
      net.vocab = n.value("vocab", int64_t{0});
      net.embedding = n.value("embedding", int64_t{0});
      net.cell = n.value("cell", std::string("lstm"));
      if (net.density() && (net.dim < 1 || net.dim > net.inputs || net.outputs != 1))
        bad("net " + net.name + ": a density's dimension, inputs and output do not fit");
      if (net.over_sequences() &&
          (net.vocab < 1 || net.embedding < 1 || net.layers < 1 || net.inputs < 1 ||
           net.hidden.size() != 1 || (net.cell != "lstm" && net.cell != "gru")))
        bad("net " + net.name +
            ": a network over sequences needs a vocabulary, an embedding, "
            "layers of one width and a cell (lstm or gru)");
      if (net.kind == "embedding" && (net.vocab < 1 || net.inputs != 1 || net.outputs < 1))
        bad("net " + net.name + ": an embedding maps one token of its vocabulary to a vector");
      net.base = n.value("base", int64_t{-1});
      if (net.base >= 0) { // a cascade's next stage: a density before it, over the same vector
        const auto self = static_cast<int64_t>(info.nets.size());
        if (net.base >= self || !net.density() || !info.nets[net.base].density() ||
            info.nets[net.base].dim != net.dim || info.nets[net.base].base_of >= 0 ||
            info.nets[net.base].inputs != net.dim)
          bad("net " + net.name + ": its base is no context-free density of its dimension");
        info.nets[net.base].base_of = self;
      }
      info.nets.push_back(std::move(net));
    }
  }
  auto calls = root.find("net_calls");
  if (calls == root.end())
    return;
  if (!calls->is_array())
    bad("'net_calls' must be an array");
  for (const json& c : *calls) {
    NetCallInfo call;
    call.state = get_string(c, "state", "net_calls entry");
    const std::string ctx = "net call " + call.state;
    call.net = get_int(c, "net", ctx);
    call.offset = get_int(c, "offset", ctx);
    call.size = get_int(c, "size", ctx);
    if (call.net >= static_cast<int64_t>(info.nets.size()) ||
        call.offset + call.size > info.n_state || call.size != info.nets[call.net].outputs)
      bad(ctx + ": its network or its output does not fit the layout");
    if (info.nets[call.net].base_of >= 0)
      bad(ctx + ": its network is part of another's cascade");
    int64_t inputs = 0;
    for (const json& a : field(c, "arguments", ctx)) {
      NetCallInfo::Argument arg;
      arg.kind = get_string(a, "kind", ctx);
      arg.name = get_string(a, "name", ctx);
      arg.offset = get_int(a, "offset", ctx);
      arg.size = get_int(a, "size", ctx);
      if (arg.kind != "state" && arg.kind != "param" && arg.kind != "data" && arg.kind != "obs" &&
          arg.kind != "input" && arg.kind != "sequence")
        bad(ctx + ": an argument of kind '" + arg.kind + "'");
      if ((arg.kind == "sequence") !=
          (info.nets[call.net].over_sequences() && call.arguments.empty()))
        bad(ctx + ": a network over sequences reads one sequence, first");
      if (arg.kind == "input" && (arg.offset < 0 || arg.offset + arg.size > info.n_inputs))
        bad(ctx + ": its covariate '" + arg.name + "' is not among the inputs");
      inputs += arg.size;
      call.arguments.push_back(std::move(arg));
    }
    if (inputs != info.nets[call.net].inputs)
      bad(ctx + ": its arguments do not have the network's inputs");
    call.guide = c.value("guide", false);
    info.net_calls.push_back(std::move(call));
  }
}

// A state-space model's backward guide, checked against the layout.
void parse_backward_guide(const json& root, ModelInfo& info) {
  auto guide = root.find("backward_guide");
  if (guide == root.end())
    return;
  BackwardGuideInfo g;
  g.state = get_string(*guide, "state", "backward_guide");
  g.encoder = get_string(*guide, "encoder", "backward_guide");
  g.where = get_string(*guide, "where", "backward_guide");
  if (g.encoder != "mlp" && g.encoder != "linear")
    bad("backward_guide: unknown encoder '" + g.encoder + "'");
  if (g.encoder == "mlp") {
    g.net = get_int(*guide, "net", "backward_guide");
    if (g.net < 0 || g.net >= static_cast<int64_t>(info.nets.size()))
      bad("backward_guide: network " + std::to_string(g.net) + " is not declared");
  }
  for (const json& o : field(*guide, "observations", "backward_guide")) {
    BackwardGuideInfo::Observation obs{get_string(o, "name", "backward_guide observation"),
                                       get_int(o, "offset", "backward_guide observation"),
                                       get_int(o, "size", "backward_guide observation")};
    if (obs.offset < 0 || obs.size < 1 || obs.offset + obs.size > info.n_obs)
      bad("backward_guide observation " + obs.name + ": outside the observations");
    g.observations.push_back(std::move(obs));
  }
  if (g.observations.empty())
    bad("backward_guide: its encoder reads no observation");
  info.backward_guide = std::move(g);
}

// The guide's relations and inputs, checked against the layout.
void parse_guide(const json& root, ModelInfo& info) {
  auto guide = root.find("guide");
  if (guide == root.end())
    return;
  GuideInfo& g = info.guide;
  g.n_arguments = get_int(*guide, "n_arguments", "guide");
  int64_t at = 0;
  for (const json& r : field(*guide, "relations", "guide")) {
    GuideInfo::Relation rel;
    rel.latent = get_string(r, "latent", "guide relation");
    const std::string ctx = "the guide of " + rel.latent;
    rel.dist = get_string(r, "dist", ctx);
    rel.offset = get_int(r, "offset", ctx);
    rel.size = get_int(r, "size", ctx);
    if (rel.offset < 0 || rel.offset + rel.size > info.n_state)
      bad(ctx + ": its latent does not fit the state");
    const bool two = rel.dist == "normal" || rel.dist == "mvnormal_chol", dif = rel.dist == "dif";
    const size_t arity = dif ? 4 : two ? 2 : 1;
    if (!two && !dif && rel.dist != "categorical" && rel.dist != "bernoulli" &&
        rel.dist != "bernoulli_logit")
      bad(ctx + ": a guide cannot be '" + rel.dist + "'");
    if (dif) {
      rel.components = get_int(r, "components", ctx);
      rel.width = get_int(r, "width", ctx);
      rel.layers = r.value("layers", int64_t{0});
      if (rel.layers < 0)
        bad(ctx + ": a dif's layers must be 0 or more");
      if (rel.components < 1 || rel.width < 1)
        bad(ctx + ": a dif needs at least one component and one unit");
    }
    for (const json& a : field(r, "arguments", ctx)) {
      GuideInfo::Relation::Argument arg{get_int(a, "offset", ctx), get_int(a, "size", ctx)};
      if (arg.offset != at)
        bad(ctx + ": its arguments are not laid out in order");
      at += arg.size;
      rel.arguments.push_back(arg);
    }
    if (rel.arguments.size() != arity)
      bad(ctx + ": " + rel.dist + " with the wrong number of arguments");
    if (rel.dist == "mvnormal_chol" &&
        (rel.arguments[0].size != rel.size || rel.arguments[1].size != rel.size * rel.size))
      bad(ctx + ": mvnormal_chol's mean and factor do not fit its latent");
    g.relations.push_back(std::move(rel));
  }
  if (at != g.n_arguments)
    bad("guide: 'n_arguments' does not match its relations");
  for (const json& i : field(*guide, "inputs", "guide")) {
    GuideInfo::Input in{get_string(i, "state", "guide input"), get_int(i, "offset", "guide input"),
                        get_int(i, "size", "guide input")};
    if (in.offset < 0 || in.offset + in.size > info.n_state)
      bad("guide input " + in.state + ": outside the state");
    g.n_inputs += in.size;
    g.inputs.push_back(std::move(in));
  }
  for (const json& o : field(*guide, "observations", "guide")) {
    GuideInfo::Observation obs{get_string(o, "name", "guide observation"),
                               get_int(o, "offset", "guide observation"),
                               get_int(o, "size", "guide observation")};
    if (obs.offset < 0 || obs.offset + obs.size > info.n_obs)
      bad("guide observation " + obs.name + ": outside the observations");
    g.observations.push_back(std::move(obs));
  }
  const auto st = root.find("structure");
  const json* kernel =
      st != root.end() && st->is_object() && st->contains("guide") ? &st->at("guide") : nullptr;
  if (!kernel || !kernel->value("available", false)) {
    g.why_not = kernel ? kernel->value("reason", "") : "no structure.guide in the metadata";
    return;
  }
  for (const json& entry : field(*kernel, "jacobian", "structure.guide")) {
    const int64_t row = entry.at(0).get<int64_t>(), col = entry.at(1).get<int64_t>();
    if (row < 0 || row >= g.n_arguments || col < 0 || col >= g.n_inputs)
      bad("structure.guide: a Jacobian entry outside the arguments x inputs");
    g.jacobian.emplace_back(row, col);
  }
}

// The structure analyses' verdicts and reasons; returns the functionals' analysis (or null).
const json* parse_structure(const json& root, ModelInfo& info) {
  // The structure analyses' results: an object (see docs/compiler.md), or only a text report.
  auto st = root.find("structure");
  if (st != root.end() && st->is_string())
    info.structure = st->get<std::string>();
  if (st != root.end() && st->is_object()) {
    auto report = st->find("report");
    if (report != st->end() && report->is_string())
      info.structure = report->get<std::string>();
    auto verdict = [&](const char* analysis, const char* key) {
      auto a = st->find(analysis);
      if (a == st->end() || !a->is_object())
        return false;
      auto v = a->find(key);
      return v != a->end() && v->is_boolean() && v->get<bool>();
    };
    if (auto items = st->find("items"); items != st->end() && items->is_string())
      info.step = items->get<std::string>();
    if (auto sim = st->find("simulation"); sim != st->end() && sim->is_object())
      info.simulation =
          ModelInfo::Simulation{sim->value("params", 0), sim->value("likelihood", false),
                                sim->value("no_likelihood_reason", "")};
    info.linear_gaussian = verdict("linear_gaussian", "is_linear_gaussian");
    info.finite_state = verdict("finite_state", "is_finite");
  }
  if (st != root.end() && st->is_object())
    if (auto d = st->find("density"); d != st->end() && d->is_object()) {
      info.transition_tractable = d->value("tractable", true);
      if (auto rels = d->find("relations"); rels != d->end() && rels->is_array())
        for (const json& r : *rels)
          if (r.is_object() && r.value("kind", "") == "sample_only" &&
              info.sample_only_reason.empty())
            if (auto why = r.find("sample_only_reason"); why != r.end() && why->is_string())
              info.sample_only_reason = r.value("relation", "") + ": " + why->get<std::string>();
      auto b = d->find("bound");
      // A bound that reads x[t-1] is fine: the runtime maximises it over the particles.
      if (b != d->end() && b->is_object())
        info.transition_bound = b->value("expr", "");
      else if (auto why = d->find("no_bound_reason"); why != d->end() && why->is_string())
        info.no_bound_reason = why->get<std::string>();
    }
  if (st != root.end() && st->is_object())
    if (auto e = st->find("sde"); e != st->end() && e->is_object()) {
      ModelInfo::Sde sde;
      sde.relation = e->value("relation", "");
      sde.state = e->value("state", -1);
      sde.dim = e->value("dim", 0);
      sde.steps = e->value("steps", 0);
      const std::string coefficient = e->value("coefficient", "scalar");
      sde.coefficient_size = coefficient == "matrix"   ? sde.dim * sde.dim
                             : coefficient == "vector" ? sde.dim
                                                       : 1;
      sde.coefficient_constant = e->value("coefficient_constant", false);
      if (auto w = e->find("why_not"); w != e->end() && w->is_string())
        sde.why_not = w->get<std::string>();
      if (auto g = e->find("gpe"); g != e->end() && g->is_object()) {
        if (auto r = g->find("reason"); r != g->end() && r->is_string())
          sde.gpe_reason = r->get<std::string>();
        sde.gpe_positive = g->value("positive", false);
        sde.gpe_bounded = g->value("bounded", false);
        sde.psi_lower_given = g->value("psi_lower_given", false);
        sde.psi_upper_given = g->value("psi_upper_given", false);
        sde.exact_bridges = g->value("exact_bridges", false);
      }
      if (auto g = e->find("gradient"); g != e->end() && g->is_object()) {
        sde.gradient_reason =
            g->value("available", false) ? "" : g->value("reason", "no reason given");
        sde.gradient_rows = sde.gradient_reason.empty() ? g->value("rows", 0) : 0;
        sde.coefficient_gradient_rows =
            sde.gradient_reason.empty() ? g->value("coefficient_rows", 0) : 0;
      }
      if (auto p = e->find("parametrix"); p != e->end() && p->is_object()) {
        sde.parametrix_reason =
            p->value("available", false) ? "" : p->value("reason", "no reason given");
        sde.parametrix_rows = sde.parametrix_reason.empty() ? p->value("rows", 0) : 0;
      }
      sde.estimator = sde.gpe_reason.empty()          ? "gpe"
                      : sde.parametrix_reason.empty() ? "parametrix"
                                                      : "";
      info.sde = sde;
    }
  if (st != root.end() && st->is_object())
    if (auto g = st->find("gaussian_moments"); g != st->end() && g->is_object())
      info.not_gaussian_reason = g->value("reason", "");
  if (st != root.end() && st->is_object())
    if (auto g = st->find("score"); g != st->end() && g->is_object()) {
      if (!g->value("available", true))
        info.no_score_reason = g->value("reason", "no reason given");
      else
        info.score_lacks_sde_term = g->value("sde_term", "none") == "estimated";
    }
  if (st != root.end() && st->is_object())
    if (auto g = st->find("prior");
        g != st->end() && g->is_object() && !g->value("available", true))
      info.no_prior_reason = g->value("reason", "no reason given");
  if (st != root.end() && st->is_object())
    if (auto g = st->find("state_gradient");
        g != st->end() && g->is_object() && !g->value("available", true))
      info.no_state_gradient_reason = g->value("reason", "no reason given");
  const json* functional_analysis = nullptr;
  if (st != root.end() && st->is_object())
    if (auto f = st->find("functionals"); f != st->end() && f->is_array())
      functional_analysis = &*f;
  return functional_analysis;
}

void parse_params(const json& root, ModelInfo& info) {
  const json& params = field(root, "params", "model");
  if (!params.is_array())
    bad("'params' must be an array");
  std::vector<bool> covered(info.n_theta, false);
  for (const json& v : params) {
    ParamInfo p;
    p.name = get_string(v, "name", "params entry");
    std::string ctx = fmt::format("parameter '{}'", p.name);
    if (info.find_param(p.name))
      bad(ctx + ": declared twice");
    p.type = get_string(v, "type", ctx);
    p.shape = get_shape(v, ctx);
    p.offset = get_int(v, "offset", ctx);
    p.size = get_int(v, "size", ctx);
    if (p.size != shape_size(p.shape))
      bad(ctx + ": 'size' does not match 'shape'");
    if (p.offset + p.size > info.n_theta)
      bad(ctx + ": exceeds n_theta");
    for (int64_t c = p.offset; c < p.offset + p.size; ++c) {
      if (covered[c])
        bad(ctx + ": overlaps another parameter");
      covered[c] = true;
    }
    if (p.type == "cov_matrix" && (p.shape.size() != 2 || p.shape[0] != p.shape[1]))
      bad(ctx + ": a cov_matrix must have a square shape");
    auto def = v.find("default");
    if (def != v.end() && !def->is_null()) {
      std::vector<double> d;
      flatten_into(*def, d, ctx);
      if (static_cast<int64_t>(d.size()) != p.size)
        bad(ctx + ": 'default' has the wrong number of elements");
      p.default_value = std::move(d);
    }
    p.lower = get_bound(v, "lower", ctx);
    p.upper = get_bound(v, "upper", ctx);
    auto prior = v.find("prior");
    if (prior != v.end() && prior->is_string())
      p.prior = prior->get<std::string>();
    info.params.push_back(std::move(p));
  }
  for (int64_t c = 0; c < info.n_theta; ++c)
    if (!covered[c])
      bad(fmt::format("theta[{}] belongs to no parameter", c));
}

// structure.em_steps (passes/em_m_steps.cpp): every read and theta component is checked
// against the model's sizes, so the runtime can index with them.
void parse_em_steps(const json& root, ModelInfo& info) {
  const auto st = root.find("structure");
  if (st == root.end() || !st->is_object())
    return;
  const auto em = st->find("em_steps");
  if (em == st->end() || !em->is_object())
    return;
  const std::string ctx = "structure.em_steps";
  auto theta = [&](const json& v) {
    const int64_t c = v.get<int64_t>();
    if (c < 0 || c >= info.n_theta)
      bad(ctx + ": a theta component out of range");
    return c;
  };
  auto thetas = [&](const json& v) {
    std::vector<int64_t> out;
    for (const json& c : v)
      out.push_back(theta(c));
    return out;
  };
  auto read = [&](const json& v) {
    EmRead r;
    const std::string kind = v.at(0).get<std::string>();
    r.obs = kind == "obs";
    r.input = kind == "input";
    r.offset = v.at(1).get<int64_t>();
    r.lag = v.at(2).get<int>();
    const int64_t size = r.obs ? info.n_obs : r.input ? info.n_inputs : info.n_state;
    if (r.offset < 0 || r.offset >= size || r.lag < 0 || r.lag > 1)
      bad(ctx + ": a read out of range");
    return r;
  };
  auto read_sum = [&](const json& v) {
    EmReadSum r;
    r.constant = v.at("constant").get<double>();
    for (const json& t : v.at("terms"))
      r.terms.push_back({t.at(0).get<double>(), read(json::array({t.at(1), t.at(2), t.at(3)}))});
    return r;
  };
  try {
    for (const json& p : em->at("pieces")) {
      EmPiece piece;
      piece.relation = p.at("relation").get<std::string>();
      piece.block = p.at("block").get<std::string>();
      piece.family = p.at("family").get<std::string>();
      piece.noise = p.at("noise").get<std::string>();
      piece.noise_value = p.value("noise_value", 0.0);
      for (const json& r : p.at("target"))
        piece.target.push_back(read(r));
      if (!p.at("group").is_null())
        piece.group = read(p.at("group"));
      piece.groups = p.at("groups").get<int64_t>();
      for (const json& row : p.at("probabilities"))
        piece.probabilities.push_back(thetas(row));
      piece.rate = thetas(p.at("rate"));
      piece.exposure = read_sum(p.at("exposure"));
      for (const json& r : p.at("offset"))
        piece.offset.push_back(read_sum(r));
      for (const json& c : p.at("coefficients"))
        piece.coefficients.push_back({thetas(c.at("theta")), read_sum(c.at("feature"))});
      for (const json& row : p.at("matrix"))
        piece.matrix.push_back(thetas(row));
      for (const json& r : p.at("features"))
        piece.features.push_back(read_sum(r));
      piece.noise_theta = thetas(p.at("noise_theta"));
      const int64_t d = static_cast<int64_t>(piece.target.size()),
                    k = static_cast<int64_t>(piece.features.size());
      if (piece.family == "mvnormal" &&
          (static_cast<int64_t>(piece.matrix.size()) != d ||
           std::any_of(piece.matrix.begin(), piece.matrix.end(),
                       [&](const auto& row) { return static_cast<int64_t>(row.size()) != k; })))
        bad(ctx + ": a coefficient table that does not match the features");
      if (piece.family == "mvnormal" && piece.noise == "cov" &&
          (piece.noise_theta.size() != 1 || piece.noise_theta[0] + d * d > info.n_theta))
        bad(ctx + ": a covariance out of range");
      const bool gaussian = piece.family == "normal" || piece.family == "mvnormal";
      if (piece.groups < 1 || (gaussian ? static_cast<int64_t>(piece.offset.size()) != d : d != 1))
        bad(ctx + ": a piece's target does not match its parts");
      if (!gaussian && piece.family != "categorical" && piece.family != "poisson" &&
          piece.family != "bernoulli")
        bad(ctx + ": an unknown family '" + piece.family + "'");
      if (piece.block != "initial" && piece.block != "transition" && piece.block != "observation" &&
          piece.block != "plate")
        bad(ctx + ": an unknown block '" + piece.block + "'");
      if (piece.noise != "constant" && piece.noise != "sd" && piece.noise != "variance" &&
          piece.noise != "cov")
        bad(ctx + ": an unknown noise '" + piece.noise + "'");
      // Per-group slots: one, or one per group.
      auto per_group = [&](size_t n) { return n == 1 || static_cast<int64_t>(n) == piece.groups; };
      const bool slots_ok =
          (piece.family != "categorical" || per_group(piece.probabilities.size())) &&
          std::all_of(piece.probabilities.begin(), piece.probabilities.end(),
                      [](const auto& row) { return !row.empty(); }) &&
          (piece.family != "poisson" && piece.family != "bernoulli"
               ? true
               : per_group(piece.rate.size())) &&
          std::all_of(piece.coefficients.begin(), piece.coefficients.end(),
                      [&](const auto& c) { return per_group(c.theta.size()); }) &&
          (piece.noise == "constant" || per_group(piece.noise_theta.size())) &&
          (piece.group.has_value() || piece.groups == 1);
      if (!slots_ok)
        bad(ctx + ": a piece's theta slots do not match its groups");
      info.em_steps.pieces.push_back(std::move(piece));
    }
    for (const json& v : em->at("params")) {
      EmStepsInfo::Verdict verdict;
      verdict.name = v.at("name").get<std::string>();
      verdict.closed_form = v.at("closed_form").get<bool>();
      for (const json& i : v.at("pieces")) {
        verdict.pieces.push_back(i.get<int64_t>());
        if (verdict.pieces.back() < 0 ||
            verdict.pieces.back() >= static_cast<int64_t>(info.em_steps.pieces.size()))
          bad(ctx + ": a piece index out of range");
      }
      if (!v.at("reason").is_null())
        verdict.reason = v.at("reason").get<std::string>();
      verdict.read_by_prior = v.value("read_by_prior", false);
      info.em_steps.params.push_back(std::move(verdict));
    }
    if (auto o = em->find("observations_read"); o != em->end())
      for (const json& c : *o) {
        info.em_steps.observations_read.push_back(c.get<int64_t>());
        if (info.em_steps.observations_read.back() < 0 ||
            info.em_steps.observations_read.back() >= info.n_obs)
          bad(ctx + ": an observation out of range");
      }
  } catch (const json::exception& e) {
    bad(fmt::format("{}: {}", ctx, e.what()));
  }
}

} // namespace

ModelInfo parse_metadata(std::string_view text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    bad(std::string("not valid JSON: ") + e.what());
  }
  if (!root.is_object())
    bad("not a JSON object");
  ModelInfo info;
  info.name = get_string(root, "name", "model");
  auto src = root.find("source");
  if (src != root.end() && src->is_string())
    info.source = src->get<std::string>();
  if (auto dir = root.find("runtime_dir"); dir != root.end() && dir->is_string())
    info.runtime_dir = dir->get<std::string>();
  info.n_state = get_int(root, "n_state", "model");
  info.n_obs = get_int(root, "n_obs", "model");
  info.n_theta = get_int(root, "n_theta", "model");
  info.state = parse_vars(root, "state", info.n_state, false);
  info.obs = parse_vars(root, "obs", info.n_obs, true);
  parse_frame(root, info);
  const json* functional_analysis = parse_structure(root, info);
  info.functionals = parse_functionals(root, functional_analysis, info.n_functional);
  parse_params(root, info);
  parse_nets(root, info);
  parse_guide(root, info);
  parse_backward_guide(root, info);
  parse_em_steps(root, info);
  return info;
}

} // namespace ssm
