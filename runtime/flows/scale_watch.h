// A watch, during training, for a Discretely Indexed Flow's component collapsing onto a point:
// the likelihood of a DIF, as of a mixture, is unbounded when a component shrinks onto one data
// point. On standardised data (`ssmc density fit`) a component has collapsed when a scale of its
// location-scale map falls below 1e-3; in a guide, whose units are the posterior's, when it falls
// below 1e-3 of the widest component's scale in that coordinate (a posterior narrow everywhere
// shrinks every component alike). Whoever trains a density checks after its steps and warns
// once per component, naming the step. A conditional DIF's scales are watched without the offsets
// its context adds: a collapse that comes through the context network goes unreported. A DIF of
// one component cannot collapse relative to itself.
#pragma once

#include "flows/density.h"

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ssm::flows {

class DifImpl;

inline constexpr double kCollapsedScale = 1e-3;

struct Collapse {
  std::string component; // "component 2", or "component 0 of the cascade's stage 1"
  double scale = 0;      // its smallest scale (relative to the widest's, for a relative watch)
  bool relative = false; // found by a relative watch
};

// "OWNER's DIF component k: its scale fell to s at WHEN; it is collapsing onto a point (ADVICE)",
// without "OWNER's " when the owner is empty; "its scale fell to s of the widest component's" for
// a relative watch.
std::string collapse_warning(const std::string& owner, const Collapse& collapse,
                             const std::string& when, const std::string& advice);

class ScaleWatch {
public:
  // relative: scales against the widest component's in the same coordinate, not absolute ones.
  explicit ScaleWatch(bool relative) : relative_(relative) {}
  // The components of every DIF in `density`'s chain newly collapsed.
  std::vector<Collapse> check(const DensityImpl& density);

private:
  bool relative_;
  std::set<std::pair<const DifImpl*, int64_t>> warned_; // (the DIF, its component)
};

} // namespace ssm::flows
