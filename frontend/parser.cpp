// The grammar of `.ssm` files in Boost.Spirit X3. Semantic actions build the AST (ast.h) with the
// byte range of every node. This is the only translation unit that includes X3, because it is slow
// to compile; syntax-error messages are worded in source.cpp.
#include "parser.h"

#include "frontend.h"
#include "source.h"

#include "core/number_text.h"

#include <boost/spirit/home/x3.hpp>

namespace ssm::frontend {

namespace x3 = boost::spirit::x3;

namespace {

using It = const char*;

struct ParseState {
  const char* base;
  std::string_view text;
  ast::Model* model;
};
struct state_tag;

template <class Ctx> ParseState& state(Ctx& ctx) {
  return *x3::get<state_tag>(ctx);
}

// Where the parser an action is attached to stopped. (X3's _where is the rest of the input, not
// the matched text, so start positions come from the `pos` parser or from a child node.)
template <class Ctx> std::size_t end_of(Ctx& ctx) {
  return static_cast<std::size_t>(x3::_where(ctx).begin() - state(ctx).base);
}

template <class Ctx> ast::Range range_of(Ctx& ctx, const boost::iterator_range<It>& r) {
  ParseState& st = state(ctx);
  return {static_cast<std::size_t>(r.begin() - st.base),
          static_cast<std::size_t>(r.end() - st.base)};
}

ast::ExprPtr node(ast::Expr::Kind kind, ast::Range range, std::vector<ast::ExprPtr> args = {}) {
  auto e = std::make_shared<ast::Expr>();
  e->kind = kind;
  e->range = range;
  e->args = std::move(args);
  return e;
}

template <class T> std::optional<T> to_std(const boost::optional<T>& v) {
  return v ? std::optional<T>(*v) : std::nullopt;
}

// ---- actions --------------------------------------------------------------------------------

auto const make_ident = [](auto& ctx) {
  auto r = x3::_attr(ctx);
  std::string name(r.begin(), r.end());
  if (is_keyword(name)) {
    x3::_pass(ctx) = false;
    return;
  }
  x3::_val(ctx) = ast::Ident{std::move(name), range_of(ctx, r)};
};

auto const make_number = [](auto& ctx) {
  auto r = x3::_attr(ctx);
  const ssm::NumberText number = ssm::read_number(std::string_view(&*r.begin(), r.size()));
  auto e = node(ast::Expr::Kind::Number, range_of(ctx, r));
  e->number = number.value.value_or(0);
  e->number_problem = number.problem; // reported where the number is lowered
  x3::_val(ctx) = e;
};

auto const make_name = [](auto& ctx) {
  const ast::Ident& id = x3::_attr(ctx);
  auto e = node(ast::Expr::Kind::Name, id.range);
  e->name = id.name;
  x3::_val(ctx) = e;
};

auto const make_call = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  const ast::Ident& id = boost::fusion::at_c<0>(attr);
  auto& args = boost::fusion::at_c<1>(attr);
  auto e = node(ast::Expr::Kind::Call, {id.range.begin, end_of(ctx)},
                args ? *args : std::vector<ast::ExprPtr>{});
  e->name = id.name;
  e->name_range = id.range;
  x3::_val(ctx) = e;
};

auto const make_paren = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::ExprPtr e = boost::fusion::at_c<1>(attr);
  e->range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  x3::_val(ctx) = e;
};

auto const make_list = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = node(ast::Expr::Kind::List, {boost::fusion::at_c<0>(attr), end_of(ctx)},
                       boost::fusion::at_c<1>(attr));
};

auto const set_pos = [](auto& ctx) {
  x3::_val(ctx) = static_cast<std::size_t>(x3::_attr(ctx).begin() - state(ctx).base);
};

auto const assign = [](auto& ctx) { x3::_val(ctx) = x3::_attr(ctx); };

auto const make_index = [](auto& ctx) {
  ast::ExprPtr base = x3::_val(ctx);
  std::vector<ast::ExprPtr> args = {base};
  for (const auto& a : x3::_attr(ctx))
    args.push_back(a);
  x3::_val(ctx) = node(ast::Expr::Kind::Index, {base->range.begin, end_of(ctx)}, args);
};

auto const make_pow = [](auto& ctx) {
  ast::ExprPtr lhs = x3::_val(ctx);
  ast::ExprPtr rhs = x3::_attr(ctx);
  auto e = node(ast::Expr::Kind::Binary, {lhs->range.begin, rhs->range.end}, {lhs, rhs});
  e->op = "^";
  x3::_val(ctx) = e;
};

