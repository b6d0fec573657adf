// Unit tests for models/link/flow_network (the flow-level network model)
// through SDMA Memcpy / Reduce_Inline tasks: a flow alone, equal sharing,
// max-min with rate caps and with a bottleneck elsewhere, a flow joining
// mid-way, cut-through over three hops, link statistics; then a grid of
// collectives comparing the flow model with the segment model.
//
// Expected times are computed from the parameters (1 GB/s: one byte per
// 1000 ps, so every drain below is a whole number of picoseconds).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <array>
#include <cmath>
#include <systemc>
#include <string>
#include <vector>

#include "models/link/channel.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using hcclsim::testing::kLink;

namespace {

NpuParams small_npu() { return testing::small_npu(4); }
TopologySpec flow_model(TopologySpec spec) {
  spec.network = NetworkModel::Flow;
  return spec;
}
TopologySpec two_npus(const NpuParams& npu = small_npu()) { return flow_model(testing::two_npus(npu)); }
// NPUs 0, 1, 2, each linked to switch 3 by the channel given for it.
TopologySpec three_npus_on_a_switch(const NpuParams& npu, const std::array<ChannelParams, 3>& uplinks) {
  TopologySpec spec = two_npus(npu);
  spec.npus = 3;
  spec.npus_per_server = 3;
  spec.switches = 1;
  spec.links = {LinkSpec{0, 3, "roce", uplinks[0]}, LinkSpec{1, 3, "roce", uplinks[1]}, LinkSpec{2, 3, "roce", uplinks[2]}};
  return spec;
}

// Two platforms in one process: SystemC renames the second one's modules
// (npu0_engine_0, ...) and would warn about each.
void quiet_renames() {
  sc_core::sc_report_handler::set_actions("object already exists", sc_core::SC_DO_NOTHING);
}

BufferRef in(int rank, std::uint64_t offset = 0) { return {rank, BufferKind::Input, offset}; }
BufferRef out(int rank, std::uint64_t offset = 0) { return {rank, BufferKind::Output, offset}; }

// Time at 1 GB/s: 1000 ps per byte.
Time at_1gbps(std::uint64_t bytes) { return Time::from_ps(bytes * 1000); }

TaskId delay(TaskGraph& g, ThreadId thread, Time duration) {
  Task t;
  t.kind = TaskKind::Delay;
  t.thread = thread;
  t.duration = duration;
  return g.add(t);
}

}  // namespace

TEST_CASE("flow model: a flow alone takes fixed cost + bytes / bandwidth + latency, exactly", "[flow]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  for (const std::uint64_t bytes : {std::uint64_t{8192}, std::uint64_t{10000}, std::uint64_t{1}, std::uint64_t{12388}}) {
    TaskGraph g;
    const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    INFO("bytes = " << bytes);
    CHECK(r.timings[c].start == r.begin + npu.stream.op_launch);
    CHECK(r.timings[c].end - r.timings[c].start == npu.sdma.task_fixed + at_1gbps(bytes) + kLink.latency);
  }
  CHECK(platform.channel(0, 1)->bytes_carried() == 8192 + 10000 + 1 + 12388);
}

