// The particle filters' registration (bootstrap, guided, apf) and their options, which the
// smoothers' forward pass reads too.
#pragma once

#include "core/method_registry.h"
#include "smc/filter.h"

#include <string_view>

namespace ssm {

// Registers the particle filters for Task::Filter, with their options.
void register_particle_filters(MethodRegistry& registry);

// The particle filter options, as declared once (for another task's methods to read them).
std::vector<MethodOption> particle_filter_options();

// The options of the particle filter `name` (a registered particle method) from the parsed
// values, with the seed and progress callback of the run.
FilterOptions particle_filter_options(std::string_view name, const OptionValues& values,
                                      uint64_t seed);

// The registered name of the particle filter that `options` run.
const std::string& particle_filter_name(const FilterOptions& options);

// Whether `options` run the bootstrap filter (the default), whose ancestors are draws from the
// backward kernel (paris's mcmc moves start there).
bool is_bootstrap_filter(const FilterOptions& options);

} // namespace ssm
