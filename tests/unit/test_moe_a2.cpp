// Normal-mode MoE on A2 (sim/moe): the NPU's AIV port that every AIV move to
// or from a peer shares (npu.aiv.remote_bandwidth), and the layered kernels
// across two A2 servers (notify_dispatch_a2, dispatch_normal_a2,
// moe_distribute_combine_a2).
//
// Every expected time is computed from the run's own timings and the
// constants of the hardware; nothing is pasted from an output. One Platform
// per TEST_CASE (SystemC elaborates once per process).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "sim/executors/plan.h"
#include "sim/moe/moe.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using hcclsim::testing::kLink;
using hcclsim::testing::small_npu;
using hcclsim::testing::source_file;
using hcclsim::testing::two_npus;

namespace {

// ps of `bytes` at `rate`.
Time at_rate(std::uint64_t bytes, Bandwidth rate) {
  return Time::from_ps(bytes * 1'000'000'000'000ULL / rate.bytes_per_s);
}

// The tasks of thread `name` on `rank` whose label is `label`, in stream order.
std::vector<TaskId> tasks_of(const TaskGraph& g, int rank, const std::string& name, const std::string& label) {
  std::vector<TaskId> out;
  for (const Thread& th : g.threads()) {
    if (th.rank != rank || th.name != name) continue;
    for (const TaskId id : th.tasks) {
      if (g.label(g.task(id)) == label) out.push_back(id);
    }
  }
  return out;
}

MoeParams tiny_a2(int ep) {
  MoeParams p;
  p.ep = ep;
  p.tokens = 64;
  p.hidden = 128;
  p.topk = 2;
  p.experts = 32;
  p.mode = MoeMode::Normal;
  p.int8 = false;
  return p;
}

}  // namespace

TEST_CASE("AIV port: moves of one NPU's cores to a peer share npu.aiv.remote_bandwidth; without it each runs at "
          "the link's share",
          "[moe][a2][aiv_port]") {
  NpuParams npu = small_npu(2);
  // The port (0.25 GB/s) is below the link (1 GB/s) and a core (2 GB/s).
  npu.aiv.remote_bandwidth = Bandwidth{250'000'000};
  TopologySpec spec = two_npus(npu);
  spec.network = NetworkModel::Flow;
  Platform platform(spec);
  Scheduler sched(platform);
  const std::uint64_t bytes = 64 * 1024;
  TaskGraph g;
  const TaskId a = g.aiv_move(g.add_thread(0, "A"), {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, bytes,
                              false, "write", 1);
  const TaskId b = g.aiv_move(g.add_thread(0, "B"), {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, bytes,
                              false, "write", 1);
  // A move inside NPU 0 does not pass the port.
  const TaskId local = g.aiv_move(g.add_thread(0, "C"), {0, BufferKind::Input, 0}, {0, BufferKind::Output, 0}, bytes,
                                  false, "copy", 1);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(r.timings[a].start == launched);
  // The two flows start together and share the port: each at half its rate.
  const Time shared = npu.aiv.copy_fixed + at_rate(2 * bytes, npu.aiv.remote_bandwidth) + kLink.latency;
  CHECK(r.timings[a].end == launched + shared);
  CHECK(r.timings[b].end == launched + shared);
  // The local copy runs at one core's rate (below the local memory's).
  CHECK(r.timings[local].end == launched + npu.aiv.copy_fixed + at_rate(bytes, npu.aiv.core_bandwidth));
}

TEST_CASE("A2 layered combine: each rank's AI CPU writes MAX_BS summed rows to the rank of its local index in the "
          "other server",
          "[moe][a2][layered]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-cluster.json")));
  const MoeParams p = tiny_a2(16);
  std::vector<int> ranks(static_cast<std::size_t>(p.ep));
  std::iota(ranks.begin(), ranks.end(), 0);
  const MoeFabric fabric = moe_fabric(platform.spec().npu, platform.spec().sdma_domain_of, ranks);
  std::string kernel;
  const TaskGraph g = build_moe(p, MoePhase::Combine, make_routing(p), fabric, &kernel);
  CHECK(kernel == "moe_distribute_combine_a2");
  for (int r = 0; r < p.ep; ++r) {
    const auto sums = tasks_of(g, r, "AICPU", "sums to server (RDMA)");
    REQUIRE(sums.size() == 1);
    const Task& t = g.task(sums[0]);
    CHECK(t.bytes == 4096ULL * static_cast<std::uint64_t>(p.hidden) * 2);   // MAX_BS rows of BF16
    CHECK(t.dst.rank == (r + 8) % 16);                                        // same local index, other server
  }
  Scheduler sched(platform);
  const RunResult result = sched.run(g);
  REQUIRE(result.failure.empty());
}

