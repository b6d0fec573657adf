// AllReduceMeshMidCountLoopExecutor (HCCL_DETERMINISTIC=true on one A2
// server of 8; sim/executors/mesh_a2.cpp all_reduce_local_reduce, its closed
// form in mesh_estimate.cpp): when HCCL's selection names it, what its graph
// holds, that the data check finds every rank's sum, and that the closed
// form follows the builder's task order exactly (two derivations of the
// same schedule, written apart).
// SystemC elaborates once per process: one Platform per TEST_CASE.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.h"
#include "sim/executors/executor.h"
#include "sim/perf/perf.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

ExecContext a2_server(int ranks, WorkflowMode mode) {
  ExecContext ctx;
  ctx.hccl_rules = HcclRules::A2;
  ctx.hccl = testing::shipped_hccl_api(HcclRules::A2);
  ctx.hierarchy = Hierarchy{ranks, 1, 1};
  ctx.mode = mode;
  ctx.deterministic = true;
  return ctx;
}

CollectiveSpec all_reduce(int ranks, std::uint64_t bytes) {
  CollectiveSpec s;
  s.op = CollOp::AllReduce;
  s.ranks = ranks;
  s.dtype = DataType::Fp16;
  s.count = bytes / 2;
  s.buffer_bytes = 200 * MiB;
  return s;
}

// `ranks` of the A2 server at an odd size (parts not a whole number of
// alignments), one loop and many loops of an 8 MiB buffer, fp32, in both
// models: HCCL's selection names `executor`, the data check finds every
// rank's sum, and the closed form is within `tolerance` of the detailed model.
void check_runs(int ranks, const std::string& executor, double tolerance) {
  Platform platform(load_topology(testing::source_file("configs/topologies/a2-server.json")));
  PerfRequest request;
  request.op = CollOp::AllReduce;
  request.ranks = ranks;
  request.deterministic = true;
  request.check = true;
  request.dtype = DataType::Fp32;
  request.buffer_bytes = 8 * MiB;
  request.sizes = {3'000'000, 4 * MiB, 100 * MiB};
  const std::vector<PerfRow> detailed = run_perf(platform, request);
  const std::vector<PerfRow> estimated = estimate_perf(platform.spec(), request);
  REQUIRE(detailed.size() == 3);
  REQUIRE(estimated.size() == 3);
  for (std::size_t i = 0; i < detailed.size(); ++i) {
    INFO(request.sizes[i] << " B: detailed " << detailed[i].time.us() << " us, estimate " << estimated[i].time.us() << " us");
    CHECK(detailed[i].executor == executor);
    CHECK(detailed[i].check == "success");
    CHECK(std::abs(estimated[i].time.us() / detailed[i].time.us() - 1) < tolerance);
  }
}

}  // namespace

TEST_CASE("deterministic AllReduce on one A2 server: HCCL's count types pick the executor", "[executors][deterministic]") {
  // op-base: above 128 KiB on 8 ranks it is the mid-count loop
  // (GetCountTypeForDeterAllReduce); the boundary itself is the small count.
  CHECK(select_executor(all_reduce(8, 128 * KiB + 2), a2_server(8, WorkflowMode::OpBase)).executor ==
        "AllReduceMeshMidCountLoopExecutor");
  CHECK(select_executor(all_reduce(8, 1 * 1024 * MiB), a2_server(8, WorkflowMode::OpBase)).executor ==
        "AllReduceMeshMidCountLoopExecutor");
  CHECK_THROWS_WITH(select_executor(all_reduce(8, 128 * KiB), a2_server(8, WorkflowMode::OpBase)),
                    Contains("AllReduceMeshSmallCountExecutor (deterministic templates)"));
  // Other rank counts run the one-shot loop (ChunkMesh).
  CHECK(select_executor(all_reduce(4, 1 * MiB), a2_server(4, WorkflowMode::OpBase)).executor ==
        "AllReduceMeshOneshotLoopExecutor");
  CHECK(select_executor(all_reduce(6, 128 * KiB + 2), a2_server(6, WorkflowMode::OpBase)).executor ==
        "AllReduceMeshOneshotLoopExecutor");
  // Graph mode: medium up to 4 MiB on 8 ranks, a form not modelled.
  CHECK_THROWS_WITH(select_executor(all_reduce(8, 1 * MiB), a2_server(8, WorkflowMode::Graph)),
                    Contains("AllReduceMeshMidCountLoopExecutor (graph mode)"));
  CHECK_THROWS_WITH(select_executor(all_reduce(8, 8 * MiB), a2_server(8, WorkflowMode::Graph)),
                    Contains("AllReduceMeshOneshotLoopExecutor (graph mode)"));
  const Executor* oneshot = find_executor("AllReduceMeshOneshotLoopExecutor");
  REQUIRE(oneshot != nullptr);
  CHECK(oneshot->refuses(all_reduce(3, MiB), a2_server(3, WorkflowMode::OpBase)).empty());
  CHECK_THAT(oneshot->refuses(all_reduce(2, MiB), a2_server(2, WorkflowMode::OpBase)), Contains("3 ranks or more"));
  // Asked for by name, the executor holds to what HCCL runs it on.
  const Executor* mid = find_executor("AllReduceMeshMidCountLoopExecutor");
  REQUIRE(mid != nullptr);
  CHECK(mid->refuses(all_reduce(8, MiB), a2_server(8, WorkflowMode::OpBase)).empty());
  CHECK_THAT(mid->refuses(all_reduce(4, MiB), a2_server(4, WorkflowMode::OpBase)), Contains("8 ranks"));
  CHECK_THAT(mid->refuses(all_reduce(8, MiB), a2_server(8, WorkflowMode::Graph)), Contains("op-base"));
}

