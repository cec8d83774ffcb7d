// Textual form of the IR, for `ssmc build --emit=ir`, `--print-after` and golden tests.
#pragma once

#include "IR.h"

#include <string>

namespace ssm::ir {

std::string print(const Model& model);
std::string print(const Model& model, const Block& block);
std::string print_relation_target(const Model& model, const Block& block, const Relation& rel);

} // namespace ssm::ir
