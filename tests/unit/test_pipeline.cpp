// HCCL's Pipeline on A2 clusters: slice k+1's first stage overlaps slice k's
// later ones; the data must still come out right, and it must pay off.
#include <catch2/catch.hpp>

#include "sim/executors/hccl_algo.h"
#include "sim/perf/perf.h"
#include "topologies/config.h"

using namespace hcclsim;

namespace {
std::string cluster_file() { return std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json"; }

PerfRow run_one(Platform& platform, CollOp op, std::uint64_t size, const std::string& algo, std::uint64_t buffer) {
  PerfRequest req;
  req.op = op;
  req.ranks = platform.npus();
  req.buffer_bytes = buffer;
  req.algo = parse_hccl_algo(algo, op);
  req.sizes = {size};
  return run_perf(platform, req).front();
}
}  // namespace

TEST_CASE("pipeline all_reduce reduce_scatter and all_gather pass the data check over many slices", "[pipeline]") {
  Platform platform(load_topology(cluster_file(), {}, 3));
  const std::uint64_t buffer = 64 * 1024;  // a quarter holds 16 KiB: many slices, both regions in turn
  for (const CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::AllGather}) {
    for (const std::uint64_t size : {std::uint64_t{48 * 1024}, std::uint64_t{1024 * 1024 + 96}}) {
      const PerfRow row = run_one(platform, op, size, "level1:pipeline", buffer);
      INFO(coll_op_name(op) << " " << size);
      CHECK(row.algo.find("pipeline") != std::string::npos);
      CHECK(row.check == "success");
    }
  }
}

TEST_CASE("pipeline overlaps slices: a large all_reduce is faster than the same stages in turn", "[pipeline]") {
  Platform platform(load_topology(cluster_file(), {}, 2));
  const std::uint64_t buffer = 16 * 1024 * 1024;
  const PerfRow plain = run_one(platform, CollOp::AllReduce, 64 * 1024 * 1024, "level1:ring", buffer);
  const PerfRow piped = run_one(platform, CollOp::AllReduce, 64 * 1024 * 1024, "level1:pipeline", buffer);
  CHECK(plain.check == "success");
  CHECK(piped.check == "success");
  CHECK(piped.algo == "level0:fullmesh;level1:pipeline(ring)");
  // In turn, each slice pays level 0 twice and level 1 once; overlapped, the
  // level-1 time of one slice hides the level-0 time of the next.
  CHECK(piped.time.ps < plain.time.ps * 9 / 10);
}

TEST_CASE("HCCL's rule picks pipeline by size and only where it exists", "[pipeline]") {
  const Hierarchy a2{8, 4, 1};
  const Bandwidth nic{23'700'000'000};
  // AllReduce: once each NPU's level-1 share (size / 8) reaches 1 MiB.
  CHECK_FALSE(choose_algorithm(CollOp::AllReduce, a2, 8 * 1024 * 1024 - 8, nic, {}).pipeline);
  CHECK(choose_algorithm(CollOp::AllReduce, a2, 8 * 1024 * 1024, nic, {}).pipeline);
  // ReduceScatter and AllGather: from 32 KiB.
  CHECK_FALSE(choose_algorithm(CollOp::ReduceScatter, a2, 32 * 1024 - 1, nic, {}).pipeline);
  CHECK(choose_algorithm(CollOp::ReduceScatter, a2, 32 * 1024, nic, {}).pipeline);
  CHECK(choose_algorithm(CollOp::AllGather, a2, 32 * 1024, nic, {}).pipeline);
  // Not for other ops, not with a level-1 algorithm asked for, not on A3 supernodes.
  CHECK_FALSE(choose_algorithm(CollOp::Broadcast, a2, 1 << 30, nic, {}).pipeline);
  AlgoRequest ring;
  ring.level1 = Level1Algo::Ring;
  CHECK_FALSE(choose_algorithm(CollOp::AllReduce, a2, 1 << 30, nic, ring).pipeline);
  const Hierarchy a3{16, 2, 2};
  CHECK_FALSE(choose_algorithm(CollOp::AllReduce, a3, 1 << 30, nic, {}).pipeline);
  AlgoRequest asked;
  asked.pipeline = true;
  CHECK_THROWS_WITH(choose_algorithm(CollOp::AllReduce, a3, 1 << 30, nic, asked), Catch::Contains("A2 clusters"));
  CHECK(parse_hccl_algo("level1:pipeline", CollOp::AllReduce).pipeline);
  CHECK_THROWS_WITH(parse_hccl_algo("level2:pipeline", CollOp::AllReduce), Catch::Contains("not modelled"));
}