TEST_CASE("A2 layered combine: a core's rows to one destination go one at a time (two copies a row, "
          "aiv.copy_fixed each)",
          "[moe][a2][layered]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-cluster.json")));
  const MoeParams p = tiny_a2(16);
  std::vector<int> ranks(static_cast<std::size_t>(p.ep));
  std::iota(ranks.begin(), ranks.end(), 0);
  const MoeFabric fabric = moe_fabric(platform.spec().npu, platform.spec().sdma_domain_of, ranks);
  const MoeRouting routing = make_routing(p);
  std::string kernel;
  const TaskGraph g = build_moe(p, MoePhase::Combine, routing, fabric, &kernel);
  Scheduler sched(platform);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time fixed = platform.spec().npu.aiv.copy_fixed;
  const int per_rank = p.experts / p.ep;
  // 16 destinations over 48 cores: core d sends rank 0's rows for rank d's tokens.
  for (int d = 0; d < p.ep; ++d) {
    std::uint64_t rows = 0;
    for (const auto& ids : routing[static_cast<std::size_t>(d)]) {
      for (const int e : ids) rows += e >= 0 && e / per_rank == 0 ? 1 : 0;
    }
    const std::string core = "AIV" + std::to_string(d);
    const auto loads = tasks_of(g, 0, core, "load rows");
    const auto sends = tasks_of(g, 0, core, "rows to relay");
    const auto loops = tasks_of(g, 0, core, "row loop");
    INFO("destination " << d << ", rows " << rows);
    if (rows == 0) {
      CHECK(sends.empty());
      continue;
    }
    // Fewer rows than a piece (64): one load, one send, then the other
    // 2 x rows - 2 copies' fixed costs, in that order on the core; the
    // core's later phases (its own server's block, sums) come after.
    REQUIRE(rows < 64);
    REQUIRE(sends.size() == 1);
    CHECK(g.task(sends[0]).dst.rank == d % 8);   // the rank of d's local index in server 0
    CHECK(g.task(sends[0]).bytes == rows * (static_cast<std::uint64_t>(p.hidden) * 2 + 32));
    REQUIRE(!loads.empty());
    CHECK(g.task(loads[0]).bytes == rows * static_cast<std::uint64_t>(p.hidden) * 2);
    CHECK(r.timings[sends[0]].start >= r.timings[loads[0]].end);
    if (rows > 1) {
      REQUIRE(!loops.empty());
      CHECK(r.timings[loops[0]].start >= r.timings[sends[0]].end);
      CHECK(r.timings[loops[0]].end - r.timings[loops[0]].start == Time::from_ps(fixed.ps * (2 * rows - 2)));
    }
  }
}

TEST_CASE("A2 layered dispatch: the data kernel's time leaves out the count exchange and the host synchronisation",
          "[moe][a2][layered]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-cluster.json")));
  const MoeParams p = tiny_a2(16);
  const MoeRun run = run_moe(platform, p, {MoePhase::Dispatch}).front();
  CHECK(run.kernel == "notify_dispatch_a2 + dispatch_normal_a2");
  CHECK(run.kernel_time_us > 0);
  // At least the host synchronisation lies between the call's start and the kernel's.
  CHECK(run.time_mean_us - run.kernel_time_us >= platform.spec().npu.stream.host_sync.us());
}

