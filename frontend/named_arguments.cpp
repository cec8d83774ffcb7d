// resolve_named_arguments: see named_arguments.h.
#include "named_arguments.h"

#include "messages.h"

#include "ir/dists.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ssm::frontend {

namespace {

class Resolver {
public:
  explicit Resolver(DiagnosticEngine& diags) : diags_(diags) {}

  void resolve(ast::DistCall& call) {
    if (call.named.empty())
      return;
    const ir::DistInfo* info = ir::find_dist(call.name.name);
    if (!info || info->internal) { // lowering reports the unknown name, or a density network's
      keep_as_written(call);       // named arguments: their names stay, their values are args
      return;
    }
    const std::vector<std::string_view> names(info->arg_names.begin() + info->implicit_args,
                                              info->arg_names.end());
    if (call.args.size() >= names.size()) // too many: lowering reports the count
      return keep_as_written(call);
    const std::string signature = fmt::format("{}({})", info->name, fmt::join(names, ", "));
    std::vector<ast::ExprPtr> placed(names.size());
    std::copy(call.args.begin(), call.args.end(), placed.begin());
    bool ok = true;
    for (ast::NamedArg& a : call.named) {
      if (a.name.name.empty()) {
        error(a.value->range, fmt::format(msg::positional_after_named, info->name));
        ok = false;
        continue;
      }
      const auto it = std::find(names.begin(), names.end(), a.name.name);
      if (it == names.end()) {
        std::string message = fmt::format(msg::unknown_argument, signature, a.name.name);
        if (auto guess = closest_name(a.name.name, {names.begin(), names.end()}))
          message += fmt::format(msg::did_you_mean, *guess);
        error(a.name.range, message);
        ok = false;
        continue;
      }
      ast::ExprPtr& slot = placed[it - names.begin()];
      if (slot) {
        error(a.name.range, fmt::format(msg::argument_twice, a.name.name, signature,
                                        static_cast<size_t>(it - names.begin()) < call.args.size()
                                            ? " (by position, then by name)"
                                            : ""));
        ok = false;
        continue;
      }
      slot = a.value;
    }
    const size_t required = names.size() - info->defaults.size();
    for (size_t k = 0; ok && k < required; ++k)
      if (!placed[k]) {
        error(call.range, fmt::format(msg::argument_missing, signature, names[k]));
        ok = false;
      }
    if (ok) {
      while (!placed.empty() && !placed.back())
        placed.pop_back();
      for (size_t k = required; k < placed.size(); ++k)
        if (!placed[k]) // left out before one that is given: its default, as if written
          placed[k] = default_value(info->defaults[k - required], call.range);
      call.args = std::move(placed);
      call.named.clear();
    } else { // every value as written, to be checked as expressions
      call.unresolved = true;
      keep_as_written(call);
    }
  }

private:
  // The named values after the positional ones, in the order written, without their names.
  static void keep_as_written(ast::DistCall& call) {
    for (ast::NamedArg& a : call.named)
      call.args.push_back(std::move(a.value));
    std::erase_if(call.named, [](const ast::NamedArg& a) { return a.name.name.empty(); });
  }

  static ast::ExprPtr default_value(double value, ast::Range range) {
    auto e = std::make_shared<ast::Expr>();
    e->kind = ast::Expr::Kind::Number;
    e->number = value;
    e->range = range;
    return e;
  }

  void error(ast::Range r, std::string message) {
    diags_.error(diags_.loc(r.begin, r.end), std::move(message));
  }

  DiagnosticEngine& diags_;
};

} // namespace

void resolve_named_arguments(ast::Model& model, DiagnosticEngine& diags) {
  std::vector<ast::DistCall*> calls;
  for (ast::Relation& r : model.relations)
    if (!r.deterministic())
      calls.push_back(&r.dist);
  for (ast::VarDecl& v : model.vars)
    if (v.prior)
      calls.push_back(&*v.prior);
  std::sort(calls.begin(), calls.end(), // diagnostics in the order of the text
            [](const ast::DistCall* a, const ast::DistCall* b) {
              return a->range.begin < b->range.begin;
            });
  Resolver resolver(diags);
  for (ast::DistCall* call : calls)
    resolver.resolve(*call);
}

} // namespace ssm::frontend
