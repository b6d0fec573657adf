// Unit tests for models/link/channel (the segment network model) through
// SDMA Memcpy tasks: fixed cost, serialization and latency of one hop,
// round-robin sharing of one link direction, independence of the two
// directions, pipelining over two hops, and the SDMA rate caps.
//
// Expected times are computed from the parameters. The channel serializes a
// flow segment by segment, each segment's time rounded up to a picosecond, so
// the exact serialization time is the sum over segments; with a bandwidth of
// 1 GB/s it equals ceil(bytes * 1e12 / bandwidth) exactly.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <string>

#include "models/link/channel.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/platform.h"

using namespace hcclsim;
using hcclsim::testing::kLink;


namespace {

NpuParams small_npu() { return testing::small_npu(4); }
// These tests are about the segment model (test_flow_network.cpp covers the flow model).
TopologySpec two_npus(const NpuParams& npu = small_npu()) {
  TopologySpec spec = testing::two_npus(npu);
  spec.network = NetworkModel::Segment;
  return spec;
}

// Serialization of `bytes` on a channel of `bandwidth` cut into `segment`-byte segments.
Time serialization(std::uint64_t bytes, Bandwidth bandwidth, std::uint64_t segment) {
  Time total;
  for (std::uint64_t left = bytes; left > 0;) {
    const std::uint64_t seg = std::min(left, segment);
    total += bandwidth.transfer_time(seg);
    left -= seg;
  }
  return total;
}
Time serialization(std::uint64_t bytes, const ChannelParams& link) {
  return serialization(bytes, link.bandwidth, link.segment_bytes);
}

BufferRef in(int rank, std::uint64_t offset = 0) { return {rank, BufferKind::Input, offset}; }
BufferRef out(int rank, std::uint64_t offset = 0) { return {rank, BufferKind::Output, offset}; }

}  // namespace

TEST_CASE("one transfer over one link takes fixed cost + serialization + latency", "[channel]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  // Whole segments, a partial last segment, and less than one segment.
  for (const std::uint64_t bytes : {std::uint64_t{8192}, std::uint64_t{10000}, std::uint64_t{1}}) {
    TaskGraph g;
    const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    // At 1 GB/s each byte takes exactly 1000 ps: no rounding anywhere.
    const Time ser = kLink.bandwidth.transfer_time(bytes);
    REQUIRE(ser == Time::from_ps(bytes * 1000));
    REQUIRE(ser == serialization(bytes, kLink));
    INFO("bytes = " << bytes);
    CHECK(r.timings[c].start == r.begin + npu.stream.op_launch);
    CHECK(r.timings[c].end - r.timings[c].start == npu.sdma.task_fixed + ser + kLink.latency);
  }
}

TEST_CASE("serialization rounds each segment up to a whole picosecond", "[channel]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  // 3 GB/s: a 4096-byte segment takes 1365333.33 ps, rounded up to ...334.
  const ChannelParams odd = testing::channel_params(Bandwidth{3'000'000'000}, Time::from_ns(100), 4096);
  spec.links = {LinkSpec{0, 1, "hccs", odd}};
  Platform platform(spec);
  Scheduler sched(platform);

  const std::uint64_t bytes = 3 * 4096 + 100;
  TaskGraph g;
  const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time ser = serialization(bytes, odd);
  const Time whole = odd.bandwidth.transfer_time(bytes);  // ceil(bytes * 1e12 / bw)
  CHECK(ser >= whole);
  CHECK(ser.ps - whole.ps <= 4);  // at most 1 ps per segment
  CHECK(r.timings[c].end - r.timings[c].start == npu.sdma.task_fixed + ser + odd.latency);
}

TEST_CASE("two equal transfers sharing one link direction each get half of it", "[channel][sharing]") {
  const NpuParams npu = small_npu();
  REQUIRE(npu.sdma.engines >= 2);
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 16 * kLink.segment_bytes;
  TaskGraph g;
  const TaskId a = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), bytes);
  const TaskId b = g.copy(g.add_thread(0, "B"), in(0, bytes), out(1, bytes), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());

  const Time ser = serialization(bytes, kLink);
  const Time seg = kLink.bandwidth.transfer_time(kLink.segment_bytes);
  const Time start = r.begin + npu.stream.op_launch;
  const Time shared = start + npu.sdma.task_fixed + ser + ser + kLink.latency;
  CHECK(r.timings[a].start == start);
  CHECK(r.timings[b].start == start);
  for (const TaskId id : {a, b}) {
    INFO("task " << g.describe(id));
    CHECK(r.timings[id].end <= shared);
    CHECK(r.timings[id].end >= shared - seg);  // within one segment time of 2x
  }
  // The link never idles: the later of the two ends exactly at 2x.
  CHECK(std::max(r.timings[a].end, r.timings[b].end) == shared);
}

