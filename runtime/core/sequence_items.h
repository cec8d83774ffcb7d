// Items that are sequences: a plate model whose observation is a `sequence[V]` reads its data in
// long format, one token per row, the rows of each item named by a `series` column (as the
// series of a time-series model are). gather_sequence_items makes one item of each series: the
// sequences' tokens (ObsData::sequences) and, for the item's other columns, the value they
// share on every row of it.
#pragma once

#include "core/csv.h"
#include "core/metadata.h"

namespace ssm {

// Whether the model has an observation that is a sequence.
bool has_sequences(const ModelInfo& info);

// `rows` as read from the file (one token per row) gathered into items, one per series; a model
// without sequences gets `rows` back. A sequence's slot in y holds its length. Throws ssm::Error
// naming the file and line for data without a `series` column, a missing token, or another
// column whose value changes within an item.
ObsData gather_sequence_items(const ModelInfo& info, const ObsData& rows);

} // namespace ssm
