// The distribution table's accessors: see dists.h (the rows are there, next to the enumerators).
#include "dists.h"

namespace ssm::ir {

const std::vector<DistInfo>& all_dists() {
  static const std::vector<DistInfo> table = dists_detail::make_table();
  return table;
}

const DistInfo& dist_info(Dist d) {
  return all_dists().at(static_cast<size_t>(d));
}

std::string relation_summary(const std::string& target, Dist d) {
  return d == Dist::Dirac ? target + " (deterministic)"
                          : target + " ~ " + std::string(dist_info(d).name);
}

const DistInfo* find_dist(std::string_view name) {
  for (const DistInfo& info : all_dists())
    if (info.name == name)
      return &info;
  return nullptr;
}

} // namespace ssm::ir
