// A program's collectives run the executor `hcclsim perf` selects for their
// domain: across servers hierarchically, on A3 A3's executors.
#include <catch2/catch.hpp>

#include "sim/perf/perf.h"
#include "sim/program/program.h"
#include "sim/scheduler.h"
#include "topologies/config.h"

using namespace hcclsim;

namespace {
// Every rank of `ranks` prepares, commits and waits for one AllReduce on domain 0.
void all_reduce_kernel(Program& program, const std::vector<int>& ranks) {
  REQUIRE(program.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    REQUIRE(program.hccl_init(r, CoreKind::Aiv, 0, 0) == HCCL_SUCCESS);
    REQUIRE(program.hccl_set_tiling(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
    Program::PrepareArgs args;
    args.op = CollOp::AllReduce;
    args.count = 1 << 20;
    HcclResult result = HCCL_E_INTERNAL;
    const HcclHandle h = program.hccl_prepare(r, CoreKind::Aiv, 0, args, &result);
    REQUIRE(result == HCCL_SUCCESS);
    REQUIRE(program.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(program.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
  }
}
}  // namespace

TEST_CASE("a program domain over two whole A2 servers runs its AllReduce across them", "[program][cluster]") {
  const TopologySpec spec =
      load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json", {}, 2);
  Program program(spec);
  std::vector<int> all(16);
  for (int r = 0; r < 16; ++r) all[static_cast<std::size_t>(r)] = r;
  all_reduce_kernel(program, all);
  const Program::Built built = program.build();
  // Level-1 streams between the servers exist, and the run finishes.
  bool level1 = false;
  for (const Thread& th : built.graph.threads()) level1 = level1 || th.name.find("L1/") != std::string::npos;
  CHECK(level1);
  Platform platform(spec);
  Scheduler sched(platform);
  const RunResult r = sched.run(built.graph);
  CHECK(r.failure.empty());
}

TEST_CASE("a program domain of part of two servers runs the executor perf selects for that group", "[program][cluster]") {
  const TopologySpec spec =
      load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json", {}, 2);
  Program program(spec);
  all_reduce_kernel(program, {6, 7, 8, 9});  // two NPUs of each server
  const Program::Built built = program.build();
  Platform platform(spec);
  Scheduler sched(platform);
  const RunResult r = sched.run(built.graph);
  CHECK(r.failure.empty());
  // HCCL's hierarchical executor for 2 + 2 ranks: a phase inside each
  // server, one between them (P1), one inside again, as perf builds it.
  bool between = false;
  for (const Thread& th : built.graph.threads()) between = between || th.name.find("/P1/") != std::string::npos;
  CHECK(between);
}

TEST_CASE("a program's collective runs the executor perf runs for the same ranks and size, on A3 too", "[program][cluster]") {
  for (const char* topology : {"a2-server.json", "a3-server.json"}) {
    INFO(topology);
    const TopologySpec spec = load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/" + topology);
    Program program(spec);
    all_reduce_kernel(program, {0, 1, 2, 3, 4, 5, 6, 7});
    const Program::Built built = program.build();
    REQUIRE(built.handles.size() == 1);
    PerfRequest request;
    request.op = CollOp::AllReduce;
    request.ranks = 8;
    request.dtype = DataType::Fp16;
    request.sizes = {(std::uint64_t{1} << 20) * 2};   // count 2^20 fp16 elements
    request.buffer_bytes = spec.npu.hccl_buffer_bytes;
    const std::string perf_executor = estimate_perf(spec, request).front().executor;
    CHECK(built.handles.front().executor == perf_executor);
    CHECK(built.handles.front().ranks == 8);
  }
  // (Before, every program domain inside a server ran A2's mesh: an A3 program too.)
}
