// Collectives over many servers, composed as HCCL does on A2/A3 clusters:
// level 0 inside a server (mesh), level 1 between servers on the NPUs of the
// same index (a "rail"), and on A3 level 2 between supernodes. Per slice of
// the HCCL buffer:
//   AllReduce     = L0 reduce-scatter, L1 all-reduce (or L1 reduce-scatter,
//                   L2 all-reduce, L1 all-gather), L0 all-gather;
//   ReduceScatter = L0 reduce-scatter, then L1 reduce-scatter;
//   AllGather     = L1 all-gather, then L0 all-gather;
//   Broadcast     = L0 scatter in the root's server, L1 broadcast of each
//                   NPU's slice on its own rail (one level-1 domain per
//                   plane), L0 all-gather in every server (mesh level 0;
//                   with a ring level 0: L1 broadcast on the root's rail,
//                   then L0 broadcast);
//   Reduce        = L0 reduce-scatter in every server, L1 reduce of each
//                   slice on its rail, L0 gather to the root (mesh; with a
//                   ring level 0: L0 reduce, then L1 reduce on the root's rail);
//   AlltoAll      = pairwise over all ranks.
// Pipeline (A2 clusters; AllReduce, ReduceScatter, AllGather): the same
// stages, but slice k+1's first stage overlaps slice k's later ones, on
// streams and notifies of its own, with two data regions used in turn.
// Each stage is an ordinary level-0 or level-1 task graph mapped onto its
// group's ranks; on every rank a stage starts after the previous one ended.
#pragma once

#include <optional>
#include <string>

#include "sim/executors/collective.h"
#include "sim/executors/level1.h"

namespace hcclsim {

struct Hierarchy {
  int per_server = 8;        // level-0 group
  int servers_per_pod = 1;   // level-1 group (A2: every server)
  int pods = 1;              // level-2 group (A3 supernodes)
  int ranks() const { return per_server * servers_per_pod * pods; }
  int servers() const { return servers_per_pod * pods; }
};

struct AlgoPlan {
  Level0Algo level0 = Level0Algo::Mesh;
  Level1Algo level1 = Level1Algo::Ring;
  Level1Algo level2 = Level1Algo::Ring;
  bool pipeline = false;     // HCCL's Pipeline: level 1 runs `level1` inside it
  bool flat = false;         // one `level1` algorithm over every rank (HCCL's *Comm executors)
  bool one_shot = false;     // a Broadcast's level-1 stage as a whole-data tree (broadcast_one_shot)
  // "level0:fullmesh;level1:NHR" (the levels that take part), or "flat:NHR".
  std::string describe(const Hierarchy& h, CollOp op) const;
};

// What HCCL_ALGO asked for; unset levels are HCCL's choice.
struct AlgoRequest {
  std::optional<Level0Algo> level0;
  std::optional<Level1Algo> level1;
  std::optional<Level1Algo> level2;
  bool pipeline = false;     // "level1:pipeline"
};

// Whether the Pipeline form exists for `op` at this scale: A2-like clusters
// (one level of servers of at most 8 NPUs, a mesh level 0), AllReduce,
// ReduceScatter and AllGather.
bool pipeline_supported(CollOp op, const Hierarchy& h, Level0Algo level0);

// HCCL's choice between a level-1 Broadcast's templates, by the bytes one
// level-1 group broadcasts (`slice_bytes`: the whole data for a flat
// executor, a plane's slice for the mesh and ring executors): NHR takes its
// one-shot tree up to 2 MiB (NHR_BCAST_SMALL_SIZE); NB its binary tree for
// 2 ranks or below ShouldUseBinaryBroadcastOfNB's threshold, which scales a
// 60 us latency by the NIC rate per NPU (hcomm alg_template
// broadcast_nb_binary.cc); H-D_R and ring have one template each.
bool broadcast_one_shot(Level1Algo algo, std::uint64_t slice_bytes, int level1_ranks, Bandwidth nic_bandwidth);

// HCCL's automatic choice (docs/sources.md §3): Pipeline for ReduceScatter and
// AllGather of 32 KiB and more with a mesh level 0, and for AllReduce when
// each NPU's level-1 share is 1 MiB or more (where pipeline_supported);
// level 1 (also inside Pipeline) by an alpha-beta comparison of Ring, NHR and
// H-D_R with alpha = 60 us, ties Ring > NHR > H-D_R; Pairwise for AlltoAll. `bytes_per_rank` is what the level-1 stage moves per rank;
// `link_bandwidth` the inter-server rate per NPU.
AlgoPlan choose_algorithm(CollOp op, const Hierarchy& h, std::uint64_t bytes_per_rank, Bandwidth link_bandwidth,
                          const AlgoRequest& request);

// Throws std::invalid_argument when a requested algorithm cannot run the op
// at that scale (with HCCL's reason).
TaskGraph build_hierarchical(const CollectiveSpec& spec, const Hierarchy& h, const AlgoPlan& plan);

}  // namespace hcclsim
