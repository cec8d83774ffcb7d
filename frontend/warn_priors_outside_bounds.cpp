// The warning for a prior whose support reaches outside the parameter's declared bounds
// (model_warnings.h).
#include "model_warnings.h"

#include "messages.h"

#include "frontend.h"

#include <fmt/format.h>

#include <cmath>

namespace ssm::frontend {

void warn_priors_outside_bounds(const ir::Model& model, DiagnosticEngine& diags) {
  for (const ir::Relation& rel : model.prior.relations) {
    const ir::ParamDecl& p = model.params[rel.var];
    if (p.lower == -INFINITY && p.upper == INFINITY)
      continue;
    const ir::DistInfo& info = ir::dist_info(rel.dist);
    double lo = info.lower, hi = info.upper;
    if (info.support_from >= 0) {
      const ir::Node& a = model.prior.nodes[rel.args[info.support_from]];
      const ir::Node& b = model.prior.nodes[rel.args[info.support_from + 1]];
      if (a.shape.is_scalar() && b.shape.is_scalar())
        lo = a.values[0], hi = b.values[0];
    }
    if (lo < p.lower || hi > p.upper)
      diags.warning(rel.loc, fmt::format(msg::prior_outside_bounds, info.name, p.name, lo, hi,
                                         p.lower, p.upper));
  }
}

} // namespace ssm::frontend
