// The ring-family executors of Atlas A3 (910_93): inside a server the level-0
// double ring (single ring when the server is not a full 16-die box), across
// the servers of a supernode one level-1 plane per die index, across
// supernodes level 2 (hcomm src/legacy/ascend910/algorithm/impl/
// coll_executor/*/ *_for_910_93_executor.cc). The level-0 ring forms live in
// sim/executors/ring.cpp; the composition in sim/executors/hierarchy.
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

Executor ring_executor(const std::string& name, CollOp op, int rings, const std::string& file, const std::string& what) {
  const std::string base = "hcomm src/legacy/ascend910/algorithm/impl/coll_executor/";
  return Executor{
      name, base + file,
      std::string(rings == 2 ? "double ring (two opposite rings, half of every slice each, 4 streams)"
                             : "single ring (2 streams)") +
          "; receiver-side reads" + what + "; across servers: level-0 ring, level-1 planes per die index, level 2",
      [op](const CollectiveSpec& s, const ExecContext&) {
        return s.op == op ? std::string() : "runs " + coll_op_title(op) + " only";
      },
      [rings](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan& plan) {
        if (c.hierarchy.servers() <= 1) return build_collective(s, rings == 2 ? Level0Algo::DoubleRing : Level0Algo::Ring);
        AlgoPlan levels = plan;
        levels.level0 = rings == 2 ? Level0Algo::DoubleRing : Level0Algo::Ring;
        return build_hierarchical(s, c.hierarchy, levels);
      }};
}

}  // namespace

void register_ring_executors(std::vector<Executor>& out) {
  out.push_back(ring_executor("AllReduceFastDoubleRingFor91093Executor", CollOp::AllReduce, 2,
                              "coll_all_reduce/coll_all_reduce_fast_double_ring_for_910_93_executor.cc",
                              " with inline reduce; zero copy from the input"));
  out.push_back(ring_executor("AllReduceRingFor91093Executor", CollOp::AllReduce, 1,
                              "coll_all_reduce/coll_all_reduce_ring_for_910_93_executor.cc", " with inline reduce"));
  out.push_back(ring_executor("AlignedAllGatherDoubleRingFor91093Executor", CollOp::AllGather, 2,
                              "coll_all_gather/coll_aligned_all_gather_double_ring_for_910_93_executor.cc", ""));
  out.push_back(ring_executor("AllGatherRingFor91093Executor", CollOp::AllGather, 1,
                              "coll_all_gather/coll_all_gather_ring_for_910_93_executor.cc", ""));
  out.push_back(ring_executor("ReduceScatterFastDoubleRingFor91093Executor", CollOp::ReduceScatter, 2,
                              "coll_reduce_scatter/coll_reduce_scatter_fast_double_ring_for_910_93_executor.cc",
                              " with inline reduce"));
  out.push_back(ring_executor("ReduceScatterRingFor91093Executor", CollOp::ReduceScatter, 1,
                              "coll_reduce_scatter/coll_reduce_scatter_ring_for_910_93_executor.cc", " with inline reduce"));
  out.push_back(ring_executor("BroadCastRingFor91093Executor", CollOp::Broadcast, 2,
                              "coll_broadcast/coll_broadcast_ring_for_910_93_executor.cc",
                              " (modelled as a pipelined chain from the root along each ring)"));
  out.push_back(ring_executor("ReduceRingFor91093Executor", CollOp::Reduce, 2,
                              "coll_reduce/coll_reduce_ring_for_910_93_executor.cc",
                              " (reduce-scatter on the rings, then the root reads every slice)"));
  // A2 with level0:ring (HCCL's ring topology, e.g. a standard PCIe card).
  out.push_back(ring_executor("AllReduceRingExecutor", CollOp::AllReduce, 1, "coll_all_reduce/coll_all_reduce_ring_executor.cc", ""));
  out.push_back(ring_executor("AllGatherRingExecutor", CollOp::AllGather, 1, "coll_all_gather/coll_all_gather_ring_executor.cc", ""));
  out.push_back(ring_executor("ReduceScatterRingExecutor", CollOp::ReduceScatter, 1,
                              "coll_reduce_scatter/coll_reduce_scatter_ring_executor.cc", ""));
  out.push_back(ring_executor("BroadCastRingExecutor", CollOp::Broadcast, 1, "coll_broadcast/coll_broadcast_ring_executor.cc", ""));
  out.push_back(ring_executor("ReduceRingPlusHd", CollOp::Reduce, 1, "coll_reduce/coll_reduce_ring_plus_hd_executor.cc", ""));
}

}  // namespace hcclsim