TEST_CASE("deterministic AllReduce: peers write into the owner's slots, the owner folds them on chip, p-2 folds a loop",
          "[executors][deterministic]") {
  const CollectiveSpec s = all_reduce(8, 3 * MiB);  // one loop
  const TaskGraph g = find_executor("AllReduceMeshMidCountLoopExecutor")->build(s, a2_server(8, WorkflowMode::OpBase), {});
  int folds = 0, remote_writes = 0, remote_reduces = 0, remote_reads = 0;
  for (TaskId id = 0; id < g.tasks().size(); ++id) {
    const Task& t = g.task(id);
    if (t.kind != TaskKind::Memcpy && t.kind != TaskKind::ReduceInline) continue;
    const int rank = g.thread(t.thread).rank;
    const bool remote = t.src.rank != t.dst.rank;
    if (!remote && t.kind == TaskKind::ReduceInline) ++folds;
    if (remote && t.dst.rank != rank && t.kind == TaskKind::Memcpy) ++remote_writes;
    if (remote && t.dst.rank != rank && t.kind == TaskKind::ReduceInline) ++remote_reduces;
    if (remote && t.src.rank != rank) ++remote_reads;
  }
  CHECK(folds == 8 * 6);            // p - 2 on each rank
  CHECK(remote_writes == 8 * 6);    // rounds 1..p-2 write plainly
  CHECK(remote_reduces == 8 * 1);   // the last round reduces onto the staged slice
  CHECK(remote_reads == 8 * 7);     // the all-gather reads every peer's slice
}

TEST_CASE("deterministic AllReduce: every rank gets the sum, and the closed form times the builder's order exactly",
          "[executors][deterministic][estimate]") {
  check_runs(8, "AllReduceMeshMidCountLoopExecutor", 1e-6);
}

TEST_CASE("deterministic AllReduce on 6 ranks: the one-shot loop reads every part once, sums right, and its closed form is within 0.5%",
          "[executors][deterministic][estimate]") {
  const CollectiveSpec s = all_reduce(6, 3 * MiB);  // one loop
  const TaskGraph g = find_executor("AllReduceMeshOneshotLoopExecutor")->build(s, a2_server(6, WorkflowMode::OpBase), {});
  int reduce_reads = 0, reads = 0;
  for (TaskId id = 0; id < g.tasks().size(); ++id) {
    const Task& t = g.task(id);
    if ((t.kind != TaskKind::Memcpy && t.kind != TaskKind::ReduceInline) || t.src.rank == t.dst.rank) continue;
    CHECK(t.src.rank != g.thread(t.thread).rank);  // every peer move is a read
    ++(t.kind == TaskKind::ReduceInline ? reduce_reads : reads);
  }
  CHECK(reduce_reads == 6 * 5 * 5);  // p-1 parts in each of p-1 rounds, a rank
  CHECK(reads == 6 * 5);             // the all-gather

  check_runs(6, "AllReduceMeshOneshotLoopExecutor", 0.005);
}