std::string op_text(char c) {
  return std::string(1, c);
}
std::string op_text(const std::string& s) {
  return s;
}

auto const make_binary = [](auto& ctx) {
  ast::ExprPtr lhs = x3::_val(ctx);
  auto& attr = x3::_attr(ctx);
  ast::ExprPtr rhs = boost::fusion::at_c<1>(attr);
  auto e = node(ast::Expr::Kind::Binary, {lhs->range.begin, rhs->range.end}, {lhs, rhs});
  e->op = op_text(boost::fusion::at_c<0>(attr));
  x3::_val(ctx) = e;
};

template <ast::Expr::Kind K> struct make_prefix {
  template <class Ctx> void operator()(Ctx& ctx) const {
    auto& attr = x3::_attr(ctx);
    x3::_val(ctx) =
        node(K, {boost::fusion::at_c<0>(attr), end_of(ctx)}, {boost::fusion::at_c<1>(attr)});
  }
};

// c ? a : b
auto const make_ternary = [](auto& ctx) {
  ast::ExprPtr cond = x3::_val(ctx);
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = node(ast::Expr::Kind::Cond, {cond->range.begin, end_of(ctx)},
                       {cond, boost::fusion::at_c<0>(attr), boost::fusion::at_c<1>(attr)});
};

// if (c) a else b
auto const make_if = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = node(
      ast::Expr::Kind::Cond, {boost::fusion::at_c<0>(attr), end_of(ctx)},
      {boost::fusion::at_c<1>(attr), boost::fusion::at_c<2>(attr), boost::fusion::at_c<3>(attr)});
};

template <ast::TypeSpec::Kind K> struct make_type {
  template <class Ctx> void operator()(Ctx& ctx) const {
    ast::TypeSpec t;
    t.kind = K;
    auto& attr = x3::_attr(ctx);
    t.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
    if constexpr (K == ast::TypeSpec::Kind::Real || K == ast::TypeSpec::Kind::Int) {
      if (auto& b = boost::fusion::at_c<1>(attr))
        t.bounds = *b;
    } else if constexpr (K == ast::TypeSpec::Kind::Matrix) {
      t.dims = {boost::fusion::at_c<1>(attr), boost::fusion::at_c<2>(attr)};
    } else {
      t.dims = {boost::fusion::at_c<1>(attr)};
    }
    x3::_val(ctx) = std::move(t);
  }
};

// The arguments as written: positional ones (without a name) until the first named one, whose
// list keeps what follows it for resolve_named_arguments to check.
auto const make_dist = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  auto& written = boost::fusion::at_c<1>(attr);
  const ast::Ident& id = boost::fusion::at_c<0>(attr);
  ast::DistCall call{id, {}, {}, {id.range.begin, end_of(ctx)}};
  if (written)
    for (ast::NamedArg& a : *written) {
      if (a.name.name.empty() && call.named.empty())
        call.args.push_back(std::move(a.value));
      else
        call.named.push_back(std::move(a));
    }
  x3::_val(ctx) = std::move(call);
};
auto const make_named_arg = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = ast::NamedArg{boost::fusion::at_c<0>(attr), boost::fusion::at_c<1>(attr)};
};
auto const make_positional_arg = [](auto& ctx) {
  x3::_val(ctx) = ast::NamedArg{{}, x3::_attr(ctx)};
};

auto const push_const = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  state(ctx).model->consts.push_back({boost::fusion::at_c<1>(attr),
                                      boost::fusion::at_c<2>(attr),
                                      {boost::fusion::at_c<0>(attr), end_of(ctx)}});
};

auto const push_param = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::VarDecl d;
  d.kind = ast::VarDecl::Kind::Param;
  d.name = boost::fusion::at_c<1>(attr);
  d.type = to_std(boost::fusion::at_c<2>(attr));
  d.prior = to_std(boost::fusion::at_c<3>(attr));
  if (auto& v = boost::fusion::at_c<4>(attr))
    d.default_value = *v;
  d.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->vars.push_back(std::move(d));
};

template <ast::VarDecl::Kind K> struct push_var {
  template <class Ctx> void operator()(Ctx& ctx) const {
    auto& attr = x3::_attr(ctx);
    ast::VarDecl d;
    d.kind = K;
    d.name = boost::fusion::at_c<1>(attr);
    d.type = boost::fusion::at_c<2>(attr);
    d.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
    state(ctx).model->vars.push_back(std::move(d));
  }
};

