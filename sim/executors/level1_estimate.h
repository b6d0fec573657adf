// The level-1 algorithms' closed forms (sim/executors/level1.cpp), for
// the flat executors and for the level-1 stages of hierarchical ones.
#pragma once

#include <cstdint>

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

}  // namespace hcclsim