TEST_CASE("flow model: a rate that is not a whole number of bytes per picosecond rounds the drain up once",
          "[flow]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  // 3 GB/s: bytes / bandwidth is not a whole number of picoseconds.
  const ChannelParams odd = testing::channel_params(Bandwidth{3'000'000'000}, Time::from_ns(100), 4096);
  spec.links = {LinkSpec{0, 1, "hccs", odd}};
  Platform platform(spec);
  Scheduler sched(platform);
  const std::uint64_t bytes = 3 * 4096 + 100;
  TaskGraph g;
  const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  CHECK(r.timings[c].end - r.timings[c].start == npu.sdma.task_fixed + odd.bandwidth.transfer_time(bytes) + odd.latency);
}

TEST_CASE("flow model: two flows sharing one channel each get half of it and end together", "[flow][sharing]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 50000;
  TaskGraph g;
  const TaskId a = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), bytes);
  const TaskId b = g.copy(g.add_thread(0, "B"), in(0, bytes), out(1, bytes), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time start = r.begin + npu.stream.op_launch;
  for (const TaskId id : {a, b}) {
    INFO("task " << g.describe(id));
    CHECK(r.timings[id].start == start);
    CHECK(r.timings[id].end == start + npu.sdma.task_fixed + at_1gbps(2 * bytes) + kLink.latency);
  }
  // The channel was busy while either flow drained.
  CHECK(platform.channel(0, 1)->bytes_carried() == 2 * bytes);
  CHECK(platform.channel(0, 1)->busy_time() == at_1gbps(2 * bytes));
}

TEST_CASE("flow model: a flow capped by its SDMA rate leaves the rest of the channel to another (max-min)",
          "[flow][sharing]") {
  NpuParams npu = small_npu();
  npu.sdma.copy_bandwidth = Bandwidth{250'000'000};  // a quarter of the link
  // reduce_bandwidth stays far above the link: no cap.
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 30000;
  TaskGraph g;
  const TaskId capped = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), bytes);
  const TaskId free = g.reduce(g.add_thread(0, "B"), in(0, bytes), out(1, bytes), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time flows_start = r.begin + npu.stream.op_launch + npu.sdma.task_fixed;
  // The capped flow runs at 0.25 GB/s throughout; the other takes the 0.75 GB/s left.
  CHECK(r.timings[free].end == flows_start + Time::from_ps(bytes * 1000 * 4 / 3) + kLink.latency);
  CHECK(r.timings[capped].end == flows_start + Time::from_ps(bytes * 1000 * 4) + kLink.latency);
}

TEST_CASE("flow model: a flow held back by a slower channel elsewhere leaves the rest of a shared one (max-min)",
          "[flow][sharing]") {
  const NpuParams npu = small_npu();
  // npu2's uplink runs at a quarter of the others.
  ChannelParams slow = kLink;
  slow.bandwidth = Bandwidth{250'000'000};
  Platform platform(three_npus_on_a_switch(npu, {kLink, kLink, slow}));
  Scheduler sched(platform);

  const std::uint64_t bytes = 30000;
  TaskGraph g;
  const TaskId fast = g.copy(g.add_thread(0, "A"), in(0), out(1, 0), bytes);
  const TaskId held = g.copy(g.add_thread(2, "B"), in(2), out(1, bytes), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time flows_start = r.begin + npu.stream.op_launch + npu.sdma.task_fixed;
  // Both cross switch3 -> npu1: the held-back flow takes 0.25 GB/s of it, the other the 0.75 left.
  CHECK(r.timings[fast].end == flows_start + Time::from_ps(bytes * 1000 * 4 / 3) + kLink.latency + kLink.latency);
  CHECK(r.timings[held].end == flows_start + Time::from_ps(bytes * 1000 * 4) + slow.latency + kLink.latency);
}

TEST_CASE("flow model: flows that all cross the same two channels split the narrower one equally", "[flow][sharing]") {
  const NpuParams npu = small_npu();
  // npu0 -> switch3 at 1 GB/s, switch3 -> npu1 at 0.6 GB/s: three flows
  // over both get 0.2 GB/s each (5000 ps a byte), the wider channel's third
  // (0.33 GB/s) not reached.
  ChannelParams narrow = kLink;
  narrow.bandwidth = Bandwidth{600'000'000};
  Platform platform(three_npus_on_a_switch(npu, {kLink, narrow, kLink}));
  Scheduler sched(platform);

  const std::uint64_t bytes = 30000;
  TaskGraph g;
  std::vector<TaskId> flows;
  for (int i = 0; i < 3; ++i) {
    flows.push_back(g.copy(g.add_thread(0, "T" + std::to_string(i)), in(0, i * bytes), out(1, i * bytes), bytes));
  }
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time flows_start = r.begin + npu.stream.op_launch + npu.sdma.task_fixed;
  for (const TaskId id : flows) {
    INFO("task " << g.describe(id));
    CHECK(r.timings[id].end == flows_start + Time::from_ps(bytes * 5000) + kLink.latency + narrow.latency);
  }
}

TEST_CASE("flow model: a flow joining mid-way halves the first one's rate at exactly that time", "[flow][sharing]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  const std::uint64_t bytes = 40000;
  const Time wait = Time::from_us(10);
  TaskGraph g;
  const TaskId first = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), bytes);
  const ThreadId late = g.add_thread(0, "B");
  delay(g, late, wait);
  const TaskId second = g.copy(late, in(0, bytes), out(1, bytes), bytes);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());

  const Time first_flow = r.timings[first].start + npu.sdma.task_fixed;
  const Time second_flow = r.timings[second].start + npu.sdma.task_fixed;
  const Time head = second_flow - first_flow;  // the first flow alone: the delay and one dispatch gap
  REQUIRE(head == wait + npu.stream.task_dispatch);
  REQUIRE(head.ps % 1000 == 0);
  const std::uint64_t moved_alone = head.ps / 1000;
  // Then both at 0.5 GB/s until the first has drained; the second ends
  // when all the bytes of both have crossed (the channel never idles).
  CHECK(r.timings[first].end == second_flow + Time::from_ps((bytes - moved_alone) * 2000) + kLink.latency);
  CHECK(r.timings[second].end == first_flow + at_1gbps(2 * bytes) + kLink.latency);
}

