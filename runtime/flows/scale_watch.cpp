// The collapse watch of flows/scale_watch.h.
#include "flows/scale_watch.h"

#include "flows/dif.h"
#include "flows/flows.h"

#include <fmt/format.h>

#include <cmath>

namespace ssm::flows {

std::string collapse_warning(const std::string& owner, const Collapse& collapse,
                             const std::string& when, const std::string& advice) {
  return fmt::format("{}DIF {}: its scale fell to {:.3g}{} at {}; it is collapsing onto a point "
                     "({})",
                     owner.empty() ? "" : owner + "'s ", collapse.component, collapse.scale,
                     collapse.relative ? " of the widest component's" : "", when, advice);
}

std::vector<Collapse> ScaleWatch::check(const DensityImpl& density) {
  torch::NoGradGuard no_grad;
  std::vector<Collapse> out;
  int64_t level = 0;
  for (const DensityImpl* d = &density; d; ++level) {
    const auto* dif = dynamic_cast<const DifImpl*>(d);
    const auto* flow = dynamic_cast<const FlowImpl*>(d);
    if (dif) {
      // log scales [K, d], relative to each coordinate's widest component if asked
      const torch::Tensor log_scales =
          relative_ ? dif->log_scales - std::get<0>(dif->log_scales.max(0, true)) : dif->log_scales;
      if (log_scales.min().item<double>() < std::log(kCollapsedScale)) {
        const torch::Tensor smallest = std::get<0>(log_scales.min(1));
        for (int64_t k = 0; k < smallest.size(0); ++k) {
          const double s = std::exp(smallest[k].item<double>());
          if (s < kCollapsedScale && warned_.insert({dif, k}).second)
            out.push_back({level ? fmt::format("component {} of the cascade's stage {}", k, level)
                                 : fmt::format("component {}", k),
                           s, relative_});
        }
      }
    }
    d = dif ? &dif->base() : flow ? &flow->base() : nullptr;
  }
  return out;
}

} // namespace ssm::flows
