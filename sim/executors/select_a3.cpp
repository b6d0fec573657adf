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

// The sizes the rules below compare with (the profile's npu.hccl_selection;
// the comments name HCCL's constant where it has one).
struct A3Thresholds {
  explicit A3Thresholds(const ExecContext& ctx)
      : aiv_all_reduce_across_servers_many_ranks(threshold(ctx, "aiv_all_reduce_across_servers_many_ranks")),
        aiv_all_reduce_across_servers_few_ranks(threshold(ctx, "aiv_all_reduce_across_servers_few_ranks")),
        aiv_all_reduce_entry_per_die_opbase(threshold(ctx, "aiv_all_reduce_entry_per_die_opbase")),
        aiv_all_reduce_entry_per_die_graph(threshold(ctx, "aiv_all_reduce_entry_per_die_graph")),
        aiv_all_reduce_big(threshold(ctx, "aiv_all_reduce_big")),
        small_count_per_rank(threshold(ctx, "small_count_per_rank")),
        flat_nhr_per_die_one_pod(threshold(ctx, "flat_nhr_per_die_one_pod")),
        flat_nhr_per_die_pods(threshold(ctx, "flat_nhr_per_die_pods")),
        mid_count_pods(threshold(ctx, "mid_count_pods")),
        aiv_all_gather_opbase(threshold(ctx, "aiv_all_gather_opbase")),
        aiv_all_gather_graph(threshold(ctx, "aiv_all_gather_graph")),
        aiv_all_gather_small_opbase(threshold(ctx, "aiv_all_gather_small_opbase")),
        aiv_all_gather_small_graph(threshold(ctx, "aiv_all_gather_small_graph")),
        aiv_across_servers_up_to_6_ranks(threshold(ctx, "aiv_across_servers_up_to_6_ranks")),
        aiv_across_servers_up_to_16_ranks(threshold(ctx, "aiv_across_servers_up_to_16_ranks")),
        aiv_all_gather_across_servers(threshold(ctx, "aiv_all_gather_across_servers")),
        aiv_reduce_scatter_across_servers(threshold(ctx, "aiv_reduce_scatter_across_servers")),
        flat_all_gather_pods(threshold(ctx, "flat_all_gather_pods")),
        all_gather_small_count(threshold(ctx, "all_gather_small_count")),
        all_gather_small_count_servers_dies_4(threshold(ctx, "all_gather_small_count_servers_dies_4")),
        all_gather_small_count_servers(threshold(ctx, "all_gather_small_count_servers")),
        aiv_reduce_scatter_opbase(threshold(ctx, "aiv_reduce_scatter_opbase")),
        aiv_reduce_scatter_graph(threshold(ctx, "aiv_reduce_scatter_graph")),
        reduce_scatter_deter(threshold(ctx, "reduce_scatter_deter")),
        reduce_scatter_comm_not_pow2(threshold(ctx, "reduce_scatter_comm_not_pow2")),
        reduce_scatter_deter_servers(threshold(ctx, "reduce_scatter_deter_servers")),
        aiv_alltoall_max_per_peer(threshold(ctx, "aiv_alltoall_max_per_peer")),
        aiv_all_reduce_across_servers_few_ranks_max(rank_threshold(ctx, "aiv_all_reduce_across_servers_few_ranks_max")),
        aiv_across_servers_small_ranks_max(rank_threshold(ctx, "aiv_across_servers_small_ranks_max")),
        aiv_across_servers_mid_ranks_max(rank_threshold(ctx, "aiv_across_servers_mid_ranks_max")) {}
  std::uint64_t aiv_all_reduce_across_servers_many_ranks;
  std::uint64_t aiv_all_reduce_across_servers_few_ranks;
  std::uint64_t aiv_all_reduce_entry_per_die_opbase;   // AIV_ALL_REDUCE_A3_ENTRY_SIZE
  std::uint64_t aiv_all_reduce_entry_per_die_graph;
  std::uint64_t aiv_all_reduce_big;   // AIV_ALL_REDUCE_BIG_SIZE
  std::uint64_t small_count_per_rank;   // HCCL_SMALL_COUNT_512_KB, times the ranks
  std::uint64_t flat_nhr_per_die_one_pod;   // times the dies of a server
  std::uint64_t flat_nhr_per_die_pods;   // times the dies of a server
  std::uint64_t mid_count_pods;
  std::uint64_t aiv_all_gather_opbase;
  std::uint64_t aiv_all_gather_graph;
  std::uint64_t aiv_all_gather_small_opbase;
  std::uint64_t aiv_all_gather_small_graph;
  std::uint64_t aiv_across_servers_up_to_6_ranks;
  std::uint64_t aiv_across_servers_up_to_16_ranks;
  std::uint64_t aiv_all_gather_across_servers;
  std::uint64_t aiv_reduce_scatter_across_servers;
  std::uint64_t flat_all_gather_pods;
  std::uint64_t all_gather_small_count;
  std::uint64_t all_gather_small_count_servers_dies_4;
  std::uint64_t all_gather_small_count_servers;
  std::uint64_t aiv_reduce_scatter_opbase;
  std::uint64_t aiv_reduce_scatter_graph;
  std::uint64_t reduce_scatter_deter;
  std::uint64_t reduce_scatter_comm_not_pow2;
  std::uint64_t reduce_scatter_deter_servers;
  std::uint64_t aiv_alltoall_max_per_peer;
  // Rank counts (npu.hccl_selection_ranks).
  std::uint64_t aiv_all_reduce_across_servers_few_ranks_max;   // the "few ranks" of the AIV AllReduce across servers
  std::uint64_t aiv_across_servers_small_ranks_max;   // the ranks of aiv_across_servers_up_to_6_ranks
  std::uint64_t aiv_across_servers_mid_ranks_max;     // the ranks of aiv_across_servers_up_to_16_ranks
};

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
  const A3Thresholds t(ctx);
  switch (spec.op) {
    case CollOp::AllReduce: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op)) {
        if (!one_pod) {
          // AIV stays inside one supernode; HCCL falls back to AI CPU.
        } else if (!single) {
          if ((ranks > t.aiv_all_reduce_across_servers_few_ranks_max && size < t.aiv_all_reduce_across_servers_many_ranks) ||
              (ranks <= t.aiv_all_reduce_across_servers_few_ranks_max && size <= t.aiv_all_reduce_across_servers_few_ranks)) {
            unmodelled("AllReduceMeshAivFor91093Executor", "AIV across the servers of a supernode");
          }
        } else if (!ctx.deterministic && size / dies <= (opbase ? t.aiv_all_reduce_entry_per_die_opbase : t.aiv_all_reduce_entry_per_die_graph)) {
          if (opbase && size < t.aiv_all_reduce_big) {
            return pick("AllReduceMeshAivSmallCountExecutor", plan,
                        "AIV, one server, op-base, <= " + size_words(t.aiv_all_reduce_entry_per_die_opbase) + " per die (AIV_ALL_REDUCE_A3_ENTRY_SIZE)");
          }
          return pick("AllReduceMeshAivExecutor", plan, "AIV, one server");
        }
      }
      const bool ccl_limit = opbase && size > spec.buffer_bytes / 4;
      if (single && inline_reduce && dies > 2 && size <= t.small_count_per_rank * ranks && !ccl_limit) {
        return pick("AllReduceMeshSmallCountExecutor", flat(plan, Level1Algo::HalvingDoubling),
                    "one server, <= " + size_words(t.small_count_per_rank) + " x ranks (HCCL_SMALL_COUNT_512_KB)");
      }
      if (!single && one_pod && dies > 2 && size <= t.flat_nhr_per_die_one_pod * dies) {
        return pick("AllReduceComm", flat(plan, Level1Algo::NHR),
                    "servers of one supernode, <= " + size_words(t.flat_nhr_per_die_one_pod) + " x dies: flat NHR over every rank");
      }
      if (!one_pod && !two_by_two && size <= t.flat_nhr_per_die_pods * dies) {
        return pick("AllReduceComm", flat(plan, Level1Algo::NHR),
                    "several supernodes, <= " + size_words(t.flat_nhr_per_die_pods) + " x dies: flat NHR over every rank");
      }
      if (!one_pod && opbase && size <= t.mid_count_pods) {
        return pick("AllReduceMidCountFor91093Executor", flat(plan, Level1Algo::NHR), "several supernodes, op-base, <= " + size_words(t.mid_count_pods));
      }
      return pick(double_ring ? "AllReduceFastDoubleRingFor91093Executor" : "AllReduceRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::AllGather: {
      if (aiv && single && size <= (opbase ? t.aiv_all_gather_opbase : t.aiv_all_gather_graph)) {
        if (size <= (opbase ? t.aiv_all_gather_small_opbase : t.aiv_all_gather_small_graph)) return pick("AllGatherMeshAivSmallCountExecutor", plan, "AIV, one server, small");
        return pick("AllGatherMeshAivExecutor", plan, "AIV, one server");
      }
      if (aiv && one_pod && !single &&
          ((ranks <= t.aiv_across_servers_small_ranks_max && size <= t.aiv_across_servers_up_to_6_ranks) ||
           (ranks <= t.aiv_across_servers_mid_ranks_max && size <= t.aiv_across_servers_up_to_16_ranks) ||
           size <= t.aiv_all_gather_across_servers)) {
        unmodelled("AllGatherMeshAivFor91093Executor", "AIV across the servers of a supernode");
      }
      if (!one_pod && !two_by_two && size <= t.flat_all_gather_pods) {
        return pick("AllGatherComm", flat(plan, Level1Algo::HalvingDoubling), "several supernodes, <= " + size_words(t.flat_all_gather_pods) + ": flat H-D_R");
      }
      if (single && dies > 2 && size <= t.all_gather_small_count && (!opbase || spec.buffer_bytes >= size * ranks)) {
        return pick("AllGatherSmallCount", flat(plan, Level1Algo::HalvingDoubling), "one server, <= " + size_words(t.all_gather_small_count));
      }
      if (!single && one_pod &&
          size * static_cast<std::uint64_t>(h.servers()) <= (dies % 4 == 0 ? t.all_gather_small_count_servers_dies_4 : t.all_gather_small_count_servers)) {
        return pick("AllGatherSmallCount", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small");
      }
      if (!one_pod && opbase && size <= t.mid_count_pods) {
        return pick("AllGatherMidCountFor91093Executor", flat(plan, Level1Algo::NHR), "several supernodes, op-base, <= " + size_words(t.mid_count_pods));
      }
      return pick(double_ring ? "AlignedAllGatherDoubleRingFor91093Executor" : "AllGatherRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::ReduceScatter: {
      if (aiv && aiv_reduce(spec.dtype, spec.reduce_op) && !ctx.deterministic) {
        if (single && size <= (opbase ? t.aiv_reduce_scatter_opbase : t.aiv_reduce_scatter_graph)) {
          if (opbase) return pick("ReduceScatterMeshAivSmallCountExecutor", plan, "AIV, one server, op-base, <= " + size_words(t.aiv_reduce_scatter_opbase));
          return pick("ReduceScatterMeshAivExecutor", plan, "AIV, one server, graph");
        }
        if (!single && one_pod &&
            ((ranks <= t.aiv_across_servers_small_ranks_max && size <= t.aiv_across_servers_up_to_6_ranks) ||
           (ranks <= t.aiv_across_servers_mid_ranks_max && size <= t.aiv_across_servers_up_to_16_ranks) ||
             size <= t.aiv_reduce_scatter_across_servers)) {
          unmodelled("ReduceScatterMeshAivFor91093Executor", "AIV across the servers of a supernode");
        }
      }
      // 512 KiB / 1 MiB for chips with 7 HCCS ports (assumed for 910C; 1 MiB / 2 MiB otherwise).
      const bool dma_reduce_limit = opbase && power_of_two(spec.ranks) && spec.buffer_bytes * 2 < size * ranks;
      if (single && inline_reduce && dies > 2 && size <= t.reduce_scatter_deter && !dma_reduce_limit) {
        return pick("ReduceScatterDeterExecutor", flat(plan, Level1Algo::HalvingDoubling), "one server, <= " + size_words(t.reduce_scatter_deter));
      }
      if (!single && one_pod && inline_reduce && dies > 2 && !dma_reduce_limit) {
        if (!power_of_two(spec.ranks) && size <= t.reduce_scatter_comm_not_pow2) {
          return pick("ReduceScatterComm", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small, ranks not a power of two");
        }
        if (power_of_two(spec.ranks) && size * static_cast<std::uint64_t>(h.servers()) <= t.reduce_scatter_deter_servers) {
          return pick("ReduceScatterDeterExecutor", flat(plan, Level1Algo::HalvingDoubling), "servers of one supernode, small");
        }
      }
      return pick(double_ring ? "ReduceScatterFastDoubleRingFor91093Executor" : "ReduceScatterRingFor91093Executor", plan,
                  double_ring ? "double-ring topology" : "single-ring topology");
    }
    case CollOp::Broadcast:
      if (aiv) unmodelled("BroadcastMeshAivExecutor", "AIV Broadcast");
      if (!single && one_pod && dies > 2 && size <= t.flat_nhr_per_die_one_pod * dies) {
        return pick("BroadCastComm", flat(plan, Level1Algo::NHR), "servers of one supernode, <= " + size_words(t.flat_nhr_per_die_one_pod) + " x dies: flat NHR");
      }
      if (single && dies > 2 && size <= t.small_count_per_rank * ranks) {
        return pick("BroadCastSmallCountExecutor", flat(plan, Level1Algo::HalvingDoubling), "one server, <= " + size_words(t.small_count_per_rank) + " x ranks");
      }
      return pick("BroadCastRingFor91093Executor", plan, "ring topology");
    case CollOp::Reduce:
      return pick("ReduceRingFor91093Executor", plan, "ring topology");
    case CollOp::AlltoAll:
      if (aiv && single && (spec.alltoallv_counts.empty() ? size <= t.aiv_alltoall_max_per_peer : true)) {
        if (spec.alltoallv_counts.empty() && opbase && size < t.aiv_alltoall_max_per_peer) {
          return pick("AlltoAllMeshAivExecutor", plan, "AIV, one server, <= " + size_words(t.aiv_alltoall_max_per_peer) + " per peer");
        }
      }
      return pick("RunAlltoAllDirectFullmesh", plan, "superpod mode with HCCS between servers: flat full mesh");
  }
  throw std::logic_error("unknown collective");
}

}  // namespace hcclsim