// The one approximation (FlowBatching): a component of at least
// large_component flows is solved at the next multiple of the quantum. Here
// two flows are "large", so the second waits at rate 0 until the quantum
// while the first keeps the whole channel; once the second drains, the
// first (alone again, a small component) gets the channel back at once.
TEST_CASE("flow model: a large component is solved at the next quantum, then at once when small again",
          "[flow][sharing][batching]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  spec.flow_batching = FlowBatching{2, 1'000'000};  // 1 us
  Platform platform(spec);
  Scheduler sched(platform);

  const std::uint64_t bytes_a = 10000;
  const std::uint64_t bytes_b = 2100;
  TaskGraph g;
  const TaskId a = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), bytes_a);
  const ThreadId late = g.add_thread(0, "B");
  delay(g, late, Time::from_ns(2300));
  const TaskId b = g.copy(late, in(0, bytes_a), out(1, bytes_a), bytes_b);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());

  const std::uint64_t a0 = (r.timings[a].start + npu.sdma.task_fixed).ps;
  const std::uint64_t b0 = (r.timings[b].start + npu.sdma.task_fixed).ps;
  const std::uint64_t q = (b0 / 1'000'000 + 1) * 1'000'000;  // the quantum after the second flow starts
  REQUIRE(b0 % 1'000'000 != 0);
  REQUIRE((q - a0) % 1000 == 0);
  // The second flow: 2100 bytes at 0.5 GB/s from the quantum on.
  const std::uint64_t b_drained = q + bytes_b * 2000;
  CHECK(r.timings[b].end.ps == b_drained + kLink.latency.ps);
  // The first: alone at 1 GB/s until the quantum, at 0.5 GB/s with the
  // second, alone again the moment the second drains (not a quantum).
  REQUIRE(b_drained % 1'000'000 != 0);
  const std::uint64_t left = bytes_a - (q - a0) / 1000 - bytes_b;
  CHECK(r.timings[a].end.ps == b_drained + left * 1000 + kLink.latency.ps);
}

