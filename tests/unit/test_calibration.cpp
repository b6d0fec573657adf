// Calibration check of the A2 profile against measured point-to-point
// transfers: one SDMA Memcpy from NPU 0 to NPU 1 over HCCS, per block size,
// timed from the task's start to its end, compared with the hixl benchmark.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;

namespace {

struct Measured {
  std::uint64_t block;
  double gbps;
};

// /work/shared/reference/calibration.md, table A2-1 "hixl benchmark, HCCS,
// hixl_cs path, effective GB/s", D2rD (write) column: A2 single machine,
// HCCS, from hicann/hixl benchmarks/performance_en.md (commit 4fc88fa8).
// GB/s = 1e9 bytes per second; K/M are binary.
const Measured kA2_1_D2rD[] = {
    {16 * 1024, 8.903},   {32 * 1024, 12.778},  {64 * 1024, 15.780},   {128 * 1024, 17.787},
    {256 * 1024, 19.018}, {512 * 1024, 19.680}, {1024 * 1024, 20.031}, {2048 * 1024, 20.284},
};

}  // namespace

TEST_CASE("A2 profile: one HCCS Memcpy per block size matches calibration.md A2-1 (D2rD)",
          "[calibration][a2]") {
  const HardwareProfile profile = load_profile(std::string(HCCLSIM_SOURCE_DIR) + "/configs/profiles/a2-910b.json");
  REQUIRE(profile.links.count("hccs") == 1);
  TopologySpec spec;
  spec.name = "a2-pair";
  spec.npus = 2;
  spec.npus_per_server = 8;
  spec.npu = profile.npu;
  spec.links = {LinkSpec{0, 1, "hccs", profile.links.at("hccs")}};
  Platform platform(spec);
  Scheduler sched(platform);

  for (const Measured& m : kA2_1_D2rD) {
    TaskGraph g;
    const TaskId c =
        g.copy(g.add_thread(0, "Plane0"), {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, m.block);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    const Time t = r.timings[c].end - r.timings[c].start;
    const double simulated = static_cast<double>(m.block) / (static_cast<double>(t.ps) / 1e12) / 1e9;
    const double error = (simulated - m.gbps) / m.gbps;
    const std::string line = "block " + std::to_string(m.block / 1024) + "K: " + format_us(t) +
                             " us, simulated " + std::to_string(simulated) + " GB/s, measured " +
                             std::to_string(m.gbps) + " GB/s, error " + std::to_string(error * 100) + "%";
    WARN(line);  // every block is reported; below 256K it is not asserted
    if (m.block >= 256 * 1024) {
      INFO(line);
      CHECK(std::fabs(error) <= 0.10);
    }
  }
}
