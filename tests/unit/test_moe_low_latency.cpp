// The low-latency MoE kernels inside one UB domain (sim/moe, after
// MoeDistributeDispatchV2 / MoeDistributeCombineV2): rows go one at a time,
// and the boundaries of that row pipeline hold exactly.
//
// Every expected time is computed from the run's own timings and the
// profile's constants (dispatch gap, flag poll); nothing is pasted from an
// output. One Platform per TEST_CASE (SystemC elaborates once per process).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "sim/moe/moe.h"
#include "sim/scheduler.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;

namespace {

using hcclsim::testing::source_file;

MoeParams low_latency(int ep) {
  MoeParams p;
  p.ep = ep;
  p.tokens = 128;
  p.hidden = 7168;
  p.topk = 8;
  p.experts = 256;
  p.mode = MoeMode::LowLatency;
  return p;
}

// One phase of an EP 8 low-latency call on an A3 server, built and run
// (made once per TEST_CASE: SystemC elaborates once per process).
struct LowLatencyRun {
  explicit LowLatencyRun(MoePhase phase)
      : platform(load_topology(source_file("configs/topologies/a3-server.json"))), scheduler(platform), p(low_latency(8)) {
    std::vector<int> ranks(static_cast<std::size_t>(p.ep));
    std::iota(ranks.begin(), ranks.end(), 0);
    const MoeFabric fabric = moe_fabric(platform.spec().npu, platform.spec().sdma_domain_of, ranks);
    std::string kernel;
    graph = build_moe(p, phase, make_routing(p), fabric, &kernel);
    result = scheduler.run(graph);
  }
  Platform platform;
  Scheduler scheduler;
  MoeParams p;
  TaskGraph graph;
  RunResult result;
};

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

}  // namespace

TEST_CASE("low-latency dispatch: a core begins a row once the write two rows back has landed, and writes a row once "
          "it is quantised", "[moe][low_latency]") {
  const LowLatencyRun run(MoePhase::Dispatch);
  const TaskGraph& g = run.graph;
  const RunResult& r = run.result;
  const MoeParams& p = run.p;
  REQUIRE(r.failure.empty());
  const NpuParams& npu = run.platform.spec().npu;
  const Time gap = npu.stream.task_dispatch;

  std::uint64_t pushed = 0;
  for (int rank = 0; rank < p.ep; ++rank) {
    for (int c = 0; c < npu.cores.aiv; ++c) {
      const std::string core = "AIV" + std::to_string(c);
      const auto loads = tasks_of(g, rank, core, "load row");
      const auto quantised = tasks_of(g, rank, core, "quantise");
      const auto writes = tasks_of(g, rank, core + " MTE3", "push row");
      REQUIRE(loads.size() == writes.size());
      REQUIRE(quantised.size() == writes.size());
      pushed += writes.size();
      for (std::size_t j = 0; j < writes.size(); ++j) {
        INFO("rank " << rank << " core " << c << " row " << j);
        // The write goes out the instant its row is quantised, unless the write pipe is still busy.
        Time write_start = r.timings[quantised[j]].end;
        if (j > 0) write_start = std::max(write_start, r.timings[writes[j - 1]].end + gap);
        CHECK(r.timings[writes[j]].start == write_start);
        if (j < 2) continue;
        // A row is begun after the core's previous task and after the write two rows back.
        const Time load_start = std::max(r.timings[quantised[j - 1]].end + gap, r.timings[writes[j - 2]].end);
        CHECK(r.timings[loads[j]].start == load_start);
      }
    }
  }
  // Uniform routing drops nothing: every (token, expert) row is pushed once.
  CHECK(pushed == static_cast<std::uint64_t>(p.ep) * static_cast<std::uint64_t>(p.tokens) * static_cast<std::uint64_t>(p.topk));
}

TEST_CASE("low-latency combine: an owner core sums a token one poll after the last of its rows' flags lands",
          "[moe][low_latency]") {
  const LowLatencyRun run(MoePhase::Combine);
  const TaskGraph& g = run.graph;
  const RunResult& r = run.result;
  const MoeParams& p = run.p;
  REQUIRE(r.failure.empty());
  const Time poll = run.platform.spec().npu.aiv.flag_poll;

  int waits = 0;
  for (TaskId id = 0; id < g.tasks().size(); ++id) {
    const Task& w = g.task(id);
    if (w.kind != TaskKind::FlagWait || g.label(w) != "wait rows") continue;
    const int owner = g.rank_of(id);
    Time last_flag;
    std::uint32_t flags = 0;
    for (TaskId s = 0; s < g.tasks().size(); ++s) {
      const Task& set = g.task(s);
      if (set.kind != TaskKind::FlagSet || set.peer != owner || set.notify != w.notify) continue;
      ++flags;
      last_flag = std::max(last_flag, r.timings[s].end);
    }
    INFO("owner " << owner << " flag " << w.notify);
    CHECK(flags == w.count);   // one flag per row of the token (top-k)
    CHECK(r.timings[id].end == std::max(r.timings[id].start, last_flag) + poll);
    ++waits;
  }
  CHECK(waits == p.ep * p.tokens);
}