// A link that stops being able to fill (its other flow drained) uncouples
// its last flow, which may then run faster elsewhere; when what is left
// of its component is still large, that is solved at the next quantum.
// Flows X: npu0 -> npu1 and Y: npu2 -> npu1 share switch3 -> npu1 (L);
// X and W: npu0 -> npu2 share npu0 -> switch3 (M), W held to a quarter.
// Once Y drains, L cannot fill; X, half of L until then, takes the three
// quarters of M that W leaves, from the quantum after Y's drain on.
TEST_CASE("flow model: a link that can no longer fill frees its flow at the next quantum when the rest is large",
          "[flow][sharing][batching]") {
  NpuParams npu = small_npu();
  npu.sdma.copy_bandwidth = Bandwidth{250'000'000};  // W (a copy); X and Y reduce, uncapped
  TopologySpec spec = two_npus(npu);
  spec.npus = 3;
  spec.npus_per_server = 3;
  spec.switches = 1;
  spec.links = {LinkSpec{0, 3, "roce", kLink}, LinkSpec{1, 3, "roce", kLink}, LinkSpec{2, 3, "roce", kLink}};
  spec.flow_batching = FlowBatching{2, 1'000'000};  // 1 us
  Platform platform(spec);
  Scheduler sched(platform);

  const std::uint64_t bytes_x = 5500, bytes_y = 2100, bytes_w = 5000;
  TaskGraph g;
  // The same delay first on each thread, so that the flows start off a quantum.
  auto after_delay = [&](int npu_index, const char* name) {
    const ThreadId t = g.add_thread(npu_index, name);
    delay(g, t, Time::from_ns(300));
    return t;
  };
  const TaskId x = g.reduce(after_delay(0, "X"), in(0, 0), out(1, 0), bytes_x);
  const TaskId w = g.copy(after_delay(0, "W"), in(0, bytes_x), out(2, 0), bytes_w);
  const TaskId y = g.reduce(after_delay(2, "Y"), in(2, 0), out(1, bytes_x), bytes_y);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());

  const std::uint64_t start = (r.timings[x].start + npu.sdma.task_fixed).ps;
  REQUIRE((r.timings[y].start + npu.sdma.task_fixed).ps == start);
  REQUIRE((r.timings[w].start + npu.sdma.task_fixed).ps == start);
  REQUIRE(start % 1'000'000 != 0);
  // All three are one large component (through L and M): solved at the next quantum.
  const std::uint64_t q0 = (start / 1'000'000 + 1) * 1'000'000;
  // Y: half of L from q0.
  const std::uint64_t y_drained = q0 + bytes_y * 2000;
  REQUIRE(y_drained % 1'000'000 != 0);
  CHECK(r.timings[y].end.ps == y_drained + 2 * kLink.latency.ps);
  // X: half of L until the quantum after Y's drain, then three quarters of M.
  const std::uint64_t q1 = (y_drained / 1'000'000 + 1) * 1'000'000;
  const std::uint64_t x_left = bytes_x - (q1 - q0) / 2000;
  REQUIRE((q1 - q0) % 2000 == 0);
  REQUIRE(x_left * 4000 % 3 == 0);
  CHECK(r.timings[x].end.ps == q1 + x_left * 4000 / 3 + 2 * kLink.latency.ps);
  // W: a quarter of a GB/s throughout from q0.
  CHECK(r.timings[w].end.ps == q0 + bytes_w * 4000 + 2 * kLink.latency.ps);
}

TEST_CASE("flow model: with no quantum a large component is solved at once (exact)", "[flow][sharing][batching]") {
  const NpuParams npu = small_npu();
  TopologySpec spec = two_npus(npu);
  spec.flow_batching = FlowBatching{2, 0};
  Platform platform(spec);
  Scheduler sched(platform);
  TaskGraph g;
  const TaskId a = g.copy(g.add_thread(0, "A"), in(0, 0), out(1, 0), 10000);
  const ThreadId late = g.add_thread(0, "B");
  delay(g, late, Time::from_ns(2300));
  const TaskId b = g.copy(late, in(0, 10000), out(1, 10000), 2100);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time b0 = r.timings[b].start + npu.sdma.task_fixed;
  CHECK(r.timings[b].end == b0 + Time::from_ps(2100 * 2000) + kLink.latency);
  CHECK(r.timings[a].end == r.timings[a].start + npu.sdma.task_fixed + at_1gbps(12100) + kLink.latency);
}

