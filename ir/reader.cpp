// The IR reader: the inverse of printer.cpp, one line at a time. Declarations come first, then
// blocks `name {` ... `}` of nodes `%i = op operands : shape` and relations `target ~ dist(%a)`.
#include "reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ssm::ir {

ReadError::ReadError(int line, int column, const std::string& message)
    : std::runtime_error(fmt::format("line {}, column {}: {}", line, column, message)), line_(line),
      column_(column), message_(message) {}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

class Reader {
public:
  explicit Reader(std::string_view text) : text_(text) {}

  Model run() {
    Model model;
    bool named = false;
    while (next_line()) {
      std::string_view line = line_;
      if (!named) {
        bool simulator = starts_with(line, "simulator ");
        if (!starts_with(line, "model ") && !simulator)
          fail("expected 'model NAME' or 'simulator NAME'");
        model.kind = simulator ? ModelKind::Simulator : ModelKind::StateSpace;
        model.name = std::string(trim(line.substr(line.find(' ') + 1)));
        named = true;
      } else if (line == "plate n") {
        if (model.kind != ModelKind::StateSpace)
          fail("'plate n' belongs to a model, once");
        model.kind = ModelKind::Plate;
      } else if (line == "items n") {
        if (model.kind != ModelKind::StateSpace || model.items)
          fail("'items n' belongs to a state-space model, once");
        model.items = true;
      } else if (starts_with(line, "simulation ")) {
        if (model.kind != ModelKind::StateSpace || model.simulation)
          fail("'simulation P' belongs to a state-space model, once");
        model.simulation = true;
        model.simulation_params = parse_int(trim(line.substr(11)));
      } else if (starts_with(line, "const ")) {
        auto [name, type, value] = declaration(line.substr(6));
        if (!value)
          fail("a constant needs a value");
        Shape shape = parse_shape(type);
        model.consts.push_back({name, shape, parse_values(*value, shape), {}});
      } else if (starts_with(line, "param ")) {
        auto [name, type, value] = declaration(line.substr(6));
        ParamDecl p;
        p.name = name;
        type = strip_bounds(type, p.lower, p.upper);
        if (auto [constraint, shape] = constrained(type); constraint != Constraint::None) {
          p.type = constraint == Constraint::CovMatrix ? ParamType::CovMatrix : ParamType::Simplex;
          p.shape = shape;
        } else {
          p.shape = parse_shape(type);
          p.type = p.shape.rank() == 0   ? ParamType::Real
                   : p.shape.rank() == 1 ? ParamType::Vector
                                         : ParamType::Matrix;
        }
        if (value)
          p.default_value = parse_values(*value, p.shape);
        model.params.push_back(std::move(p));
      } else if (starts_with(line, "state ") || starts_with(line, "obs ") ||
                 starts_with(line, "data ") || starts_with(line, "input ") ||
                 starts_with(line, "latent ")) {
        std::string_view kind = line.substr(0, line.find(' '));
        auto [name, type, value] = declaration(line.substr(kind.size() + 1));
        if (value)
          fail("a variable has no value");
        // A plate model's latents, observations and inputs are written per item, `z[n]`.
        bool per_item = kind == "latent" || kind == "obs" || kind == "input";
        if (per_item && model.kind == ModelKind::Plate) {
          if (name.size() < 4 || name.substr(name.size() - 3) != "[n]")
            fail(fmt::format("expected '{}[n]' in a plate model", name));
          name.resize(name.size() - 3);
        }
        std::vector<VarDecl>& decls = kind == "state"    ? model.states
                                      : kind == "obs"    ? model.obs
                                      : kind == "latent" ? model.latents
                                      : kind == "data"   ? model.data
                                                         : model.inputs;
        decls.push_back(var_decl(name, type));
      } else if (starts_with(line, "netcall ")) {
        model.net_calls.push_back(net_call(model, line.substr(8)));
      } else if (starts_with(line, "net ")) {
        model.nets.push_back(net_decl(line.substr(4), model));
      } else if (line.back() == '{') {
        read_block(model, block_kind(trim(line.substr(0, line.size() - 1))));
      } else {
        fail(fmt::format("unexpected '{}'", line), line);
      }
    }
    if (!named)
      fail("empty input: expected 'model NAME'");
    return model;
  }

private:
  // The next line that is neither blank nor a comment, trimmed, in line_; false at the end.
  bool next_line() {
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string_view::npos)
        end = text_.size();
      raw_line_ = text_.substr(pos_, end - pos_);
      line_ = trim(raw_line_);
      pos_ = end + 1;
      ++line_number_;
      if (!line_.empty() && line_[0] != ';')
        return true;
    }
    return false;
  }

  // `at`, a part of the current line, places the column; else the line's first character does.
  [[noreturn]] void fail(const std::string& message, std::string_view at = {}) const {
    if (line_number_ == 0)
      throw ReadError(0, 0, message);
    const char* begin = raw_line_.data();
    const char* end = begin + raw_line_.size();
    std::less_equal<const char*> le; // a total order, for `at` from anywhere
    const char* where = le(begin, at.data()) && le(at.data(), end) ? at.data() : line_.data();
    throw ReadError(line_number_, static_cast<int>(where - begin) + 1, message);
  }

  // "NAME : TYPE" or "NAME : TYPE = VALUE".
  std::tuple<std::string, std::string_view, std::optional<std::string_view>>
  declaration(std::string_view rest) {
    size_t colon = rest.find(" : ");
    if (colon == std::string_view::npos)
      fail("expected 'NAME : TYPE'");
    std::string name(trim(rest.substr(0, colon)));
    std::string_view type = rest.substr(colon + 3);
    std::optional<std::string_view> value;
    if (size_t eq = type.find(" = "); eq != std::string_view::npos) {
      value = trim(type.substr(eq + 3));
      type = type.substr(0, eq);
    }
    if (name.empty())
      fail("expected a name");
    return {name, trim(type), value};
  }

  // Comma-separated items of `s`, trimmed; none for an empty `s`.
  static std::vector<std::string_view> split_list(std::string_view s) {
    std::vector<std::string_view> items;
    s = trim(s);
    while (!s.empty()) {
      const size_t comma = s.find(',');
      items.push_back(trim(s.substr(0, comma)));
      s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    }
    return items;
  }

  // "NAME : mlp(inputs = 2, outputs = 3, hidden = [8, 8], activation = tanh)"
  NetDecl net_decl(std::string_view rest, Model& model) const {
    NetDecl net;
    const size_t colon = rest.find(':'), open = rest.find('('), hidden = rest.find('['),
                 close = rest.find(']');
    if (colon == std::string_view::npos || open == std::string_view::npos ||
        hidden == std::string_view::npos || close == std::string_view::npos || rest.back() != ')')
      fail("expected 'net NAME : mlp(inputs = I, outputs = O, hidden = [...], activation = A)'");
    net.name = std::string(trim(rest.substr(0, colon)));
    net.kind = std::string(trim(rest.substr(colon + 1, open - colon - 1)));
    for (std::string_view width : split_list(rest.substr(hidden + 1, close - hidden - 1)))
      net.hidden.push_back(parse_int(width));
    std::string_view options = rest.substr(open + 1, rest.size() - open - 2);
    for (std::string_view option : split_list(options)) {
      const size_t eq = option.find('=');
      if (eq == std::string_view::npos)
        continue; // a width of the hidden list
      const std::string_view key = trim(option.substr(0, eq)), value = trim(option.substr(eq + 1));
      if (key == "inputs")
        net.inputs = parse_int(value);
      else if (key == "outputs")
        net.outputs = parse_int(value);
      else if (key == "activation")
        net.activation = std::string(value);
      else if (key == "dim")
        net.dim = parse_int(value);
      else if (key == "components")
        net.components = parse_int(value);
      else if (key == "layers")
        net.layers = parse_int(value);
      else if (key == "maps")
        net.maps = std::string(value);
      else if (key == "vocab")
        net.vocab = parse_int(value);
      else if (key == "embedding")
        net.embedding = parse_int(value);
      else if (key == "cell")
        net.cell = std::string(value);
      else if (key == "base") { // a cascade's next stage, declared before
        for (size_t k = 0; k < model.nets.size(); ++k)
          if (model.nets[k].name == value) {
            net.base = static_cast<int>(k);
            model.nets[k].base_of = static_cast<int>(model.nets.size());
          }
        if (net.base < 0)
          fail(fmt::format("no network '{}' before this one", value), value);
      } else if (key != "hidden")
        fail(fmt::format("unknown network option '{}'", key), key);
    }
    return net;
  }

  // "STATE = NET(ARG, ...)": arguments are parameters, data items, observations, inputs or
  // states, by name.
  NetCall net_call(const Model& model, std::string_view rest) const {
    const size_t eq = rest.find('='), open = rest.find('(');
    if (eq == std::string_view::npos || open == std::string_view::npos || rest.back() != ')')
      fail("expected 'netcall STATE = NET(ARG, ...)'");
    NetCall call;
    call.state = find_var(model.states, trim(rest.substr(0, eq)), "state");
    const std::string_view net = trim(rest.substr(eq + 1, open - eq - 1));
    for (size_t i = 0; i < model.nets.size(); ++i)
      if (model.nets[i].name == net)
        call.net = static_cast<int>(i);
    if (call.net < 0)
      fail(fmt::format("unknown network '{}'", net), net);
    for (std::string_view arg : split_list(rest.substr(open + 1, rest.size() - open - 2))) {
      Node leaf;
      auto named = [&](const auto& decls) {
        for (size_t i = 0; i < decls.size(); ++i)
          if (decls[i].name == arg)
            return static_cast<int>(i);
        return -1;
      };
      if ((leaf.var = named(model.params)) >= 0) {
        leaf.op = Op::Param;
        leaf.shape = model.params[leaf.var].shape;
      } else if ((leaf.var = named(model.data)) >= 0) {
        leaf.op = Op::Data;
        leaf.shape = model.data[leaf.var].shape;
      } else if ((leaf.var = named(model.obs)) >= 0) { // a guide's network reads observations
        leaf.op = Op::Obs;
        leaf.shape = model.obs[leaf.var].shape;
      } else if ((leaf.var = named(model.inputs)) >= 0) { // a covariate
        leaf.op = Op::Input;
        leaf.shape = model.inputs[leaf.var].shape;
      } else {
        leaf.op = Op::State;
        leaf.var = find_var(model.states, arg, "state");
        leaf.shape = model.states[leaf.var].shape;
      }
      call.args.push_back(std::move(leaf));
    }
    return call;
  }

  int parse_int(std::string_view s) const {
    s = trim(s);
    int value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
      fail(fmt::format("expected an integer, not '{}'", s), s);
    return value;
  }

  double parse_double(std::string_view s) const {
    s = trim(s);
    double value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc::result_out_of_range && end == s.data() + s.size()) {
      // A subnormal, which the printer writes as it holds it; strtod returns it (with ERANGE).
      std::string copy(s);
      value = std::strtod(copy.c_str(), nullptr);
    } else if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
      fail(fmt::format("expected a number, not '{}'", s), s);
    }
    return value;
  }

  // Bounds follow a type: real(lo, hi), vector[3](0, 1). Returns the type without them, and sets
  // lower and upper when there are bounds.
  std::string_view strip_bounds(std::string_view type, double& lower, double& upper) const {
    if (type.empty() || type.back() != ')')
      return type;
    size_t open = type.rfind('(');
    if (open == std::string_view::npos)
      fail(fmt::format("malformed bounds in '{}'", type), type);
    std::string_view bounds = type.substr(open + 1, type.size() - open - 2);
    size_t comma = bounds.find(',');
    if (comma == std::string_view::npos)
      fail(fmt::format("malformed bounds in '{}'", type), type);
    lower = parse_double(bounds.substr(0, comma));
    upper = parse_double(bounds.substr(comma + 1));
    return trim(type.substr(0, open));
  }

  // "cov_matrix[n]" or "simplex[n]" and its shape; Constraint::None for any other type.
  std::pair<Constraint, Shape> constrained(std::string_view type) const {
    if (!starts_with(type, "cov_matrix[") && !starts_with(type, "simplex["))
      return {Constraint::None, Shape::scalar()};
    bool cov = type[0] == 'c';
    size_t open = cov ? 11 : 8;
    if (type.back() != ']')
      fail(fmt::format("malformed type '{}'", type), type);
    int n = parse_int(type.substr(open, type.size() - open - 1));
    return cov ? std::pair(Constraint::CovMatrix, Shape::matrix(n, n))
               : std::pair(Constraint::Simplex, Shape::vector(n));
  }

  // A variable's type: a shape, "int" / "int[lo..hi]", or (data) "real(lo, hi)", "simplex[n]",
  // "cov_matrix[n]", or (a plate model's obs) "sequence[V]".
  VarDecl var_decl(const std::string& name, std::string_view type) const {
    VarDecl v{name, Shape::scalar(), {}};
    if (starts_with(type, "sequence[") && type.back() == ']') {
      v.constraint = Constraint::Sequence;
      v.integer = true;
      v.lower = 0;
      v.upper = parse_int(type.substr(9, type.size() - 10)) - 1;
    } else if (!type.empty() && type.back() == ')') {
      v.shape = parse_shape(strip_bounds(type, v.lower, v.upper));
    } else if (auto [constraint, shape] = constrained(type); constraint != Constraint::None) {
      v.constraint = constraint;
      v.shape = shape;
    } else if (type == "int") {
      v.integer = true;
    } else if (starts_with(type, "int[") && type.back() == ']') {
      std::string_view range = type.substr(4, type.size() - 5);
      size_t dots = range.find("..");
      if (dots == std::string_view::npos)
        fail(fmt::format("malformed type '{}'", type), type);
      v.integer = true;
      v.lower = parse_double(range.substr(0, dots));
      v.upper = parse_double(range.substr(dots + 2));
    } else {
      v.shape = parse_shape(type);
    }
    return v;
  }

  // "real", "vector[n]", "matrix[r, c]".
  Shape parse_shape(std::string_view s) const {
    s = trim(s);
    if (s == "real")
      return Shape::scalar();
    if (starts_with(s, "vector[") && s.back() == ']')
      return Shape::vector(parse_int(s.substr(7, s.size() - 8)));
    if (starts_with(s, "matrix[") && s.back() == ']') {
      std::string_view dims = s.substr(7, s.size() - 8);
      size_t comma = dims.find(',');
      if (comma != std::string_view::npos)
        return Shape::matrix(parse_int(dims.substr(0, comma)), parse_int(dims.substr(comma + 1)));
    }
    fail(fmt::format("expected a shape (real, vector[n], matrix[r, c]), not '{}'", s), s);
  }

  // "a, b, c": numbers separated by commas.
  std::vector<double> parse_list(std::string_view s) const {
    std::vector<double> values;
    while (!trim(s).empty()) {
      const size_t comma = s.find(',');
      values.push_back(parse_double(s.substr(0, comma)));
      s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    }
    return values;
  }

  // A scalar, "[a, b]" or "[[a, b], [c, d]]": the brackets must nest as the shape says.
  std::vector<double> parse_values(std::string_view s, const Shape& shape) const {
    std::vector<double> values;
    int depth = 0, max_depth = 0;
    size_t start = 0;
    auto flush = [&](size_t end) {
      std::string_view item = trim(s.substr(start, end - start));
      if (!item.empty())
        values.push_back(parse_double(item));
    };
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (c == '[' || c == ']' || c == ',') {
        flush(i);
        start = i + 1;
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        max_depth = std::max(max_depth, depth);
        if (depth < 0)
          fail(fmt::format("unbalanced brackets in '{}'", s), s);
      }
    }
    flush(s.size());
    if (depth != 0 || max_depth != shape.rank() || static_cast<int>(values.size()) != shape.size())
      fail(fmt::format("'{}' is not a value of shape {}", s, shape.str()));
    return values;
  }

  BlockKind block_kind(std::string_view name) const {
    for (BlockKind kind :
         {BlockKind::Prior, BlockKind::Initial, BlockKind::Transition, BlockKind::Observation,
          BlockKind::Functional, BlockKind::Proposal, BlockKind::Lookahead, BlockKind::Plate,
          BlockKind::Simulator, BlockKind::Guide})
      if (block_name(kind) == name)
        return kind;
    fail(fmt::format("unknown block '{}'", name), name);
  }

  // "%3" -> 3, checked against the nodes defined so far.
  int operand(std::string_view s, const Block& block) const {
    s = trim(s);
    if (s.empty() || s[0] != '%')
      fail(fmt::format("expected an operand %N, not '{}'", s), s);
    int id = parse_int(s.substr(1));
    if (id < 0 || id >= static_cast<int>(block.nodes.size()))
      fail(fmt::format("operand {} is not an earlier node", s), s);
    return id;
  }

  std::vector<int> operands(std::string_view s, const Block& block) const {
    std::vector<int> args;
    s = trim(s);
    while (!s.empty()) {
      size_t comma = s.find(',');
      args.push_back(operand(s.substr(0, comma), block));
      s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    }
    return args;
  }

  // A reference as the block writes it: "NAME[0]", "NAME[t]", "NAME[t-k]" -> (NAME, lag); in a
  // plate block "NAME[n]" and in a simulator block "NAME" -> (NAME, 0).
  std::pair<std::string, int> reference(BlockKind kind, std::string_view s) const {
    if (kind == BlockKind::Simulator)
      return {std::string(s), 0};
    if (kind == BlockKind::Plate || kind == BlockKind::Guide) {
      if (s.size() < 4 || s.substr(s.size() - 3) != "[n]")
        fail(fmt::format("expected NAME[n] in the {} block, not '{}'", block_name(kind), s), s);
      return {std::string(s.substr(0, s.size() - 3)), 0};
    }
    return lagged(s);
  }

  // "NAME[0]", "NAME[t]", "NAME[t-k]" -> (NAME, lag).
  std::pair<std::string, int> lagged(std::string_view s) const {
    size_t bracket = s.find('[');
    if (bracket == std::string_view::npos || s.back() != ']')
      fail(fmt::format("expected NAME[t], NAME[t-k] or NAME[0], not '{}'", s), s);
    std::string name(s.substr(0, bracket));
    std::string_view index = s.substr(bracket + 1, s.size() - bracket - 2);
    if (index == "0" || index == "t")
      return {name, 0};
    if (starts_with(index, "t-"))
      return {name, parse_int(index.substr(2))};
    fail(fmt::format("unknown time index '[{}]'", index), index);
  }

  int find_var(const std::vector<VarDecl>& vars, std::string_view name, const char* what) const {
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i].name == name)
        return static_cast<int>(i);
    fail(fmt::format("unknown {} '{}'", what, name), name);
  }

  int find_param(const Model& model, std::string_view name) const {
    for (size_t i = 0; i < model.params.size(); ++i)
      if (model.params[i].name == name)
        return static_cast<int>(i);
    fail(fmt::format("unknown parameter '{}'", name), name);
  }

  void read_block(Model& model, BlockKind kind) {
    Block& block = model.block(kind);
    if (!block.nodes.empty() || !block.relations.empty())
      fail(fmt::format("a second {} block", block_name(kind)));
    while (next_line()) {
      std::string_view line = line_;
      if (line == "}")
        return;
      if (line[0] == '%')
        block.nodes.push_back(read_node(model, block, line));
      else if (starts_with(line, "output "))
        block.outputs.push_back(operand(line.substr(7), block));
      else if (kind == BlockKind::Functional)
        read_functional(model, block, line);
      else
        block.relations.push_back(read_relation(model, block, line));
    }
    fail(fmt::format("the {} block has no closing '}}'", block_name(kind)));
  }

  // "%i = op operands : shape"
  Node read_node(const Model& model, const Block& block, std::string_view line) const {
    size_t eq = line.find(" = ");
    size_t colon = line.rfind(" : ");
    if (eq == std::string_view::npos || colon == std::string_view::npos || colon < eq)
      fail("expected '%N = op operands : shape'");
    if (line.substr(0, eq) != fmt::format("%{}", block.nodes.size()))
      fail(fmt::format("expected node %{} next", block.nodes.size()));
    Node node;
    node.shape = parse_shape(line.substr(colon + 3));
    std::string_view body = trim(line.substr(eq + 3, colon - eq - 3));
    size_t space = body.find(' ');
    std::string_view op = body.substr(0, space);
    std::string_view rest = space == std::string_view::npos ? "" : trim(body.substr(space + 1));
    node.op = parse_op(op);
    switch (node.op) {
    case Op::Const:
      node.values = parse_values(rest, node.shape);
      break;
    case Op::Param:
      node.var = find_param(model, rest);
      break;
    case Op::State:
    case Op::Obs:
    case Op::Input:
    case Op::Latent: {
      auto [name, lag] = reference(indexing_kind(model, block.kind), rest);
      node.var = node.op == Op::State    ? find_var(model.states, name, "state")
                 : node.op == Op::Obs    ? find_var(model.obs, name, "observation")
                 : node.op == Op::Latent ? find_var(model.latents, name, "latent variable")
                                         : find_var(model.inputs, name, "input");
      node.lag = lag;
      break;
    }
    case Op::Data:
      node.var = find_var(model.data, rest, "data item");
      break;
    case Op::Time:
      if (!rest.empty())
        fail("'time' has no operand");
      break;
    case Op::Net: {
      size_t open = rest.find('(');
      if (open == std::string_view::npos || rest.back() != ')')
        fail("expected 'net NAME(%a, ...)'");
      const std::string_view name = rest.substr(0, open);
      for (size_t i = 0; i < model.nets.size(); ++i)
        if (model.nets[i].name == name)
          node.var = static_cast<int>(i);
      if (node.var < 0)
        fail(fmt::format("unknown network '{}'", name), name);
      node.args = operands(rest.substr(open + 1, rest.size() - open - 2), block);
      break;
    }
    case Op::Call: {
      size_t open = rest.find('(');
      if (open == std::string_view::npos || rest.back() != ')')
        fail("expected 'call fn(%a, ...)'");
      node.fn = std::string(rest.substr(0, open));
      node.args = operands(rest.substr(open + 1, rest.size() - open - 2), block);
      break;
    }
    case Op::Ode: { // "%y0, %rate at [t0, t_1, ...] steps [k_1, ...]"
      const size_t at = rest.find(" at ["), steps = rest.find("] steps [");
      if (at == std::string_view::npos || steps == std::string_view::npos || steps < at ||
          rest.back() != ']')
        fail("expected 'ode %y0, %rate at [t0, t1, ...] steps [k1, ...]'");
      node.args = operands(rest.substr(0, at), block);
      node.values = parse_list(rest.substr(at + 5, steps - at - 5));
      for (double k : parse_list(rest.substr(steps + 9, rest.size() - steps - 10)))
        node.index.push_back(static_cast<int>(k));
      break;
    }
    case Op::Index: {
      size_t open = rest.find('[');
      if (open == std::string_view::npos || rest.back() != ']')
        fail("expected 'index %a[i, ...]'");
      node.args = {operand(rest.substr(0, open), block)};
      std::string_view positions = rest.substr(open + 1, rest.size() - open - 2);
      while (!positions.empty()) {
        size_t comma = positions.find(',');
        node.index.push_back(parse_int(positions.substr(0, comma)));
        positions =
            comma == std::string_view::npos ? std::string_view() : positions.substr(comma + 1);
      }
      break;
    }
    default:
      node.args = operands(rest, block);
      break;
    }
    return node;
  }

  Op parse_op(std::string_view name) const {
    for (int i = 0; i <= static_cast<int>(kLastOp); ++i)
      if (op_name(static_cast<Op>(i)) == name)
        return static_cast<Op>(i);
    fail(fmt::format("unknown op '{}'", name), name);
  }

  // "NAME = sum_t %k" or "NAME = %k": a functional and its term.
  void read_functional(Model& model, Block& block, std::string_view line) const {
    size_t eq = line.find(" = ");
    if (eq == std::string_view::npos)
      fail(fmt::format("expected 'NAME = [sum_t] %N', not '{}'", line), line);
    std::string_view term = trim(line.substr(eq + 3));
    bool additive = starts_with(term, "sum_t ");
    block.outputs.push_back(operand(additive ? term.substr(6) : term, block));
    model.functionals.push_back({std::string(trim(line.substr(0, eq))), additive, {}});
  }

  // "target ~ dist(%a, %b)"
  Relation read_relation(const Model& model, const Block& block, std::string_view line) const {
    size_t tilde = line.find(" ~ ");
    if (tilde == std::string_view::npos || line.back() != ')')
      fail(fmt::format("expected a node or a relation 'target ~ dist(...)', not '{}'", line), line);
    std::string_view target = trim(line.substr(0, tilde));
    std::string_view call = trim(line.substr(tilde + 3));
    size_t open = call.find('(');
    if (open == std::string_view::npos)
      fail("expected 'dist(%a, ...)'");
    Relation rel;
    const DistInfo* dist = find_dist(call.substr(0, open));
    if (!dist)
      fail(fmt::format("unknown distribution '{}'", call.substr(0, open)), call.substr(0, open));
    rel.dist = dist->dist;
    rel.args = operands(call.substr(open + 1, call.size() - open - 2), block);
    if (block.kind == BlockKind::Prior) {
      rel.kind = VarKind::Param;
      rel.var = find_param(model, target);
    } else if (block.kind == BlockKind::Plate || block.kind == BlockKind::Simulator) {
      // Latents and observations share the block; their names are distinct.
      std::string name = reference(block.kind, target).first;
      bool latent = std::any_of(model.latents.begin(), model.latents.end(),
                                [&](const VarDecl& z) { return z.name == name; });
      rel.kind = latent ? VarKind::Latent : VarKind::Obs;
      rel.var = latent ? find_var(model.latents, name, "latent variable")
                       : find_var(model.obs, name, "observation");
    } else if (block.kind == BlockKind::Guide) {
      // Before plate-items the guide draws latents, after it the states they became; a
      // state-space model's guide draws its state.
      std::string name = reference(indexing_kind(model, block.kind), target).first;
      const bool plate = model.kind == ModelKind::Plate;
      rel.kind = plate ? VarKind::Latent : VarKind::State;
      rel.var = plate ? find_var(model.latents, name, "latent variable")
                      : find_var(model.states, name, "state");
    } else {
      auto [name, lag] = lagged(target);
      if (lag != 0)
        fail("a relation samples a variable at the current time");
      rel.kind = block.kind == BlockKind::Observation ? VarKind::Obs : VarKind::State;
      rel.var = rel.kind == VarKind::Obs ? find_var(model.obs, name, "observation")
                                         : find_var(model.states, name, "state");
    }
    return rel;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string_view raw_line_; // line_ before trimming, for the column of an error
  std::string_view line_;
  int line_number_ = 0;
};

} // namespace

Model read(std::string_view text) {
  return Reader(text).run();
}

} // namespace ssm::ir
