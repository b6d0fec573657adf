// Runs on one elaborated platform do not disturb each other, and a
// simulation repeats itself exactly.
#include <catch2/catch.hpp>

#include "sim/perf/perf.h"
#include "topologies/config.h"

using namespace hcclsim;

TEST_CASE("the same collective run again later on the same platform takes exactly as long", "[determinism]") {
  Platform platform(load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-cluster.json", {}, 2));
  PerfRequest req;
  req.op = CollOp::AllReduce;
  req.ranks = platform.npus();
  req.buffer_bytes = platform.spec().npu.hccl_buffer_bytes;
  // A different size in between leaves the hardware idle again before the repeat.
  req.sizes = {1 << 20, 8 << 20, 1 << 20};
  const std::vector<PerfRow> rows = run_perf(platform, req);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].check == "success");
  CHECK(rows[2].check == "success");
  CHECK(rows[0].time == rows[2].time);
  CHECK(rows[0].activations == rows[2].activations);
  CHECK(rows[1].time > rows[0].time);
}