// `input NAME [n] : TYPE;`, `latent NAME [n] : TYPE ~ DIST;` and `obs NAME [n] : TYPE (~ DIST |
// = EXPR);`: which parts a model or a simulator allows is checked in lower.cpp, where the
// messages can say why.
auto const push_input = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::VarDecl d;
  d.kind = ast::VarDecl::Kind::Input;
  d.name = boost::fusion::at_c<1>(attr);
  d.plate = to_std(boost::fusion::at_c<2>(attr));
  d.type = to_std(boost::fusion::at_c<3>(attr));
  d.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->vars.push_back(std::move(d));
};

auto const push_latent = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::VarDecl d;
  d.kind = ast::VarDecl::Kind::Latent;
  d.name = boost::fusion::at_c<1>(attr);
  d.plate = to_std(boost::fusion::at_c<2>(attr));
  d.type = to_std(boost::fusion::at_c<3>(attr));
  d.prior = boost::fusion::at_c<4>(attr);
  d.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->vars.push_back(std::move(d));
};

auto const push_obs = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::VarDecl d;
  d.kind = ast::VarDecl::Kind::Obs;
  d.name = boost::fusion::at_c<1>(attr);
  d.plate = to_std(boost::fusion::at_c<2>(attr));
  d.type = to_std(boost::fusion::at_c<3>(attr));
  d.prior = to_std(boost::fusion::at_c<4>(attr));
  if (auto& v = boost::fusion::at_c<5>(attr))
    d.default_value = *v;
  d.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->vars.push_back(std::move(d));
};

auto const make_let = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = ast::LetDecl{boost::fusion::at_c<1>(attr),
                               boost::fusion::at_c<2>(attr),
                               {boost::fusion::at_c<0>(attr), end_of(ctx)}};
};

auto const push_let = [](auto& ctx) { state(ctx).model->lets.push_back(x3::_attr(ctx)); };

auto const make_fn_param = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx) = ast::FnParam{boost::fusion::at_c<0>(attr), boost::fusion::at_c<1>(attr)};
};

auto const fn_expr_body = [](auto& ctx) { x3::_val(ctx).body = x3::_attr(ctx); };
auto const fn_block_body = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  x3::_val(ctx).lets = boost::fusion::at_c<0>(attr);
  x3::_val(ctx).body = boost::fusion::at_c<1>(attr);
};

auto const push_fn = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::FnDecl f = boost::fusion::at_c<4>(attr);
  f.name = boost::fusion::at_c<1>(attr);
  if (auto& params = boost::fusion::at_c<2>(attr))
    f.params = *params;
  f.result = boost::fusion::at_c<3>(attr);
  f.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->fns.push_back(std::move(f));
};

auto const push_net = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::NetDecl n;
  n.name = boost::fusion::at_c<1>(attr);
  n.kind = boost::fusion::at_c<2>(attr);
  if (auto& options = boost::fusion::at_c<3>(attr))
    n.options = *options;
  n.range = {boost::fusion::at_c<0>(attr), end_of(ctx)};
  state(ctx).model->nets.push_back(std::move(n));
};
auto const push_functional = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  state(ctx).model->functionals.push_back({boost::fusion::at_c<1>(attr),
                                           boost::fusion::at_c<2>(attr),
                                           boost::fusion::at_c<3>(attr),
                                           {boost::fusion::at_c<0>(attr), end_of(ctx)}});
};

auto const push_relation = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  const ast::ExprPtr& target = boost::fusion::at_c<0>(attr);
  state(ctx).model->relations.push_back(
      {target, boost::fusion::at_c<1>(attr), {target->range.begin, end_of(ctx)}, {}, nullptr});
};

// `x[t] = value;`: a deterministic state.
auto const push_deterministic = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  const ast::ExprPtr& target = boost::fusion::at_c<0>(attr);
  ast::Relation r;
  r.target = target;
  r.range = {target->range.begin, end_of(ctx)};
  r.value = boost::fusion::at_c<1>(attr);
  state(ctx).model->relations.push_back(std::move(r));
};

template <ast::Relation::Role R> struct push_role_relation {
  template <class Ctx> void operator()(Ctx& ctx) const {
    auto& attr = x3::_attr(ctx);
    state(ctx).model->relations.push_back({boost::fusion::at_c<1>(attr),
                                           boost::fusion::at_c<2>(attr),
                                           {boost::fusion::at_c<0>(attr), end_of(ctx)},
                                           R,
                                           nullptr});
  }
};