TEST_CASE("transfers in opposite directions of a link do not share it", "[channel][sharing]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 16 * kLink.segment_bytes;
  TaskGraph g;
  const TaskId fwd = g.copy(g.add_thread(0, "Fwd"), in(0), out(1), bytes);
  const TaskId back = g.copy(g.add_thread(1, "Back"), in(1), out(0), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());

  const Time alone = npu.sdma.task_fixed + serialization(bytes, kLink) + kLink.latency;
  for (const TaskId id : {fwd, back}) {
    CHECK(r.timings[id].start == r.begin + npu.stream.op_launch);
    CHECK(r.timings[id].end - r.timings[id].start == alone);
  }
}

TEST_CASE("a transfer over two hops is cut through: each hop adds only its latency", "[channel][pipeline]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  spec.switches = 1;  // node 2
  spec.links = {LinkSpec{0, 2, "roce", kLink}, LinkSpec{2, 1, "roce", kLink}};
  Platform platform(spec);
  REQUIRE(platform.route(0, 1).size() == 2);
  REQUIRE(platform.route(0, 1)[0] == platform.channel(0, 2));
  REQUIRE(platform.route(0, 1)[1] == platform.channel(2, 1));
  Scheduler sched(platform);

  // Whole segments, and a partial last segment.
  for (const std::uint64_t bytes : {16 * kLink.segment_bytes, 16 * kLink.segment_bytes + 1000}) {
    TaskGraph g;
    const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    INFO("bytes = " << bytes);
    // The second hop starts each segment as its head arrives and ends it as
    // its tail does: no store-and-forward delay.
    const Time expect = npu.sdma.task_fixed + serialization(bytes, kLink) + kLink.latency + kLink.latency;
    CHECK(r.timings[c].end - r.timings[c].start == expect);
  }
}

TEST_CASE("over a slower second hop a cut-through transfer runs at the slower rate", "[channel][pipeline]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  spec.switches = 1;  // node 2
  ChannelParams slow = kLink;
  slow.bandwidth = Bandwidth{kLink.bandwidth.bytes_per_s / 2};
  spec.links = {LinkSpec{0, 2, "roce", kLink}, LinkSpec{2, 1, "roce", slow}};
  Platform platform(spec);
  Scheduler sched(platform);
  const std::uint64_t bytes = 16 * kLink.segment_bytes;
  TaskGraph g;
  const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  // Segments queue at the switch; the slow hop is busy from the first head on.
  CHECK(r.timings[c].end - r.timings[c].start ==
        npu.sdma.task_fixed + kLink.latency + serialization(bytes, slow) + slow.latency);
}

TEST_CASE("a transfer is capped at the SDMA copy rate, a Reduce_Inline at the reduce rate", "[channel][sdma]") {
  NpuParams npu = small_npu();
  npu.sdma.copy_bandwidth = Bandwidth{500'000'000};    // half the link
  npu.sdma.reduce_bandwidth = Bandwidth{250'000'000};  // a quarter
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 4 * kLink.segment_bytes;
  TaskGraph g;
  const ThreadId t = g.add_thread(0, "S");
  const TaskId c = g.copy(t, in(0), out(1), bytes);
  const TaskId red = g.reduce(t, in(0), out(1), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  CHECK(r.timings[c].end - r.timings[c].start ==
        npu.sdma.task_fixed + serialization(bytes, npu.sdma.copy_bandwidth, kLink.segment_bytes) + kLink.latency);
  CHECK(r.timings[red].end - r.timings[red].start ==
        npu.sdma.task_fixed + serialization(bytes, npu.sdma.reduce_bandwidth, kLink.segment_bytes) +
            kLink.latency);
}

TEST_CASE("an on-chip copy uses the NPU's local memory channel", "[channel][local]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 10 * npu.local_memory.segment_bytes + 7;
  TaskGraph g;
  const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(0), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  CHECK(platform.local_memory(0).bytes_carried() == bytes);
  CHECK(platform.channel(0, 1)->bytes_carried() == 0);
  CHECK(r.timings[c].end - r.timings[c].start ==
        npu.sdma.task_fixed + serialization(bytes, npu.local_memory) + npu.local_memory.latency);
}
