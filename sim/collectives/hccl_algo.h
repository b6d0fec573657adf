// HCCL_ALGO strings: "level0:NA;level1:ring" for every op, or per op
// "allreduce=level0:ring;level1:NHR/allgather=level0:NA". Level 0 picks the
// in-server algorithm; level 1 (between servers) is accepted and validated
// but has no effect inside one server.
#pragma once

#include <optional>
#include <string>

#include "sim/collectives/collective.h"

namespace hcclsim {

// nullopt: HCCL's own choice for `op` (no string, "NA", or no entry for op).
// Throws std::invalid_argument with the offending part and the accepted values.
std::optional<Level0Algo> parse_hccl_algo(const std::string& text, CollOp op);

}  // namespace hcclsim
