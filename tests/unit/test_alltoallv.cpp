// AlltoAllV with per-peer counts from a distribution (hcclsim perf alltoallv --vcounts).
#include <catch2/catch.hpp>

#include <numeric>

#include "sim/perf/perf.h"
#include "topologies/config.h"

using namespace hcclsim;

TEST_CASE("alltoallv distributions split each rank's elements as documented", "[vcounts]") {
  const auto uniform = alltoallv_counts("uniform", 4, 400);
  for (const auto& row : uniform) CHECK(row == std::vector<std::uint64_t>{100, 100, 100, 100});

  // zipf:1 on 4 ranks: shares 1, 1/2, 1/3, 1/4 of 25/12, starting at the rank itself.
  const auto zipf = alltoallv_counts("zipf:1", 4, 2500);
  CHECK(zipf[0] == std::vector<std::uint64_t>{1200, 600, 400, 300});
  CHECK(zipf[1] == std::vector<std::uint64_t>{300, 1200, 600, 400});

  // random: fixed by its seed, each share within [0, 2 x mean], seeds differ.
  const auto a = alltoallv_counts("random:7", 8, 8000);
  CHECK(a == alltoallv_counts("random:7", 8, 8000));
  CHECK(a != alltoallv_counts("random:8", 8, 8000));
  for (const auto& row : a) {
    for (std::uint64_t c : row) CHECK(c <= 2000);
  }

  CHECK_THROWS_AS(alltoallv_counts("bogus", 4, 100), std::invalid_argument);
  CHECK_THROWS_AS(alltoallv_counts("zipf:", 4, 100), std::invalid_argument);
  CHECK_THROWS_AS(alltoallv_counts("random:x", 4, 100), std::invalid_argument);
}

TEST_CASE("alltoallv across two A2 servers passes the data check for every distribution", "[vcounts]") {
  Platform platform(load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json", {}, 2));
  for (const char* dist : {"uniform", "random:3", "zipf:1.5"}) {
    PerfRequest req;
    req.op = CollOp::AlltoAll;
    req.ranks = platform.npus();
    req.buffer_bytes = 256 * 1024;  // several loops for the larger size
    req.alltoallv_distribution = dist;
    req.sizes = {64 * 1024, 4 * 1024 * 1024 + 6};
    for (const PerfRow& row : run_perf(platform, req)) {
      INFO(dist << " " << row.data_size);
      CHECK(row.op_name == "alltoallv");
      CHECK(row.algo == "level1:pairwise");
      CHECK(row.check == "success");
    }
  }
}
