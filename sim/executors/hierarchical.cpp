// Executors that compose level-0 and level-1 algorithms (A2 clusters), and
// the flat "Comm" executors HCCL falls back to (one level-1 algorithm over
// every rank of the communicator). Compositions live in
// sim/executors/hierarchy, level-1 algorithms in sim/executors/level1.
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

const std::string kBase = "hcomm src/legacy/ascend910/algorithm/impl/coll_executor/";

// Single server: the mesh-atomic level-0 form (copy in, reads with inline
// reduce, copy out); across servers: level 0, level 1 on the rail, level 0.
Executor mesh_executor(const std::string& name, CollOp op, const std::string& file, bool pipeline) {
  return Executor{
      name, kBase + file,
      pipeline ? "HCCL's Pipeline: level-0 mesh stages of slice k+1 overlap slice k's level-1 stage"
               : "copy into CCL_IN; mesh stages by reads (inline reduce in reduce-scatters), one stream per peer; "
                 "across servers level 1 on the rail between level-0 stages; copy out",
      [op, pipeline](const CollectiveSpec& s, const ExecContext& c) -> std::string {
        if (s.op != op) return "runs " + coll_op_title(op) + " only";
        if (pipeline && !pipeline_supported(op, c.hierarchy, Level0Algo::Mesh)) {
          return "needs servers of at most 8 NPUs in one level (A2 clusters)";
        }
        return {};
      },
      [](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan& plan) {
        if (c.hierarchy.servers() <= 1) return build_collective(s, plan.level0);
        return build_hierarchical(s, c.hierarchy, plan);
      }};
}

// One level-1 algorithm over every rank (AllReduceComm and kin).
Executor flat_executor(const std::string& name, CollOp op, const std::string& file, Level1Algo algo,
                       const std::string& what) {
  return Executor{
      name, kBase + file, "one " + level1_algo_name(algo) + " over every rank of the communicator" + what,
      [op](const CollectiveSpec& s, const ExecContext&) {
        return s.op == op ? std::string() : "runs " + coll_op_title(op) + " only";
      },
      // The selection puts the algorithm in plan.level1 (`algo` unless HCCL_ALGO asked otherwise).
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan& plan) {
        CollectiveSpec one = s;
        one.one_shot = plan.one_shot;
        return build_level1(one, plan.level1);
      }};
}

}  // namespace

void register_hierarchical_executors(std::vector<Executor>& out) {
  out.push_back(mesh_executor("AllReduceMeshExecutor", CollOp::AllReduce, "coll_all_reduce/coll_all_reduce_mesh_executor.cc", false));
  out.push_back(mesh_executor("AllReduceMeshOpbasePipelineExecutor", CollOp::AllReduce,
                              "coll_all_reduce/coll_all_reduce_mesh_opbase_pipeline_executor.cc", true));
  out.push_back(mesh_executor("AllGatherMeshExecutor", CollOp::AllGather, "coll_all_gather/coll_all_gather_mesh_executor.cc", false));
  out.push_back(mesh_executor("AllGatherMeshOpbasePipelineExecutor", CollOp::AllGather,
                              "coll_all_gather/coll_all_gather_mesh_opbase_pipeline_executor.cc", true));
  out.push_back(mesh_executor("ReduceScatterMeshExecutor", CollOp::ReduceScatter,
                              "coll_reduce_scatter/coll_reduce_scatter_mesh_executor.cc", false));
  out.push_back(mesh_executor("ReduceScatterMeshOpbasePipelineExecutor", CollOp::ReduceScatter,
                              "coll_reduce_scatter/coll_reduce_scatter_mesh_opbase_pipeline_executor.cc", true));
  out.push_back(mesh_executor("AllGatherMeshGraphExecutor", CollOp::AllGather, "coll_all_gather/coll_all_gather_mesh_graph_executor.cc", false));
  out.push_back(mesh_executor("ReduceScatterMeshGraphExecutor", CollOp::ReduceScatter,
                              "coll_reduce_scatter/coll_reduce_scatter_mesh_graph_executor.cc", false));
  out.push_back(mesh_executor("RunAlltoAllVTwoLevelPipeline", CollOp::AlltoAll,
                              "coll_all_to_all/coll_all_to_all_v_two_level_pipeline_executor.cc (modelled as a flat pairwise exchange)",
                              false));
  out.push_back(flat_executor("AllReduceComm", CollOp::AllReduce, "coll_all_reduce/coll_all_reduce_comm_executor.cc",
                              Level1Algo::NHR, " (HCCL's choice for small data across A3 servers)"));
  out.push_back(flat_executor("AllGatherComm", CollOp::AllGather, "coll_all_gather/coll_all_gather_comm_executor.cc",
                              Level1Algo::NHR, ""));
  out.push_back(flat_executor("ReduceScatterComm", CollOp::ReduceScatter,
                              "coll_reduce_scatter/coll_reduce_scatter_comm_executor.cc", Level1Algo::NHR, ""));
  out.push_back(flat_executor("BroadCastComm", CollOp::Broadcast, "coll_broadcast/coll_broadcast_comm_executor.cc",
                              Level1Algo::NHR, ""));
  out.push_back(flat_executor("AllReduceMidCountFor91093Executor", CollOp::AllReduce,
                              "coll_all_reduce/coll_all_reduce_mid_count_for_910_93_executor.cc (NHR one-shot in the "
                              "supernode, then across supernodes)",
                              Level1Algo::NHR, ", modelled as one NHR over every rank"));
  out.push_back(flat_executor("AllGatherMidCountFor91093Executor", CollOp::AllGather,
                              "coll_all_gather/coll_all_gather_mid_count_for_910_93_executor.cc", Level1Algo::NHR,
                              ", modelled as one NHR over every rank"));
  out.push_back(flat_executor("AllGatherSmallCount", CollOp::AllGather,
                              "coll_all_gather/coll_all_gather_small_count_executor.cc (HD_STAGE template)",
                              Level1Algo::HalvingDoubling, ", modelled by H-D_R"));
  out.push_back(flat_executor("ReduceScatterDeterExecutor", CollOp::ReduceScatter,
                              "coll_reduce_scatter/coll_reduce_scatter_deter_executor.cc (LOCAL_REDUCE / HDSTAGE templates)",
                              Level1Algo::HalvingDoubling, ", modelled by H-D_R"));
  out.push_back(flat_executor("BroadCastSmallCountExecutor", CollOp::Broadcast,
                              "coll_broadcast/coll_broadcast_small_count_executor.cc", Level1Algo::HalvingDoubling,
                              ", modelled by H-D_R"));
}

}  // namespace hcclsim
