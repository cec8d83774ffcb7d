// The JSON metadata a compiled model carries (names, shapes, parameter layout, defaults, prior
// supports, the structure report): the runtime's whole view of the model besides the kernels.
#pragma once

#include "ir/ir.h"

#include <string>

namespace ssm::codegen {

// `structure` is the text of a JSON object: what the structure analyses found
// (passes/structure_report.h), embedded as the metadata's "structure". `runtime_dir`: the
// directory of the runtime the model is linked with, where `vi` finds the module it loads
// (runtime/vi/loader.h); empty: not recorded.
std::string model_metadata_json(const ir::Model& model, const std::string& structure,
                                const std::string& runtime_dir = "");

} // namespace ssm::codegen
