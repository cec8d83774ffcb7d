// Utilities for passes that replace nodes: redirect uses, then drop what nothing reads.
#pragma once

#include "ir.h"

#include <vector>

namespace ssm::ir {

// Makes every use of node i a use of replacement[i] (replacement[i] <= i), then removes the nodes
// that no relation or output reaches and renumbers the rest, keeping SSA order.
void replace_and_compact(Block& block, const std::vector<int>& replacement);

// Removes unreachable nodes only.
void compact(Block& block);

} // namespace ssm::ir
