// The level-1 algorithms' closed forms (sim/executors/level1.cpp), for
// the flat executors and for the level-1 stages of hierarchical ones.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/executors/level1.h"
#include "sim/estimate/estimate.h"

namespace hcclsim {

// Where a level-1 group's ranks sit: member x of group g is NPU
// g * group_step + x * stride; `groups` groups run at once (the rails of a
// hierarchical collective, one per NPU index of a server).
struct GroupLayout {
  int members = 1;
  int stride = 1;
  int groups = 1;
  int group_step = 1;
  int npu(int group, int member) const { return group * group_step + member * stride; }
};

// When a rank's stream is free after running `algo` for `spec` (its ranks
// laid out by `layout`), the stream being free at `free` before it.
double level1_estimate(const EstimateFabric& fabric, const CollectiveSpec& spec, Level1Algo algo,
                       const GroupLayout& layout, double free);

// A rooted op's (Broadcast's, Reduce's) level-1 stage over the rails of a
// hierarchical collective, slice by slice, with the level-0 phases around
// each slice's rail as times: `followed` holds the first min(full,
// kFollowedSlices) full slices and then the partial one, if any; `full` counts
// every full slice of the op.
constexpr int kFollowedSlices = 3;
struct RailSlices {
  struct Slice {
    std::uint64_t count = 0;   // elements a rail moves in this slice
    std::vector<double> alone; // per NPU index of a server: busy first, on its own
    std::vector<double> pre;   // per NPU index: then busy, once its server's NPUs all got there; then the rail
    std::vector<double> post;  // per NPU index: the root server's NPUs busy after the rail, once all got there
  };
  std::vector<Slice> followed;
  std::uint64_t full = 0;
};

// When the last rank of the rails (`layout`: one group per NPU index, member
// x of group q NPU x * groups + q; `rail.root` the root's server) is free,
// every rank free at `free` before; negative where the rails do not run over
// RDMA or count more than 1024 ranks (then compose the stages instead).
double rooted_rails_run(const EstimateFabric& fabric, const CollectiveSpec& rail, Level1Algo algo,
                        const GroupLayout& layout, const RailSlices& slices, double free);

// One loop of a rooted op over the rails (as rooted_rails_run's layout),
// rank r's stream free at free[r] (rank x * groups + q: member x of group
// q): when each rank's stream is free after it; empty where the rails do
// not run over RDMA, count more than 1024 ranks or take more than one loop.
std::vector<double> rooted_rails_once(const EstimateFabric& fabric, const CollectiveSpec& rail, Level1Algo algo,
                                      const GroupLayout& layout, const std::vector<double>& free);

}  // namespace hcclsim