TEST_CASE("A2 layered dispatch: a core reads each source's rows from the local rank of the source's local index, "
          "one source after another",
          "[moe][a2][layered]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-cluster.json")));
  const MoeParams p = tiny_a2(16);
  std::vector<int> ranks(static_cast<std::size_t>(p.ep));
  std::iota(ranks.begin(), ranks.end(), 0);
  const MoeFabric fabric = moe_fabric(platform.spec().npu, platform.spec().sdma_domain_of, ranks);
  const MoeRouting routing = make_routing(p);
  std::string kernel;
  const TaskGraph g = build_moe(p, MoePhase::Dispatch, routing, fabric, &kernel);
  Scheduler sched(platform);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const int cores = platform.spec().npu.cores.aiv;
  const int per_rank = p.experts / p.ep;
  // A token in the window: the BF16 row and four blocks of K (rounded up to 8) 4-byte fields.
  const std::uint64_t token = static_cast<std::uint64_t>(p.hidden) * 2 + 4 * 8 * 4;
  // Rows expert e got from rank s.
  std::vector<std::vector<std::uint64_t>> n(static_cast<std::size_t>(p.experts), std::vector<std::uint64_t>(16, 0));
  for (int s = 0; s < p.ep; ++s) {
    for (const auto& ids : routing[static_cast<std::size_t>(s)]) {
      for (const int e : ids) {
        if (e >= 0) ++n[static_cast<std::size_t>(e)][static_cast<std::size_t>(s)];
      }
    }
  }
  for (const int rank : {0, 9}) {
    const int base = rank / 8 * 8;
    for (int c = 0; c < cores; ++c) {
      const auto reads = tasks_of(g, rank, "AIV" + std::to_string(c), "window to core");
      std::size_t k = 0;
      Time previous;
      for (int src = 0; src < p.ep; ++src) {
        std::uint64_t rows = 0;
        for (int le = 0; le < per_rank; ++le) {
          rows += chunk_span(n[static_cast<std::size_t>(rank * per_rank + le)][static_cast<std::size_t>(src)], cores, c).count;
        }
        if (rows == 0) continue;
        INFO("rank " << rank << " core " << c << " source " << src);
        REQUIRE(k < reads.size());
        const Task& t = g.task(reads[k]);
        CHECK(t.src.rank == base + src % 8);
        CHECK(t.dst.rank == rank);
        CHECK(t.bytes == rows * token);
        CHECK(r.timings[reads[k]].start >= previous);   // in source order
        previous = r.timings[reads[k]].end;
        ++k;
      }
      CHECK(k == reads.size());
    }
  }
  // The AI CPU's block for the other server: 32 bytes of count, then its tokens.
  for (const int rank : {0, 9}) {
    const auto blocks = tasks_of(g, rank, "AICPU", "tokens to server (RDMA)");
    REQUIRE(blocks.size() == 1);
    const int other = rank < 8 ? 1 : 0;
    std::uint64_t tokens = 0;
    for (const auto& ids : routing[static_cast<std::size_t>(rank)]) {
      bool there = false;
      for (const int e : ids) there = there || (e >= 0 && e / per_rank / 8 == other);
      tokens += there ? 1 : 0;
    }
    CHECK(g.task(blocks[0]).dst.rank == other * 8 + rank % 8);
    CHECK(g.task(blocks[0]).bytes == 32 + tokens * token);
  }
}

TEST_CASE("the layered kernels come from the profile (npu.moe), not from the product's name", "[moe]") {
  // build_moe needs no Platform: the fabric is the profile's NPU and the SDMA domains.
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-cluster.json"), std::nullopt, 2);
  REQUIRE(spec.npu.moe_layered_kernels);   // the A2 profile: DeepEP has them on 910B
  std::vector<int> ranks(16);
  std::iota(ranks.begin(), ranks.end(), 0);
  const MoeParams p = tiny_a2(16);
  std::string kernel;
  build_moe(p, MoePhase::Combine, make_routing(p), moe_fabric(spec.npu, spec.sdma_domain_of, ranks), &kernel);
  CHECK(kernel == "moe_distribute_combine_a2");
  NpuParams without = spec.npu;
  without.moe_layered_kernels = false;   // as the A3 profile says
  build_moe(p, MoePhase::Combine, make_routing(p), moe_fabric(without, spec.sdma_domain_of, ranks), &kernel);
  CHECK(kernel == "cam_moe_combine_normal");
  // One server: one domain, no layered kernels whatever the profile says.
  const std::vector<int> one(ranks.begin(), ranks.begin() + 8);
  const MoeParams q = tiny_a2(8);
  build_moe(q, MoePhase::Combine, make_routing(q), moe_fabric(spec.npu, spec.sdma_domain_of, one), &kernel);
  CHECK(kernel == "cam_moe_combine_normal");
}
