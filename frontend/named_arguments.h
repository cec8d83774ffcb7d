// Named arguments of distribution calls, `normal(mu = 0, sigma = 1)`: put in their places before
// lowering, so that everything after the parser sees positional arguments only.
#pragma once

#include "ast.h"
#include "frontend.h"

namespace ssm::frontend {

// Every distribution call of the model (relations, priors, declared latents and observations)
// with its named arguments placed by the distribution's argument names (ir/dists.h): an unknown
// name, a name given twice, a positional argument after a named one and a missing argument are
// errors, after which the call is marked unresolved (lowering reports nothing more about it).
void resolve_named_arguments(ast::Model& model, DiagnosticEngine& diags);

} // namespace ssm::frontend