// `a` or `a:b` inside an index bracket.
auto const make_index_item = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  ast::ExprPtr first = boost::fusion::at_c<0>(attr);
  if (auto& last = boost::fusion::at_c<1>(attr))
    x3::_val(ctx) =
        node(ast::Expr::Kind::Slice, {first->range.begin, (*last)->range.end}, {first, *last});
  else
    x3::_val(ctx) = first;
};

auto const push_lookahead = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  state(ctx).model->lookaheads.push_back({boost::fusion::at_c<1>(attr),
                                          boost::fusion::at_c<2>(attr),
                                          {boost::fusion::at_c<0>(attr), end_of(ctx)}});
};

auto const set_model_name = [](auto& ctx) { state(ctx).model->name = x3::_attr(ctx); };
auto const set_simulator_name = [](auto& ctx) {
  state(ctx).model->name = x3::_attr(ctx);
  state(ctx).model->is_simulator = true;
};
auto const set_module_name = [](auto& ctx) {
  state(ctx).model->name = x3::_attr(ctx);
  state(ctx).model->is_module = true;
};

auto const push_import = [](auto& ctx) {
  auto& attr = x3::_attr(ctx);
  const auto& text = boost::fusion::at_c<1>(attr);
  state(ctx).model->imports.push_back(
      {std::string(text.begin() + 1, text.end() - 1), {boost::fusion::at_c<0>(attr), end_of(ctx)}});
};

// ---- grammar --------------------------------------------------------------------------------

// Character sets rather than x3::space/x3::digit: those classify with <cctype>, which is undefined
// for the negative chars of UTF-8 text (and asserts in Spirit's debug builds).
auto const ident_char = x3::char_("a-zA-Z0-9_");
auto const digit = x3::char_("0-9");
auto const space = x3::char_(" \t\n\r\f\v");
auto kw(char const* word) {
  return x3::lexeme[x3::lit(word) >> !ident_char];
}

auto const skipper = space | x3::lit("//") >> *(x3::char_ - x3::eol) |
                     x3::lit("/*") >> *(x3::char_ - x3::lit("*/")) >> x3::lit("*/");

x3::rule<class pos_r, std::size_t> const pos = "position";
x3::rule<class ident_r, ast::Ident> const ident = "identifier";
x3::rule<class number_r, ast::ExprPtr> const number = "number";
x3::rule<class primary_r, ast::ExprPtr> const primary = "expression";
x3::rule<class postfix_r, ast::ExprPtr> const postfix = "expression";
x3::rule<class power_r, ast::ExprPtr> const power = "expression";
x3::rule<class unary_r, ast::ExprPtr> const unary = "expression";
x3::rule<class product_r, ast::ExprPtr> const product = "expression";
x3::rule<class sum_r, ast::ExprPtr> const sum = "expression";
x3::rule<class comparison_r, ast::ExprPtr> const comparison = "expression";
x3::rule<class conjunction_r, ast::ExprPtr> const conjunction = "expression";
x3::rule<class disjunction_r, ast::ExprPtr> const disjunction = "expression";
x3::rule<class expr_r, ast::ExprPtr> const expr = "expression";
x3::rule<class comparison_op_r, std::string> const comparison_op = "operator";
x3::rule<class and_op_r, std::string> const and_op = "operator";
x3::rule<class or_op_r, std::string> const or_op = "operator";
x3::rule<class expr_list_r, std::vector<ast::ExprPtr>> const expr_list = "expression";
x3::rule<class index_item_r, ast::ExprPtr> const index_item = "expression";
x3::rule<class index_list_r, std::vector<ast::ExprPtr>> const index_list = "expression";
x3::rule<class type_r, ast::TypeSpec> const type = "type";
x3::rule<class bounds_r, std::vector<ast::ExprPtr>> const bounds = "bounds";
x3::rule<class int_range_r, std::vector<ast::ExprPtr>> const int_range = "bounds";
x3::rule<class dist_r, ast::DistCall> const dist = "distribution";
x3::rule<class dist_arg_r, ast::NamedArg> const dist_arg = "expression";
x3::rule<class dist_args_r, std::vector<ast::NamedArg>> const dist_args = "expression";
x3::rule<class target_r, ast::ExprPtr> const target = "relation";
x3::rule<class let_r, ast::LetDecl> const let = "let";
x3::rule<class fn_param_r, ast::FnParam> const fn_param = "parameter";
x3::rule<class fn_params_r, std::vector<ast::FnParam>> const fn_params = "parameters";
x3::rule<class fn_body_r, ast::FnDecl> const fn_body = "function body";
x3::rule<class net_option_r, ast::NamedArg> const net_option = "network option";
x3::rule<class net_options_r, std::vector<ast::NamedArg>> const net_options = "network options";
x3::rule<class statement_r> const statement = "statement";
x3::rule<class end_of_model_r> const end_of_model = "end of model";
x3::rule<class model_r> const model = "model";
x3::rule<class kw_model_r> const kw_model = "'model'";
x3::rule<class string_r, boost::iterator_range<It>> const string_literal = "string";
// Keywords that an expectation (>) requires, named as their messages quote them.
x3::rule<class else_r> const else_kw = "'else'";
x3::rule<class return_r> const return_kw = "'return'";

