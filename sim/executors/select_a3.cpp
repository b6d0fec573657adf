// HCCL's executor selection on Atlas A3 (910_93), after the operators'
// SelectAlgfor91093 (hcomm src/legacy/ascend910/algorithm/impl/operator/
// *_operator.cc), the level defaults of impl/alg_configurator.cc and the
// thresholds of pub_inc/common.h and pub_inc/hccl_aiv.h. docs/executors.md
// tabulates the rules with their sources.
#include <stdexcept>

#include "sim/executors/selection.h"

namespace hcclsim {

namespace {

using namespace selection;

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Level algorithms on 910_93 (AlgConfigurator): level 0 is the double ring
// (a server of whole 910C chips: HCCS_SW pairs (n-2)n and n SIO pairs);
// level 1 defaults to ring for 3, 5, 6 or 7 servers and to NHR otherwise
// (H-D_R is rewritten to NHR on 910_93; the count is of every server of the
// communicator); level 2 defaults to NHR. HCCL_ALGO may ask for ring, NB or
// NHR at levels 1 and 2 (H-D_R becomes NHR; Pipeline is not modelled on A3).
}  // namespace

AlgoPlan a3_plan(CollOp op, const ExecContext& ctx) {
  const Hierarchy& h = ctx.hierarchy;
  AlgoPlan plan;
  plan.level0 = ctx.algo.level0.value_or(Level0Algo::DoubleRing);
  if (plan.level0 == Level0Algo::Mesh) {
    throw std::invalid_argument("an A3 server runs its level 0 as a (double) ring; level0:fullmesh is an A2 form");
  }
  const int servers = h.servers();
  const bool ring_default = servers == 3 || servers == 5 || servers == 6 || servers == 7 || servers == 1;
  auto level = [&](std::optional<Level1Algo> asked, Level1Algo fallback) {
    Level1Algo a = asked.value_or(fallback);
    if (a == Level1Algo::HalvingDoubling) a = Level1Algo::NHR;
    return a;
  };
  plan.level1 = level(ctx.algo.level1, ring_default ? Level1Algo::Ring : Level1Algo::NHR);
  plan.level2 = level(ctx.algo.level2, Level1Algo::NHR);
  if (op == CollOp::Broadcast && plan.level1 != Level1Algo::NB) plan.level1 = Level1Algo::NHR;  // scatter/broadcast: NHR or NB only
  if (op == CollOp::Reduce) plan.level1 = Level1Algo::Ring;                                   // "inter-server only support ring"
  if (op == CollOp::AlltoAll) plan.level1 = plan.level2 = Level1Algo::Pairwise;
  if (ctx.algo.pipeline) {
    throw std::invalid_argument("level1:pipeline is modelled for A2 clusters only (on A3 HCCL pipelines zero-copy "
                                "buffers across supernodes, which hcclsim does not model)");
  }
  return plan;
}

namespace {

AlgoPlan flat(AlgoPlan plan, Level1Algo algo) {
  plan.level1 = algo;
  plan.flat = true;
  return plan;
}

}  // namespace

bool aiv_reduce(DataType dtype, ReduceOp op);

ExecutorChoice select_executor_a3(const CollectiveSpec& spec, const ExecContext& ctx) {
  const Hierarchy& h = ctx.hierarchy;
  const bool single = h.servers() == 1;
  const bool one_pod = h.pods == 1;
  const bool opbase = ctx.mode == WorkflowMode::OpBase;
  const std::uint64_t size = spec.count * data_type_size(spec.dtype);  // HCCL's dataSize
  const std::uint64_t dies = static_cast<std::uint64_t>(h.per_server);
  const std::uint64_t ranks = static_cast<std::uint64_t>(spec.ranks);
  const bool inline_reduce = sdma_inline_reduce(spec.dtype, spec.reduce_op);
  const bool aiv = ctx.expansion == Expansion::Aiv;
  const AlgoPlan plan = a3_plan(spec.op, ctx);
  const bool double_ring = plan.level0 == Level0Algo::DoubleRing;
  const bool two_by_two = h.pods == 2 && h.servers_per_pod == 2;
  switch (spec.op) {
    case CollOp::AllReduce: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op)) {
        if (!one_pod) {
          // AIV stays inside one supernode; HCCL falls back to AI CPU.
        } else if (!single) {
          if ((ranks > 8 && size < 8 * MiB) || (ranks <= 8 && size <= 512 * KiB)) {
            unmodelled("AllReduceMeshAivFor91093Executor", "AIV across the servers of a supernode");
          }
        } else if (!ctx.deterministic && size / dies <= (opbase ? MiB : 4 * MiB)) {
          if (opbase && size < 16 * MiB) return pick("AllReduceMeshAivSmallCountExecutor", plan, "AIV, one server, op-base, <= 1 MiB per die (AIV_ALL_REDUCE_A3_ENTRY_SIZE)");
          return pick("AllReduceMeshAivExecutor", plan, "AIV, one server");
        }
      }
      const bool ccl_limit = opbase && size > spec.buffer_bytes / 4;
      if (single && inline_reduce && dies > 2 && size <= 512 * KiB * ranks && !ccl_limit) {
        return pick("AllReduceMeshSmallCountExecutor", flat(plan, Level1Algo::HalvingDoubling), "one server, <= 512 KiB x ranks (HCCL_SMALL_COUNT_512_KB)");
      }
      if (!single && one_pod && dies > 2 && size <= MiB * dies) {
        return pick("AllReduceComm", flat(plan, Level1Algo::NHR), "servers of one supernode, <= 1 MiB x dies: flat NHR over every rank");
      }
      if (!one_pod && !two_by_two && size <= 16 * KiB * dies) {
        return pick("AllReduceComm", flat(plan, Level1Algo::NHR), "several supernodes, <= 16 KiB x dies: flat NHR over every rank");
      }
      if (!one_pod && opbase && size <= 256 * KiB) {
        return pick("AllReduceMidCountFor91093Executor", flat(plan, Level1Algo::NHR), "several supernodes, op-base, <= 256 KiB");
      }
      return pick(double_ring ? "AllReduceFastDoubleRingFor91093Executor" : "AllReduceRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::AllGather: {
      if (aiv && single && size <= (opbase ? 512 * KiB : 4 * MiB)) {
        if (size <= (opbase ? 700 * KiB : 760 * KiB)) return pick("AllGatherMeshAivSmallCountExecutor", plan, "AIV, one server, small");
        return pick("AllGatherMeshAivExecutor", plan, "AIV, one server");
      }
      if (aiv && one_pod && !single && ((ranks <= 6 && size <= MiB) || (ranks <= 16 && size <= 512 * KiB) || size <= 32 * KiB)) {
        unmodelled("AllGatherMeshAivFor91093Executor", "AIV across the servers of a supernode");
      }
      if (!one_pod && !two_by_two && size <= 16 * KiB) {
        return pick("AllGatherComm", flat(plan, Level1Algo::HalvingDoubling), "several supernodes, <= 16 KiB: flat H-D_R");
      }
      if (single && dies > 2 && size <= 512 * KiB && (!opbase || spec.buffer_bytes >= size * ranks)) {
        return pick("AllGatherSmallCount", flat(plan, Level1Algo::HalvingDoubling), "one server, <= 512 KiB");
      }
      if (!single && one_pod && size * static_cast<std::uint64_t>(h.servers()) <= (dies % 4 == 0 ? MiB : 512 * KiB)) {
        return pick("AllGatherSmallCount", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small");
      }
      if (!one_pod && opbase && size <= 256 * KiB) {
        return pick("AllGatherMidCountFor91093Executor", flat(plan, Level1Algo::NHR), "several supernodes, op-base, <= 256 KiB");
      }
      return pick(double_ring ? "AlignedAllGatherDoubleRingFor91093Executor" : "AllGatherRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::ReduceScatter: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic) {
        if (single && size <= (opbase ? MiB : 4 * MiB)) {
          if (opbase) return pick("ReduceScatterMeshAivSmallCountExecutor", plan, "AIV, one server, op-base, <= 1 MiB");
          return pick("ReduceScatterMeshAivExecutor", plan, "AIV, one server, graph");
        }
        if (!single && one_pod && ((ranks <= 6 && size <= MiB) || (ranks <= 16 && size <= 512 * KiB) || size <= 128 * KiB)) {
          unmodelled("ReduceScatterMeshAivFor91093Executor", "AIV across the servers of a supernode");
        }
      }
      // 512 KiB / 1 MiB for chips with 7 HCCS ports (assumed for 910C; 1 MiB / 2 MiB otherwise).
      const bool dma_reduce_limit = opbase && power_of_two(spec.ranks) && spec.buffer_bytes * 2 < size * ranks;
      if (single && inline_reduce && dies > 2 && size <= 512 * KiB && !dma_reduce_limit) {
        return pick("ReduceScatterDeterExecutor", flat(plan, Level1Algo::HalvingDoubling), "one server, <= 512 KiB");
      }
      if (!single && one_pod && inline_reduce && dies > 2 && !dma_reduce_limit) {
        if (!power_of_two(spec.ranks) && size <= 256 * KiB) {
          return pick("ReduceScatterComm", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small, ranks not a power of two");
        }
        if (power_of_two(spec.ranks) && size * static_cast<std::uint64_t>(h.servers()) <= MiB) {
          return pick("ReduceScatterDeterExecutor", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small");
        }
      }
      return pick(double_ring ? "ReduceScatterFastDoubleRingFor91093Executor" : "ReduceScatterRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::Broadcast:
      if (aiv) unmodelled("BroadcastMeshAivExecutor", "AIV Broadcast");
      if (!single && one_pod && dies > 2 && size <= MiB * dies) {
        return pick("BroadCastComm", flat(plan, Level1Algo::NHR), "servers of one supernode, <= 1 MiB x dies: flat NHR");
      }
      if (single && dies > 2 && size <= 512 * KiB * ranks) {
        return pick("BroadCastSmallCountExecutor", flat(plan, Level1Algo::HalvingDoubling), "one server, <= 512 KiB x ranks");
      }
      return pick("BroadCastRingFor91093Executor", plan, "ring topology");
    case CollOp::Reduce:
      return pick("ReduceRingFor91093Executor", plan, "ring topology");
    case CollOp::AlltoAll:
      if (aiv && single && (spec.alltoallv_counts.empty() ? size <= 512 * KiB : true)) {
        if (spec.alltoallv_counts.empty() && opbase && size < 512 * KiB) {
          return pick("AlltoAllMeshAivExecutor", plan, "AIV, one server, <= 512 KiB per peer");
        }
      }
      return pick("RunAlltoAllDirectFullmesh", plan, "superpod mode with HCCS between servers: flat full mesh");
  }
  throw std::logic_error("unknown collective");
}

}  // namespace hcclsim
