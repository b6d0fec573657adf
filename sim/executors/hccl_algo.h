// HCCL_ALGO strings: "level0:NA;level1:ring" for every op, or per op
// "allreduce=level0:ring;level1:NHR/allgather=level0:NA". Level 0 picks the
// in-server algorithm, level 1 the one between servers, level 2 the one
// between A3 supernodes; NA leaves a level to HCCL's choice.
#pragma once

#include <optional>
#include <string>

#include "sim/executors/hierarchy.h"

namespace hcclsim {

// Unset levels: HCCL's own choice for `op` (no string, "NA", or no entry for
// op). Throws std::invalid_argument with the offending part and the accepted
// values, and for algorithms HCCL has that hcclsim does not model.
AlgoRequest parse_hccl_algo(const std::string& text, CollOp op);

}  // namespace hcclsim
