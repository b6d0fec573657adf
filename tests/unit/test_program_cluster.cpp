// Programs whose domains span servers run their collectives hierarchically.
#include <catch2/catch.hpp>

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
  Program program(spec.npus, spec.npu);
  program.set_npus_per_server(spec.npus_per_server);
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

TEST_CASE("a program domain across servers that is not whole servers is refused", "[program][cluster]") {
  const TopologySpec spec =
      load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json", {}, 2);
  Program program(spec.npus, spec.npu);
  program.set_npus_per_server(spec.npus_per_server);
  all_reduce_kernel(program, {6, 7, 8, 9});  // two NPUs of each server
  CHECK_THROWS_WITH(program.build(), Catch::Contains("whole servers"));
}