auto const else_kw_def = kw("else");
auto const return_kw_def = kw("return");

// The offset of the next token: a start position for actions.
auto const pos_def = x3::raw[x3::eps][set_pos];

auto const ident_def = x3::raw[x3::lexeme[x3::char_("a-zA-Z_") >> *ident_char]][make_ident];

// A fraction needs a dot not followed by another: `0..1` is a range, not `0.` then `.1`.
auto const fraction_dot = x3::lit('.') >> !x3::lit('.');
auto const number_def =
    x3::raw[x3::lexeme[(+digit >> -(fraction_dot >> *digit) | fraction_dot >> +digit) >>
                       -(x3::char_("eE") >> -x3::char_("-+") >> +digit) >>
                       !(ident_char | fraction_dot)]][make_number];

auto const bracket = x3::lit('[') > expr_list > ']';

auto const primary_def = number[assign] |
                         (pos >> kw("if") > '(' > expr > ')' > expr > else_kw > expr)[make_if] |
                         (ident >> '(' >> -expr_list > ')')[make_call] | ident[make_name] |
                         (pos >> '(' > expr > ')')[make_paren] | (pos >> bracket)[make_list];

auto const postfix_def = primary[assign] >> *(x3::lit('[') > index_list > ']')[make_index];
auto const power_def = postfix[assign] >> -(x3::lit('^') > unary)[make_pow];
auto const unary_def = (pos >> '-' > unary)[make_prefix<ast::Expr::Kind::Neg>{}] |
                       (pos >> '!' > unary)[make_prefix<ast::Expr::Kind::Not>{}] | power[assign];
auto const product_def = unary[assign] >> *(x3::char_("*/%") > unary)[make_binary];
auto const sum_def = product[assign] >> *(x3::char_("-+") > product)[make_binary];
auto const comparison_op_def = x3::string("<=") | x3::string(">=") | x3::string("==") |
                               x3::string("!=") | x3::string("<") | x3::string(">");
auto const and_op_def = x3::string("&&");
auto const or_op_def = x3::string("||");
auto const comparison_def = sum[assign] >> -(comparison_op > sum)[make_binary];
auto const conjunction_def = comparison[assign] >> *(and_op > comparison)[make_binary];
auto const disjunction_def = conjunction[assign] >> *(or_op > conjunction)[make_binary];
auto const expr_def = disjunction[assign] >> -('?' > expr > ':' > expr)[make_ternary];
auto const expr_list_def = expr >> *(',' > expr);
auto const index_item_def = (expr >> -(':' > expr))[make_index_item];
auto const index_list_def = index_item >> *(',' > index_item);

auto const bounds_def = '(' > expr > ',' > expr > ')';
auto const int_range_def = '[' > expr > ".." > expr > ']';
auto const type_def =
    (pos >> kw("real") >> -bounds)[make_type<ast::TypeSpec::Kind::Real>{}] |
    (pos >> kw("int") >> -int_range)[make_type<ast::TypeSpec::Kind::Int>{}] |
    (pos >> kw("vector") > '[' > expr > ']')[make_type<ast::TypeSpec::Kind::Vector>{}] |
    (pos >> kw("matrix") > '[' > expr > ',' > expr >
     ']')[make_type<ast::TypeSpec::Kind::Matrix>{}] |
    (pos >> kw("cov_matrix") > '[' > expr > ']')[make_type<ast::TypeSpec::Kind::CovMatrix>{}] |
    (pos >> kw("simplex") > '[' > expr > ']')[make_type<ast::TypeSpec::Kind::Simplex>{}] |
    (pos >> kw("sequence") > '[' > expr > ']')[make_type<ast::TypeSpec::Kind::Sequence>{}];

// `name = value` (not `name == value`, an expression) or a value.
auto const dist_arg_def =
    (ident >> (x3::lit('=') >> !x3::lit('=')) > expr)[make_named_arg] | expr[make_positional_arg];