TEST_CASE("low-latency dispatch: a rank copies its window out only after the status of its slowest peer has landed",
          "[moe][low_latency]") {
  // MoeDistributeDispatchV2 WaitDispatch: a core polls its contiguous share
  // of the (local expert, source) status entries until all have landed, then
  // SyncAll; LocalWindowCopy starts after. The shares of a rank's cores cover
  // every source, so no rank's copy starts before every peer's SetStatus.
  const LowLatencyRun run(MoePhase::Dispatch);
  const TaskGraph& g = run.graph;
  const RunResult& r = run.result;
  const MoeParams& p = run.p;
  REQUIRE(r.failure.empty());
  const Time poll = run.platform.spec().npu.aiv.flag_poll;
  const int cores = run.platform.spec().npu.cores.aiv;

  // The status flags each rank receives: per counter, how many, from which
  // ranks, and when the last of them landed; per rank, when the last landed.
  struct Counter {
    std::uint32_t flags = 0;
    std::vector<bool> from;
    Time last;
  };
  std::vector<std::vector<Counter>> counters(static_cast<std::size_t>(p.ep));
  std::vector<Time> last_status(static_cast<std::size_t>(p.ep));
  std::vector<std::vector<bool>> senders(static_cast<std::size_t>(p.ep), std::vector<bool>(static_cast<std::size_t>(p.ep), false));
  int first_status = -1;
  for (TaskId s = 0; s < g.tasks().size(); ++s) {
    const Task& set = g.task(s);
    if (set.kind == TaskKind::FlagSet && g.label(set) == "status") {
      first_status = first_status < 0 ? set.notify : std::min(first_status, set.notify);
    }
  }
  REQUIRE(first_status >= 0);
  for (auto& per_rank : counters) per_rank.assign(static_cast<std::size_t>(cores), Counter{0, std::vector<bool>(static_cast<std::size_t>(p.ep), false), Time{}});
  for (TaskId s = 0; s < g.tasks().size(); ++s) {
    const Task& set = g.task(s);
    if (set.kind != TaskKind::FlagSet || g.label(set) != "status") continue;
    const auto to = static_cast<std::size_t>(set.peer);
    const auto from = static_cast<std::size_t>(g.rank_of(s));
    Counter& c = counters[to][static_cast<std::size_t>(set.notify - first_status)];
    ++c.flags;
    c.from[from] = true;
    c.last = std::max(c.last, r.timings[s].end);
    last_status[to] = std::max(last_status[to], r.timings[s].end);
    senders[to][from] = true;
  }
  for (int rank = 0; rank < p.ep; ++rank) {
    INFO("rank " << rank);
    // Every peer (and the rank itself) sends it statuses: one per (source, local expert).
    std::uint32_t received = 0;
    for (const Counter& c : counters[static_cast<std::size_t>(rank)]) received += c.flags;
    CHECK(received == static_cast<std::uint32_t>(p.experts));
    CHECK(std::count(senders[static_cast<std::size_t>(rank)].begin(), senders[static_cast<std::size_t>(rank)].end(), true) == p.ep);
    std::optional<Time> copy_start;
    for (int c = 0; c < cores; ++c) {
      const std::string core = "AIV" + std::to_string(c);
      const auto waits = tasks_of(g, rank, core, "wait status");
      REQUIRE(waits.size() == 1);
      const Task& w = g.task(waits.front());
      const Counter& mine = counters[static_cast<std::size_t>(rank)][static_cast<std::size_t>(w.notify - first_status)];
      INFO("core " << c);
      // The core waits for exactly its entries and is released one poll after the last lands.
      CHECK(mine.flags == w.count);
      CHECK(r.timings[waits.front()].end == std::max(r.timings[waits.front()].start, mine.last) + poll);
      const auto rows = tasks_of(g, rank, core, "window row");
      if (!rows.empty()) copy_start = copy_start ? std::min(*copy_start, r.timings[rows.front()].start) : r.timings[rows.front()].start;
    }
    // The window copy waits for the slowest peer's status, not only for the core's own sources.
    REQUIRE(copy_start);
    CHECK(*copy_start >= last_status[static_cast<std::size_t>(rank)] + poll);
  }
}