TEST_CASE("flow model: over three hops a transfer is cut through, at the slowest hop's rate", "[flow][pipeline]") {
  const NpuParams npu = small_npu();
  // npu0 -> switch2 -> switch3 -> npu1; the middle hop equal to the others, or at half their rate.
  ChannelParams middle = kLink;
  middle.latency = Time::from_ns(250);
  ChannelParams slow_middle = middle;
  slow_middle.bandwidth = Bandwidth{500'000'000};
  auto three_hops = [&](const ChannelParams& mid) {
    TopologySpec spec = two_npus(npu);
    spec.switches = 2;
    spec.links = {LinkSpec{0, 2, "roce", kLink}, LinkSpec{2, 3, "roce", mid}, LinkSpec{3, 1, "roce", kLink}};
    return spec;
  };
  // Both elaborated before the first run.
  quiet_renames();
  Platform equal(three_hops(middle));
  Platform slower(three_hops(slow_middle));
  for (auto [platform, mid] : {std::pair{&equal, middle}, std::pair{&slower, slow_middle}}) {
    REQUIRE(platform->route(0, 1).size() == 3);
    Scheduler sched(*platform);
    const std::uint64_t bytes = 16 * kLink.segment_bytes + 1000;
    TaskGraph g;
    const TaskId c = g.copy(g.add_thread(0, "S"), in(0), out(1), bytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    INFO("middle hop at " << mid.bandwidth.bytes_per_s << " B/s");
    CHECK(r.timings[c].end - r.timings[c].start ==
          npu.sdma.task_fixed + mid.bandwidth.transfer_time(bytes) + kLink.latency + mid.latency + kLink.latency);
    for (const Channel* ch : platform->route(0, 1)) {
      CHECK(ch->bytes_carried() == bytes);
      CHECK(ch->busy_time() == mid.bandwidth.transfer_time(bytes));
    }
  }
}

TEST_CASE("flow model: an on-chip copy uses the NPU's local memory channel", "[flow][local]") {
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
        npu.sdma.task_fixed + npu.local_memory.bandwidth.transfer_time(bytes) + npu.local_memory.latency);
}

// ---------------------------------------------------------------------------
// Flow model against segment model on collectives. Two platforms share this
// process (elaborated before the first run); each run starts when the
// previous one has finished, so they do not disturb each other.

namespace {

using hcclsim::testing::source_file;

struct Pair {
  Platform segment;
  Platform flow;
  explicit Pair(TopologySpec spec)
      : segment([&] {
          quiet_renames();
          spec.network = NetworkModel::Segment;
          return spec;
        }()),
        flow([&] {
          spec.network = NetworkModel::Flow;
          return spec;
        }()) {}
};

std::vector<PerfRow> perf(Platform& platform, CollOp op, const std::vector<std::uint64_t>& sizes,
                          const std::string& alltoallv = {}) {
  PerfRequest req;
  req.op = op;
  req.ranks = platform.npus();
  req.buffer_bytes = platform.spec().npu.hccl_buffer_bytes;
  req.sizes = sizes;
  req.alltoallv_distribution = alltoallv;
  return run_perf(platform, req);
}

// Runs `op` on both models and checks every row's time within `tolerance` (relative).
void compare(Pair& models, CollOp op, const std::vector<std::uint64_t>& sizes, double tolerance,
             const std::string& alltoallv = {}) {
  const std::vector<PerfRow> seg = perf(models.segment, op, sizes, alltoallv);
  const std::vector<PerfRow> flow = perf(models.flow, op, sizes, alltoallv);
  REQUIRE(seg.size() == flow.size());
  for (std::size_t i = 0; i < seg.size(); ++i) {
    const double a = seg[i].time.us();
    const double b = flow[i].time.us();
    INFO(flow[i].op_name << " " << flow[i].data_size << " B on " << flow[i].ranks << " ranks (" << flow[i].algo
                         << "): segment " << a << " us, flow " << b << " us");
    CHECK(flow[i].check == "success");
    CHECK(std::abs(b - a) <= tolerance * a);
  }
}

const std::vector<CollOp> kOps = {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::Broadcast,
                                  CollOp::Reduce, CollOp::AlltoAll};

// The segment model converged: 1 KiB segments on every channel. Where short
// flows share a port (an A3 die's switch port, 15 mesh flows; AlltoAll(V)'s
// pieces staged through on-chip memory, whose default segment is 1 MiB) the
// default segments serve them almost one after another and are up to 20% off
// this (docs/user-guide.md: segment size); the flow model is the limit they converge on.
TopologySpec converged(TopologySpec spec) {
  set_segment_bytes(spec, 1024);
  return spec;
}

}  // namespace