auto const dist_args_def = dist_arg >> *(',' > dist_arg);
auto const dist_def = (ident > '(' > -dist_args > ')')[make_dist];

auto const target_def = ident[make_name] >> *bracket[make_index];

auto const plate_index = '[' > ident > ']';

auto const let_def = (pos >> kw("let") > ident > '=' > expr > ';')[make_let];
auto const fn_param_def = (ident > ':' > type)[make_fn_param];
// After a comma, a parameter must follow: 'f(x : real, )' is reported at the ')'.
auto const fn_params_def = fn_param >> *(',' > fn_param);
auto const net_option_def = (ident > '=' > expr)[make_named_arg];
auto const net_options_def = net_option >> *(',' > net_option);
auto const fn_body_def =
    ('=' > expr > ';')[fn_expr_body] | ('{' > *let > return_kw > expr > ';' > '}')[fn_block_body];

auto const string_literal_def = x3::raw[x3::lexeme['"' > *(x3::char_ - x3::char_("\"\n")) > '"']];

using Role = ast::Relation::Role;
auto const statement_def =
    (pos >> kw("import") > string_literal > ';')[push_import] |
    (pos >> kw("const") > ident > '=' > expr > ';')[push_const] | let[push_let] |
    (pos >> kw("fn") > ident > '(' > -fn_params > ')' > "->" > type > fn_body)[push_fn] |
    (pos >> kw("net") > ident > ':' > ident > '(' > -net_options > ')' > ';')[push_net] |
    (pos >> kw("functional") > ident > '=' > x3::matches[kw("sum_t")] > expr >
     ';')[push_functional] |
    (pos >> kw("data") > ident > ':' > type > ';')[push_var<ast::VarDecl::Kind::Data>{}] |
    (pos >> kw("input") > ident > -plate_index > -(':' > type) > ';')[push_input] |
    (pos >> kw("param") > ident > -(':' > type) > -('~' > dist) > -('=' > expr) > ';')[push_param] |
    (pos >> kw("state") > ident > ':' > type > ';')[push_var<ast::VarDecl::Kind::State>{}] |
    (pos >> kw("obs") > ident > -plate_index > -(':' > type) > -('~' > dist) > -('=' > expr) >
     ';')[push_obs] |
    (pos >> kw("latent") > ident > -plate_index > -(':' > type) > '~' > dist > ';')[push_latent] |
    (pos >> kw("proposal") > target > '~' > dist > ';')[push_role_relation<Role::Proposal>{}] |
    (pos >> kw("guide") > target > '~' > dist > ';')[push_role_relation<Role::Guide>{}] |
    (pos >> kw("lookahead") > target > '=' > expr > ';')[push_lookahead] |
    (target >> '=' > expr > ';')[push_deterministic] | (target > '~' > dist > ';')[push_relation];

auto const end_of_model_def = x3::lit('}');

auto const kw_model_def = (kw("module") > ident[set_module_name]) |
                          (kw("model") > ident[set_model_name]) |
                          (kw("simulator") > ident[set_simulator_name]);
auto const model_def = x3::eps > kw_model > '{' > *statement > end_of_model > x3::eoi;

BOOST_SPIRIT_DEFINE(pos, ident, number, primary, postfix, power, unary, product, sum, comparison,
                    conjunction, disjunction, expr, comparison_op, and_op, or_op, expr_list, type,
                    bounds, int_range, dist, dist_arg, dist_args, target, let, fn_param, fn_body,
                    string_literal, statement, end_of_model, kw_model, model, else_kw, return_kw,
                    fn_params, net_option, net_options, index_item, index_list)

} // namespace

std::optional<ast::Model> parse(std::string_view text, std::size_t begin, DiagnosticEngine& diags) {
  if (!check_comments(text, begin, diags) || !check_nesting(text, begin, diags))
    return std::nullopt;
  ast::Model result;
  ParseState st{text.data(), text, &result};
  It first = text.data() + begin;
  It last = text.data() + text.size();
  try {
    if (!x3::phrase_parse(first, last, x3::with<state_tag>(&st)[model], skipper)) {
      report_syntax_error(text, begin, first - text.data(), "model", diags);
      return std::nullopt;
    }
  } catch (const x3::expectation_failure<It>& e) {
    report_syntax_error(text, begin, e.where() - text.data(), e.which(), diags);
    return std::nullopt;
  }
  return result;
}

} // namespace ssm::frontend
