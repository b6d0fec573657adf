// HCCL's executor selection on Atlas A2 (910B), after the operators'
// SelectAlgfor910B (hcomm src/legacy/ascend910/algorithm/impl/operator/
// *_operator.cc) and their thresholds (pub_inc/common.h, pub_inc/hccl_aiv.h).
// docs/executors.md tabulates the rules with their sources.
#include <stdexcept>

#include "sim/executors/selection.h"

namespace hcclsim {

namespace {

using namespace selection;

// The sizes the rules below compare with (the profile's npu.hccl_selection;
// the comments name HCCL's constant where it has one).
struct A2Thresholds {
  explicit A2Thresholds(const ExecContext& ctx)
      : aiv_all_reduce_min_buffer(threshold(ctx, "aiv_all_reduce_min_buffer")),
        aiv_all_reduce_big(threshold(ctx, "aiv_all_reduce_big")),
        aiv_rdma_small_per_server(threshold(ctx, "aiv_rdma_small_per_server")),
        aiv_rdma_mid(threshold(ctx, "aiv_rdma_mid")),
        deterministic_small_opbase(threshold(ctx, "deterministic_small_opbase")),
        deterministic_small_graph(threshold(ctx, "deterministic_small_graph")),
        deterministic_medium_graph(threshold(ctx, "deterministic_medium_graph")),
        small_count_opbase(threshold(ctx, "small_count_opbase")),
        small_count_graph(threshold(ctx, "small_count_graph")),
        aiv_big(threshold(ctx, "aiv_big")),
        aiv_all_gather_small(threshold(ctx, "aiv_all_gather_small")),
        graph_mesh_small(threshold(ctx, "graph_mesh_small")),
        aiv_reduce_scatter_mid(threshold(ctx, "aiv_reduce_scatter_mid")),
        aiv_alltoall_min_buffer(threshold(ctx, "aiv_alltoall_min_buffer")),
        aiv_alltoall_max_per_peer(threshold(ctx, "aiv_alltoall_max_per_peer")),
        deterministic_mid_count_ranks(rank_threshold(ctx, "deterministic_mid_count_ranks")),
        alltoall_p2p_max_ranks(rank_threshold(ctx, "alltoall_p2p_max_ranks")) {}
  std::uint64_t aiv_all_reduce_min_buffer;   // the HCCL buffer AIV AllReduce needs
  std::uint64_t aiv_all_reduce_big;          // AIV_ALL_REDUCE_BIG_SIZE
  std::uint64_t aiv_rdma_small_per_server;   // AllReduceSmallCountAivRdmaExecutor, per server
  std::uint64_t aiv_rdma_mid;                // AllReduceMidCountAivRdmaExecutor
  std::uint64_t deterministic_small_opbase;  // GetCountTypeForDeterAllReduce
  std::uint64_t deterministic_small_graph;
  std::uint64_t deterministic_medium_graph;
  std::uint64_t small_count_opbase;          // HCCL_SMALL_COUNT_256_KB
  std::uint64_t small_count_graph;           // HCCL_SMALL_COUNT_GRAPH_64_KB
  std::uint64_t aiv_big;                     // AIV_BIG_SIZE
  std::uint64_t aiv_all_gather_small;        // AIV_ALL_GATHER_SMALL_SIZE
  std::uint64_t graph_mesh_small;            // the graph-mode Mesh/MeshGraph executors' split
  std::uint64_t aiv_reduce_scatter_mid;      // AIV_REDUCE_SCATTER_MID_SIZE
  std::uint64_t aiv_alltoall_min_buffer;     // the HCCL buffer AIV AlltoAll needs
  std::uint64_t aiv_alltoall_max_per_peer;
  // Rank counts (npu.hccl_selection_ranks).
  std::uint64_t deterministic_mid_count_ranks;  // the one server size of the deterministic mid-count loop
  std::uint64_t alltoall_p2p_max_ranks;         // AlltoAll(V) point to point up to this many ranks
};

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
  const A2Thresholds t(ctx);
  const bool aiv_buffer = !opbase || spec.buffer_bytes >= t.aiv_all_reduce_min_buffer;
  // Level algorithms (HCCL_ALGO, else HCCL's choice: Pipeline, alpha-beta), for
  // the executors that compose levels.
  AlgoPlan plan = a2_plan(spec, ctx);
  const bool ring = plan.level0 == Level0Algo::Ring;
  if (plan.level0 == Level0Algo::DoubleRing) {
    throw std::invalid_argument("the double ring is an Atlas A3 level-0 form; an A2 server is a full HCCS mesh");
  }
  switch (spec.op) {
    case CollOp::AllReduce: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic && !ring && aiv_buffer) {
        if (single) {
          if (opbase && size < t.aiv_all_reduce_big) {
            return pick("AllReduceMeshAivSmallCountExecutor", plan, "AIV, op-base, < " + size_words(t.aiv_all_reduce_big) + " (AIV_ALL_REDUCE_BIG_SIZE)");
          }
          return pick("AllReduceMeshAivExecutor", plan, opbase ? "AIV, op-base, >= " + size_words(t.aiv_all_reduce_big) : "AIV, graph mode");
        }
        const bool rdma_small = size / static_cast<std::uint64_t>(h.per_server) <= t.aiv_rdma_small_per_server;
        if (rdma_small || size <= t.aiv_rdma_mid) {
          unmodelled(rdma_small ? "AllReduceSmallCountAivRdmaExecutor"
                     : "AllReduceMidCountAivRdmaExecutor",
                     "AIV across servers");
        }
      }
      if (ring) return pick("AllReduceRingExecutor", plan, "level0:ring requested");
      if (single) {
        if (!inline_reduce) return pick("AllReduceMeshExecutor", plan, "dtype or op not inline-reducible");
        if (ctx.deterministic && spec.ranks > 2) {
          // (GetCountTypeForDeterAllReduce: op-base, small up to
          // deterministic_small_opbase, else medium on 8 ranks; graph, small up to
          // deterministic_small_graph, medium on 8 up to deterministic_medium_graph)
          if (opbase && size > t.deterministic_small_opbase) {
            const std::string above = "> " + size_words(t.deterministic_small_opbase);
            if (static_cast<std::uint64_t>(spec.ranks) == t.deterministic_mid_count_ranks) return pick("AllReduceMeshMidCountLoopExecutor", plan, "HCCL_DETERMINISTIC=true, op-base, one server of " + std::to_string(t.deterministic_mid_count_ranks) + ", " + above);
            return pick("AllReduceMeshOneshotLoopExecutor", plan, "HCCL_DETERMINISTIC=true, op-base, one server not of " + std::to_string(t.deterministic_mid_count_ranks) + ", " + above);
          }
          unmodelled(size <= (opbase ? t.deterministic_small_opbase : t.deterministic_small_graph) ? "AllReduceMeshSmallCountExecutor (deterministic templates)"
                     : static_cast<std::uint64_t>(spec.ranks) == t.deterministic_mid_count_ranks && size <= t.deterministic_medium_graph ? "AllReduceMeshMidCountLoopExecutor (graph mode)"
                                                          : "AllReduceMeshOneshotLoopExecutor (graph mode)",
                     "HCCL_DETERMINISTIC=true, one server");
        }
        const bool fits = size <= spec.buffer_bytes;  // one shot through the HCCL buffer
        if (opbase) {
          if (size <= t.small_count_opbase && fits) {
            return pick("AllReduceMeshSmallCountExecutor", plan, "op-base, one server, <= " + size_words(t.small_count_opbase) + " (HCCL_SMALL_COUNT_256_KB)");
          }
          return pick("AllReduceMeshOpbaseLoopExecutor", plan, "op-base, one server, > " + size_words(t.small_count_opbase));
        }
        if (size <= t.small_count_graph && fits) {
          return pick("AllReduceMeshSmallCountExecutor", plan, "graph, one server, <= " + size_words(t.small_count_graph) + " (HCCL_SMALL_COUNT_GRAPH_64_KB)");
        }
        return pick("AllReduceMeshExecutor", plan, "graph, one server, > " + size_words(t.small_count_graph));
      }
      if (ctx.deterministic) unmodelled("AllReduceMeshOpbaseMidCountDeterministicExecutor", "HCCL_DETERMINISTIC=true across servers");
      if (plan.pipeline) return pick("AllReduceMeshOpbasePipelineExecutor", plan, "op-base across servers, level1 pipeline");
      return pick("AllReduceMeshExecutor", plan, "across servers");
    }
    case CollOp::AllGather: {
      if (aiv && single && !ring && size <= t.aiv_big) {
        if (opbase && size <= t.aiv_all_gather_small) {
          return pick("AllGatherMeshAivSmallCountExecutor", plan, "AIV, op-base, <= " + size_words(t.aiv_all_gather_small) + " (AIV_ALL_GATHER_SMALL_SIZE)");
        }
        return pick("AllGatherMeshAivExecutor", plan, "AIV, one server, <= " + size_words(t.aiv_big) + " (AIV_BIG_SIZE)");
      }
      if (ring) return pick("AllGatherRingExecutor", plan, "level0:ring requested");
      if (single) {
        if (opbase) return pick("AllGatherMeshOpbaseExecutor", plan, "op-base, one server");
        return pick(size > t.graph_mesh_small ? "AllGatherMeshExecutor" : "AllGatherMeshGraphExecutor", plan, "graph, one server");
      }
      if (plan.pipeline) return pick("AllGatherMeshOpbasePipelineExecutor", plan, "op-base across servers, level1 pipeline");
      return pick("AllGatherMeshExecutor", plan, "across servers");
    }
    case CollOp::ReduceScatter: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic && single && !ring && size <= t.aiv_big) {
        if (opbase && size <= t.aiv_reduce_scatter_mid) {
          return pick("ReduceScatterMeshAivSmallCountExecutor", plan, "AIV, op-base, <= " + size_words(t.aiv_reduce_scatter_mid) + " (AIV_REDUCE_SCATTER_MID_SIZE)");
        }
        return pick("ReduceScatterMeshAivExecutor", plan, "AIV, one server, <= " + size_words(t.aiv_big));
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
        return pick(size > t.graph_mesh_small ? "ReduceScatterMeshExecutor" : "ReduceScatterMeshGraphExecutor", plan, "graph, one server");
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
      if (aiv && single && (!opbase || spec.buffer_bytes >= t.aiv_alltoall_min_buffer)) {
        const std::string per_peer = size_words(t.aiv_alltoall_max_per_peer) + " per peer";
        if (!alltoallv && opbase && size < t.aiv_alltoall_max_per_peer) return pick("AlltoAllMeshAivExecutor", plan, "AIV, one server, op-base, < " + per_peer);
        unmodelled("AlltoAllMeshAivExecutor (AlltoAllVC kernels)", "AIV AlltoAll of " + per_peer + " or more, or AlltoAllV");
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
      if (static_cast<std::uint64_t>(spec.ranks) <= t.alltoall_p2p_max_ranks) return pick("RunAlltoAllVFullMesh", plan, "up to " + std::to_string(t.alltoall_p2p_max_ranks) + " ranks (HCCL_ALLTOALLV_P2P_SIZE)");
      return pick("RunAlltoAllVStaged", plan, "AlltoAll within the HCCL buffer, one server");
    }
  }
  throw std::logic_error("unknown collective");
}

}  // namespace hcclsim
