// HCCL's executor selection on Atlas A2 (910B), after the operators'
// SelectAlgfor910B (hcomm src/legacy/ascend910/algorithm/impl/operator/
// *_operator.cc) and their thresholds (pub_inc/common.h, pub_inc/hccl_aiv.h).
// docs/executors.md tabulates the rules with their sources.
#include <stdexcept>

#include "sim/executors/selection.h"

namespace hcclsim {

namespace {

using namespace selection;

}  // namespace

// AIV kernels reduce by atomic stores: fp32/fp16/bf16/int8/int16/int32 with
// sum/max/min (device_capacity.cc IsSupportAIVReduce; the same set as SDMA).
bool aiv_reduce(DataType dtype, ReduceOp op) { return sdma_inline_reduce(dtype, op); }

AlgoPlan a2_plan(const CollectiveSpec& spec, const ExecContext& ctx) {
  const std::uint64_t size = spec.count * data_type_size(spec.dtype);
  // What the levels share out: the data itself for the ops that have one
  // buffer of it (AllReduce, Broadcast, Reduce), every rank's block otherwise.
  const bool one_buffer = spec.op == CollOp::AllReduce || spec.op == CollOp::Broadcast || spec.op == CollOp::Reduce;
  AlgoPlan plan = choose_algorithm(spec.op, ctx.hierarchy, one_buffer ? size : size * static_cast<std::uint64_t>(spec.ranks),
                                   ctx.inter_server_bandwidth, ctx.algo);
  if (ctx.mode != WorkflowMode::OpBase) plan.pipeline = false;  // HCCL honours Pipeline in op-base mode only
  return plan;
}

ExecutorChoice select_executor_a2(const CollectiveSpec& spec, const ExecContext& ctx) {
  const Hierarchy& h = ctx.hierarchy;
  const bool single = h.servers() == 1;
  const bool opbase = ctx.mode == WorkflowMode::OpBase;
  const std::uint64_t size = spec.count * data_type_size(spec.dtype);  // HCCL's dataSize
  const bool inline_reduce = sdma_inline_reduce(spec.dtype, spec.reduce_op);
  const bool aiv = ctx.expansion == Expansion::Aiv;
  const bool ccl_16m = !opbase || spec.buffer_bytes >= 16 * MiB;
  // Level algorithms (HCCL_ALGO, else HCCL's choice: Pipeline, alpha-beta), for
  // the executors that compose levels.
  AlgoPlan plan = a2_plan(spec, ctx);
  const bool ring = plan.level0 == Level0Algo::Ring;
  if (plan.level0 == Level0Algo::DoubleRing) {
    throw std::invalid_argument("the double ring is an Atlas A3 level-0 form; an A2 server is a full HCCS mesh");
  }
  switch (spec.op) {
    case CollOp::AllReduce: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic && !ring && ccl_16m) {
        if (single) {
          if (opbase && size < 16 * MiB) return pick("AllReduceMeshAivSmallCountExecutor", plan, "AIV, op-base, < 16 MiB (AIV_ALL_REDUCE_BIG_SIZE)");
          return pick("AllReduceMeshAivExecutor", plan, opbase ? "AIV, op-base, >= 16 MiB" : "AIV, graph mode");
        }
        if (size / static_cast<std::uint64_t>(h.per_server) <= 190 * KiB || size <= 16 * MiB) {
          unmodelled(size / static_cast<std::uint64_t>(h.per_server) <= 190 * KiB ? "AllReduceSmallCountAivRdmaExecutor"
                                                                                   : "AllReduceMidCountAivRdmaExecutor",
                     "AIV across servers");
        }
      }
      if (ring) return pick("AllReduceRingExecutor", plan, "level0:ring requested");
      if (single) {
        if (!inline_reduce) return pick("AllReduceMeshExecutor", plan, "dtype or op not inline-reducible");
        if (ctx.deterministic && spec.ranks > 2) {
          // (GetCountTypeForDeterAllReduce: op-base small <= 128 KiB, else
          // medium on 8 ranks; graph small <= 64 KiB, medium <= 4 MiB on 8)
          if (opbase && size > 128 * KiB) {
            if (spec.ranks == 8) return pick("AllReduceMeshMidCountLoopExecutor", plan, "HCCL_DETERMINISTIC=true, op-base, one server of 8, > 128 KiB");
            return pick("AllReduceMeshOneshotLoopExecutor", plan, "HCCL_DETERMINISTIC=true, op-base, one server not of 8, > 128 KiB");
          }
          unmodelled(size <= (opbase ? 128 : 64) * KiB ? "AllReduceMeshSmallCountExecutor (deterministic templates)"
                     : spec.ranks == 8 && size <= 4 * MiB ? "AllReduceMeshMidCountLoopExecutor (graph mode)"
                                                          : "AllReduceMeshOneshotLoopExecutor (graph mode)",
                     "HCCL_DETERMINISTIC=true, one server");
        }
        const bool fits = size <= spec.buffer_bytes;  // one shot through the HCCL buffer
        if (opbase) {
          if (size <= 256 * KiB && fits) return pick("AllReduceMeshSmallCountExecutor", plan, "op-base, one server, <= 256 KiB (HCCL_SMALL_COUNT_256_KB)");
          return pick("AllReduceMeshOpbaseLoopExecutor", plan, "op-base, one server, > 256 KiB");
        }
        if (size <= 64 * KiB && fits) return pick("AllReduceMeshSmallCountExecutor", plan, "graph, one server, <= 64 KiB (HCCL_SMALL_COUNT_GRAPH_64_KB)");
        return pick("AllReduceMeshExecutor", plan, "graph, one server, > 64 KiB");
      }
      if (ctx.deterministic) unmodelled("AllReduceMeshOpbaseMidCountDeterministicExecutor", "HCCL_DETERMINISTIC=true across servers");
      if (plan.pipeline) return pick("AllReduceMeshOpbasePipelineExecutor", plan, "op-base across servers, level1 pipeline");
      return pick("AllReduceMeshExecutor", plan, "across servers");
    }
    case CollOp::AllGather: {
      if (aiv && single && !ring && size <= 256 * MiB) {
        if (opbase && size <= 700 * KiB) return pick("AllGatherMeshAivSmallCountExecutor", plan, "AIV, op-base, <= 700 KiB (AIV_ALL_GATHER_SMALL_SIZE)");
        return pick("AllGatherMeshAivExecutor", plan, "AIV, one server, <= 256 MiB (AIV_BIG_SIZE)");
      }
      if (ring) return pick("AllGatherRingExecutor", plan, "level0:ring requested");
      if (single) {
        if (opbase) return pick("AllGatherMeshOpbaseExecutor", plan, "op-base, one server");
        return pick(size > MiB ? "AllGatherMeshExecutor" : "AllGatherMeshGraphExecutor", plan, "graph, one server");
      }
      if (plan.pipeline) return pick("AllGatherMeshOpbasePipelineExecutor", plan, "op-base across servers, level1 pipeline");
      return pick("AllGatherMeshExecutor", plan, "across servers");
    }
    case CollOp::ReduceScatter: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic && single && !ring && size <= 256 * MiB) {
        if (opbase && size <= 2 * MiB) return pick("ReduceScatterMeshAivSmallCountExecutor", plan, "AIV, op-base, <= 2 MiB (AIV_REDUCE_SCATTER_MID_SIZE)");
        return pick("ReduceScatterMeshAivExecutor", plan, "AIV, one server, <= 256 MiB");
      }
      if (ring) return pick("ReduceScatterRingExecutor", plan, "level0:ring requested");
      if (single) {
        if (!inline_reduce) return pick("ReduceScatterMeshExecutor", plan, "dtype or op not inline-reducible");
        if (opbase) {
          if (ctx.deterministic) {
            plan.level1 = Level1Algo::HalvingDoubling;
            plan.flat = true;
            return pick("ReduceScatterDeterExecutor", plan, "op-base, one server, HCCL_DETERMINISTIC=true");
          }
          return pick("ReduceScatterMeshDmaEliminationExecutor", plan, "op-base, one server, inline reduce");
        }
        return pick(size > MiB ? "ReduceScatterMeshExecutor" : "ReduceScatterMeshGraphExecutor", plan, "graph, one server");
      }
      if (plan.pipeline && !ctx.deterministic) return pick("ReduceScatterMeshOpbasePipelineExecutor", plan, "op-base across servers, level1 pipeline");
      return pick("ReduceScatterMeshExecutor", plan, "across servers");
    }
    case CollOp::Broadcast:
      if (ring) return pick("BroadCastRingExecutor", plan, "level0:ring requested");
      return pick("BroadCastMeshExecutor", plan, "mesh topology");
    case CollOp::Reduce:
      if (ring) return pick("ReduceRingPlusHd", plan, "level0:ring requested");
      return pick("ReduceMeshExecutor", plan, "mesh topology");
    case CollOp::AlltoAll: {
      const bool alltoallv = !spec.alltoallv_counts.empty();
      if (aiv && single && (!opbase || spec.buffer_bytes >= 8 * MiB)) {
        if (!alltoallv && opbase && size < 512 * KiB) return pick("AlltoAllMeshAivExecutor", plan, "AIV, one server, op-base, < 512 KiB per peer");
        unmodelled("AlltoAllMeshAivExecutor (AlltoAllVC kernels)", "AIV AlltoAll of 512 KiB per peer or more, or AlltoAllV");
      }
      if (!single) return pick("RunAlltoAllVTwoLevelPipeline", plan, "op-base across servers");
      if (alltoallv) return pick("RunAlltoAllDirectFullmesh", plan, "AlltoAllV, op-base, one server");
      // HCCL tries the direct full mesh (IsSupportDirectFullmeshForAlltoallv)
      // before the two-rank and staged forms.
      std::uint64_t total = 0;
      for (int j = 0; j < spec.ranks; ++j) total += spec.pair_count(0, j);
      if (total * data_type_size(spec.dtype) > spec.buffer_bytes) {
        return pick("RunAlltoAllDirectFullmesh", plan, "AlltoAll whose send and receive data exceed the HCCL buffer");
      }
      if (spec.ranks <= 2) return pick("RunAlltoAllVFullMesh", plan, "two ranks (HCCL_ALLTOALLV_P2P_SIZE)");
      return pick("RunAlltoAllVStaged", plan, "AlltoAll within the HCCL buffer, one server");
    }
  }
  throw std::logic_error("unknown collective");
}

}  // namespace hcclsim
