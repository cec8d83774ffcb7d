// Warnings that are facts about a model's structure, computed over its IR once the lowering has
// built it without errors (as stanc3's pedantic mode does): one function per file. The warning
// for unused declarations is not here: constants, lets and functions leave no trace in the IR
// once inlined, so it is raised by the lowering from its symbol table (lower_names.cpp).
#pragma once

#include "ir/ir.h"

#include <vector>

namespace ssm::frontend {

class DiagnosticEngine;

// A state that no observation depends on, directly or through the states it drives.
void warn_states_without_influence(const ir::Model& model, DiagnosticEngine& diags);

// A latent variable of a plate model or simulator that no observation depends on, directly or
// through other latent variables.
void warn_latents_without_influence(const ir::Model& model, DiagnosticEngine& diags);

// A prior whose support reaches outside the parameter's declared bounds real(lo, hi).
void warn_priors_outside_bounds(const ir::Model& model, DiagnosticEngine& diags);

// Which of n variables an observation depends on: the variables (nodes `read`: Op::State or
// Op::Latent) that the relations of `observations` read, then, to a fixed point, those read by
// the relations of `drivers` that draw a variable already found.
std::vector<bool> reaching_observations(std::size_t n, ir::Op read,
                                        const std::vector<const ir::Block*>& blocks,
                                        ir::VarKind observations, ir::VarKind drivers);

} // namespace ssm::frontend
