// A communication domain's view of a topology: HCCL's selection, the
// executors and the closed forms see a domain as ranks 0..n-1 of a platform.
#pragma once

#include <string>
#include <vector>

#include "topologies/platform_spec.h"

namespace hcclsim {

// The topology with `members` first (in their order) and the other NPUs
// after, with the group's own servers (numbered as first met) and
// supernodes. Throws std::invalid_argument, starting with `what`, for a group
// that takes some dies of a chip but not in pairs (no HCCL domain is placed so).
TopologySpec group_view(const TopologySpec& spec, const std::vector<int>& members, const std::string& what);

}  // namespace hcclsim
