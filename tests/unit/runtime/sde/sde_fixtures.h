// What the sde room's unit tests share: a model table whose only kernel is a hand-written
// diffusion_terms, and the description of a scalar SDE state x whose transition is that SDE.
#pragma once

#include "core/metadata.h"
#include "kernel/abi.h"

namespace sde_fixtures {

inline ssm_model model_with(ssm_functional_terms_fn terms) {
  ssm_model m{};
  m.abi_version = SSM_ABI_VERSION;
  m.diffusion_terms = terms;
  return m;
}

// The terms have no gradient rows unless `gradient_rows` (2 per theta component).
inline ssm::ModelInfo sde_info(int gradient_rows = 0) {
  ssm::ModelInfo info;
  info.name = "sde";
  info.n_state = 1;
  ssm::VarInfo x;
  x.name = "x";
  x.offset = 0;
  info.state.push_back(x);
  ssm::ModelInfo::Sde sde;
  sde.state = 0;
  sde.dim = 1;
  sde.steps = 20;
  sde.coefficient_size = 1;
  sde.coefficient_constant = true;
  sde.relation = "x[t]";
  if (gradient_rows > 0) {
    sde.gradient_reason.clear();
    sde.gradient_rows = gradient_rows;
  }
  info.sde = sde;
  return info;
}

} // namespace sde_fixtures
