// Fitting the backward guide of a state-space model by its ELBO (the LibTorch side of
// `smooth --method variational`; the module's entry point calls it).
#pragma once

#include "vsmooth/variational_smoother.h"

namespace ssm::vsmooth {

// Fits the guide (or starts from --load-guide's) on every series of the data (online: on one),
// with --learn-params the model's parameters too, and reports
// it: the guide's smoothing marginals, the functionals and the ELBO by trajectories drawn from
// it, and for a linear-Gaussian model the ELBO in closed form and the exact log-likelihood; or,
// online without --marginals, the recursion's own estimates. A non-finite ELBO stops training
// with `failure` set and the last finite guide kept. Throws ssm::Error for a guide file that does
// not fit the model.
VariationalSmoothFit fit_variational_smoother(const MethodRun& run,
                                              const VariationalSmoothOptions& options);

} // namespace ssm::vsmooth
