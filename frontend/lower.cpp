// Checks a parsed model and lowers it to the IR: see lower.h.
//
// The work is done in passes over the AST, each of which keeps going after an error so that one
// run reports every independent problem: (1) declare every name, (2) evaluate the constants in
// source order, (3) the shapes, priors and defaults of parameters, states and observations, (4)
// the relations, (5) what is missing (relations, state dependence) and the sampling order of the
// relations within each block, (6) once there is no error, the warnings: unused declarations from
// the symbol table, the others over the IR (model_warnings.h). A declaration with an error is
// marked invalid, and uses of it report nothing more, so one mistake gives one message.
//
// The work is split by concern between files that define the member functions of one class,
// Lowering (lowering.h, which says why); this file holds the driver, run().
#include "lowering.h"
#include "model_warnings.h"
#include "named_arguments.h"

namespace ssm::frontend {

namespace lowering {

std::optional<ir::Model> Lowering::run(int errors_before) {
  model_.kind = model_kind();
  declare_names();
  check_declaration_forms();
  for (const ast::ConstDecl& c : ast_.consts)
    define_const(c);
  for (const ast::NetDecl& n : ast_.nets) // before the priors, which may name one (an error)
    define_net(n);
  for (const ast::VarDecl& v : ast_.vars)
    define_var(v);
  for (const ast::FnDecl& f : ast_.fns)
    define_fn(f);
  for (const ast::Relation& r : ast_.relations)
    r.guide() ? add_guide(r) : add_relation(r);
  if (!model_.is_state_space())
    for (const ast::VarDecl* v : static_relation_order())
      add_static_relation(*v);
  for (const ast::FunctionalDecl& f : ast_.functionals)
    add_functional(f);
  add_lookaheads();
  check_completeness();
  if (diags_.error_count() > errors_before)
    return std::nullopt;
  order_relations(ir::BlockKind::Initial);
  order_relations(ir::BlockKind::Transition);
  order_relations(ir::BlockKind::Observation);
  complete_proposal();
  order_relations(ir::BlockKind::Proposal);
  if (!model_.is_state_space()) {
    // Latents cannot read observations, so they all come first.
    ir::BlockKind own = static_block();
    order_relations(pending_latents_, model_.block(own));
    order_relations(own);
  }
  if (diags_.error_count() > errors_before)
    return std::nullopt;
  warn_unused();
  warn_states_without_influence(model_, diags_);
  warn_latents_without_influence(model_, diags_);
  warn_priors_outside_bounds(model_, diags_);
  if (diags_.error_count() > errors_before) // -Werror
    return std::nullopt;
  return std::move(model_);
}

} // namespace lowering

std::optional<ir::Model> lower(ast::Model& model, const std::string& filename,
                               DiagnosticEngine& diags, const FileGraph& files) {
  const int errors_before = diags.error_count();
  resolve_named_arguments(model, diags); // its errors, as the lowering's, stop before warnings
  return lowering::Lowering(model, filename, diags, files).run(errors_before);
}

} // namespace ssm::frontend
