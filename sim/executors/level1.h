// Level-1 (between servers) algorithms as flat task graphs over ranks
// 0..p-1, each rank one NPU of a different server. The hierarchical
// collectives compose them with the level-0 algorithms (TaskGraph::append
// maps the ranks and offsets the notifies).
//
// Every transfer follows the RDMA rules: data is written into the peer's HCCL
// buffer and never reduced on the way. A reduction step is a write into the
// receiver's CCL_OUT (at the same offsets as the destination in its CCL_IN)
// and a notify, after which the receiver reduces CCL_OUT -> CCL_IN on its
// own; a plain copy lands directly in the receiver's CCL_IN. Each step is
// guarded as HCCL guards a step on a link: the receiver acknowledges (the
// area is free, everything it received before is consumed), the sender
// waits, writes and records; the receiver waits for that record.
//
// Ops per algorithm, as hicann/hccl docs/zh/user_guide/hccl_env/
// inter_server_algo_support.md lists them for Atlas A2 (the same for A3 and
// Atlas training, Reduce/Broadcast included):
//   ring      AllReduce, ReduceScatter, AllGather, Reduce
//   H-D_R     AllReduce, ReduceScatter, AllGather, Broadcast, Reduce
//   NHR       AllReduce, ReduceScatter, AllGather, Broadcast
//   NB        AllReduce, ReduceScatter, AllGather, Broadcast
//   pairwise  AlltoAll (and AlltoAllV through spec.alltoallv_counts)
// Every algorithm takes any rank count >= 1 (H-D_R folds the ranks beyond a
// power of two first; one rank is a local copy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/executors/collective.h"

namespace hcclsim {

enum class Level1Algo : std::uint8_t { Ring, HalvingDoubling /* H-D_R */, NHR, NB, Pairwise };

// All of them, in enum order.
const std::vector<Level1Algo>& level1_algos();
// The HCCL_ALGO spelling: "ring", "H-D_R", "NHR", "NB", "pairwise".
std::string level1_algo_name(Level1Algo algo);
// Exact HCCL_ALGO spelling; nullopt for anything else (including HCCL names
// this simulator does not build, such as NHR_V1 or pipeline).
std::optional<Level1Algo> parse_level1_algo(const std::string& name);

bool level1_supports(CollOp op, int ranks, Level1Algo algo);

// What HCCL runs instead when `algo` does not support `op` (the support
// list's "不支持算子处理方法" column), in the documented order, keeping only
// algorithms that support `op`. Empty when `algo` supports `op`, and for an op
// other than AlltoAll under pairwise (the docs name no replacement: HCCL
// picks on its own).
std::vector<Level1Algo> level1_fallbacks(CollOp op, Level1Algo algo);

// Throws std::invalid_argument when the algorithm does not support the op or
// the rank count (naming HCCL's replacement), or the spec is unusable (root
// out of range, an HCCL buffer too small for one element per rank, AlltoAllV
// counts of the wrong shape).
TaskGraph build_level1(const CollectiveSpec& spec, Level1Algo algo);

// Highest notify index build_level1 uses for `ranks`, plus one: an upper
// bound of TaskGraph::notifies_used() for any op and size (for reserving
// notify ranges before building). At most 2 for ring, 4 + 4 log2 p for
// H-D_R, 4 ceil(log2 p) for NHR and NB, 2(p-1) for pairwise up to 121 ranks
// and 200 + 2 ceil(log2 p) beyond: below 256 for p <= 1024.
//
// Reuse is safe inside one graph (see level1.cpp). Across graphs it is not
// automatic: a rank that has finished one graph may record into a register
// that a slower rank still has to wait on in that graph (it only depends on
// some of the other ranks). Two level-1 graphs run one after the other on the
// same ranks should therefore use different notify bases (level1_notifies
// apart); a base may come back once a stage in between made every rank's
// completion depend on every other rank (an AllReduce, AllGather or
// ReduceScatter among the same ranks, not a Broadcast or Reduce).
int level1_notifies(int ranks, Level1Algo algo);

}  // namespace hcclsim