TEST_CASE("flow vs segment model: every op on one A2 server within 1%", "[flow][compare]") {
  Pair models(load_topology(source_file("configs/topologies/a2-server.json")));
  for (const CollOp op : kOps) compare(models, op, {8 << 10, 1 << 20, 64 << 20}, 0.01);
}

// An uneven AlltoAllV mixes long and short pieces on one port: the default
// segments part from the flow model by up to 5.4% (at 4 MiB), 1 KiB
// segments by 0.01%.
TEST_CASE("flow vs segment model: AlltoAllV (zipf) on one A2 server, against converged segments, within 1%",
          "[flow][compare]") {
  Pair models(converged(load_topology(source_file("configs/topologies/a2-server.json"))));
  compare(models, CollOp::AlltoAll, {1 << 20, 4 << 20}, 0.01, "zipf:1");
}

TEST_CASE("flow vs segment model: every op on a 4-server A2 cluster within 3%", "[flow][compare][cluster]") {
  Pair models(load_topology(source_file("configs/topologies/a2-cluster.json"), {}, 4));
  for (const CollOp op : kOps) compare(models, op, {64 << 10, 4 << 20, 32 << 20}, 0.03);
}

// AlltoAll on one A3 server sends 14 SDMA writes at once through each die's
// switch port, each capped at links.hccs.sdma_write_rate: the flow model
// shares the port max-min (the caps do not bind), while the segment model
// serves each segment at min(port, cap) and so fills a shared port only to
// one cap (docs/user-guide.md: segment size). It is compared on its own below.
TEST_CASE("flow vs segment model: every op on one A3 server, against converged segments, within 1%",
          "[flow][compare][a3]") {
  Pair models(converged(load_topology(source_file("configs/topologies/a3-server.json"))));
  for (const CollOp op : kOps) {
    if (op != CollOp::AlltoAll) compare(models, op, {16 << 10, 512 << 10, 2 << 20, 16 << 20}, 0.01);
  }
}

TEST_CASE("flow vs segment model: A3 AlltoAll, whose capped SDMA writes share a port, is slower by segments",
          "[flow][compare][a3]") {
  Pair models(converged(load_topology(source_file("configs/topologies/a3-server.json"))));
  const std::vector<std::uint64_t> sizes = {16 << 10, 2 << 20, 16 << 20};
  const std::vector<PerfRow> seg = perf(models.segment, CollOp::AlltoAll, sizes);
  const std::vector<PerfRow> flow = perf(models.flow, CollOp::AlltoAll, sizes);
  REQUIRE(seg.size() == flow.size());
  for (std::size_t i = 0; i < seg.size(); ++i) {
    INFO(flow[i].data_size << " B: segment " << seg[i].time.us() << " us, flow " << flow[i].time.us() << " us");
    CHECK(flow[i].check == "success");
    CHECK(seg[i].time.us() >= flow[i].time.us() * 0.99);  // (small sizes: alike, within 1%)
    // At most one cap against the port: 196 / 107.7 GB/s.
    CHECK(seg[i].time.us() <= flow[i].time.us() * 196.0 / 107.7);
  }
}

// The default segments are the coarse end: where flows are long (or alone on
// a port) they agree with the flow model, as the converged ones do.
TEST_CASE("flow vs segment model: A3 server at default segments, within 3% where flows are long or short",
          "[flow][compare][a3]") {
  Pair models(load_topology(source_file("configs/topologies/a3-server.json")));
  for (const CollOp op : kOps) {
    if (op != CollOp::AlltoAll) compare(models, op, {16 << 10, 64 << 20}, 0.03);
  }
}
