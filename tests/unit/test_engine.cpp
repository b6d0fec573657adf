// Unit tests for models/npu/task_engine through the scheduler: notify
// semantics, stream order and dispatch gaps, explicit dependencies, wait
// timeouts, and the SDMA-engine and AI-core pools.
//
// Every platform is built by hand with small round parameters, and every
// expected time is computed from those parameters (never a pasted result).
// SystemC elaborates once per process: one Platform per TEST_CASE, no SECTIONs.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <functional>
#include <regex>
#include <stdexcept>
#include <string>

#include "base/error.h"
#include "models/npu/task_engine.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/platform.h"

using namespace hcclsim;
using hcclsim::testing::kLink;

using Catch::Matchers::Contains;

namespace {

NpuParams small_npu() { return testing::small_npu(2); }
TopologySpec two_npus(const NpuParams& npu = small_npu()) { return testing::two_npus(npu); }

TaskId delay(TaskGraph& g, ThreadId thread, Time d, std::string label = {}) {
  Task t;
  t.kind = TaskKind::Delay;
  t.thread = thread;
  t.duration = d;
  t.label = g.intern(std::move(label));
  return g.add(std::move(t));
}

TaskId compute(TaskGraph& g, ThreadId thread, int cores, Time d) {
  Task t;
  t.kind = TaskKind::Compute;
  t.thread = thread;
  t.core_kind = CoreKind::Aiv;
  t.cores = cores;
  t.duration = d;
  return g.add(std::move(t));
}

// Time of the single-hop transfer of `bytes` over kLink, segment by segment.
Time serialization(std::uint64_t bytes, const ChannelParams& link) {
  Time total;
  for (std::uint64_t left = bytes; left > 0;) {
    const std::uint64_t seg = std::min(left, link.segment_bytes);
    total += link.bandwidth.transfer_time(seg);
    left -= seg;
  }
  return total;
}

}  // namespace

// ------------------------------------------------------------------ notifies

TEST_CASE("a notify wait is released at the instant a remote record lands", "[engine][notify]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId sender = g.add_thread(0, "Sender");
  const ThreadId receiver = g.add_thread(1, "Receiver");
  const TaskId rec = g.record(sender, 1, 3);
  const TaskId wait = g.wait(receiver, 3);

  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(r.timings[rec].start == launched);
  CHECK(r.timings[rec].end == launched + npu.notify.record_remote);
  CHECK(r.timings[wait].start == launched);
  // Released in the same picosecond the record ends (no dispatch, no `wait` cost).
  CHECK(r.timings[wait].end == r.timings[rec].end);
  CHECK(r.timings[wait].released_by == static_cast<std::int64_t>(rec));
  CHECK(r.end == r.timings[rec].end);
}

TEST_CASE("a record on the same chip lasts record_local and releases its wait when it lands",
          "[engine][notify]") {
  const NpuParams npu = small_npu();
  REQUIRE(npu.notify.record_local != npu.notify.record_remote);
  TopologySpec spec = two_npus(npu);
  spec.npus_per_chip = 2;  // ranks 0 and 1 are two dies of one chip
  Platform platform(spec);
  Scheduler sched(platform);

  TaskGraph g;
  // Rank 0 to rank 1 on the same chip, and rank 0 to itself (thread to thread).
  const ThreadId a = g.add_thread(0, "A");
  const ThreadId b = g.add_thread(0, "B");
  const ThreadId c = g.add_thread(1, "C");
  const TaskId to_other_die = g.record(a, 1, 0);
  const TaskId to_self = g.record(a, 0, 1);
  const TaskId wait_c = g.wait(c, 0);
  const TaskId wait_b = g.wait(b, 1);

  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(r.timings[to_other_die].end == launched + npu.notify.record_local);
  CHECK(r.timings[wait_c].end == r.timings[to_other_die].end);
  CHECK(r.timings[wait_c].released_by == static_cast<std::int64_t>(to_other_die));

  const Time second = r.timings[to_other_die].end + npu.stream.task_dispatch;
  CHECK(r.timings[to_self].start == second);
  CHECK(r.timings[to_self].end == second + npu.notify.record_local);
  CHECK(r.timings[wait_b].end == r.timings[to_self].end);
  CHECK(r.timings[wait_b].released_by == static_cast<std::int64_t>(to_self));
}

TEST_CASE("a wait whose notify is already set takes exactly the wait time", "[engine][notify]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId sender = g.add_thread(0, "Sender");
  const ThreadId receiver = g.add_thread(1, "Receiver");
  const TaskId rec = g.record(sender, 1, 5);
  const Time busy = Time::from_us(10);
  const TaskId d = delay(g, receiver, busy);
  const TaskId wait = g.wait(receiver, 5);

  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  REQUIRE(r.timings[rec].end < r.timings[wait].start);  // set before the wait starts
  CHECK(r.timings[d].end == launched + busy);
  CHECK(r.timings[wait].start == launched + busy + npu.stream.task_dispatch);
  CHECK(r.timings[wait].end == r.timings[wait].start + npu.notify.wait);
  CHECK(r.timings[wait].released_by == static_cast<std::int64_t>(rec));
}

TEST_CASE("a record landing on a register already set is lost, and the second wait deadlocks",
          "[engine][notify]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId sender = g.add_thread(0, "Sender");
  const ThreadId receiver = g.add_thread(1, "Receiver");
  const TaskId rec1 = g.record(sender, 1, 7);
  const TaskId rec2 = g.record(sender, 1, 7);
  const Time busy = Time::from_us(10);
  delay(g, receiver, busy);
  const TaskId wait1 = g.wait(receiver, 7);
  const TaskId wait2 = g.wait(receiver, 7);

  // Statically fine: one recorder, as many records as waits.
  REQUIRE_NOTHROW(g.validate(2));

  const RunResult r = sched.run(g);
  // Both records land while the receiver is still busy.
  REQUIRE(r.timings[rec2].end < r.timings[wait1].start);
  CHECK(r.timings[rec1].finished);
  CHECK(r.timings[wait1].finished);
  CHECK(r.timings[wait1].released_by == static_cast<std::int64_t>(rec1));
  CHECK(r.timings[wait1].end == r.timings[wait1].start + npu.notify.wait);
  CHECK(r.timings[wait2].started);
  CHECK_FALSE(r.timings[wait2].finished);
  CHECK(platform.engine(1).records_lost() == 1);
  REQUIRE_FALSE(r.failure.empty());
  CHECK_THAT(r.failure, Contains("deadlock"));
  CHECK_THAT(r.failure, Contains("Receiver"));
  CHECK_THAT(r.failure, Contains("notify 7"));
  CHECK_THAT(r.failure, Contains(g.describe(wait2)));
  CHECK_FALSE(r.timed_out);
}

TEST_CASE("a wait whose timeout expires fails the run with HCCL_E_TIMEOUT", "[engine][notify][timeout]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId sender = g.add_thread(0, "Sender");
  const ThreadId receiver = g.add_thread(1, "Receiver");
  delay(g, sender, Time::from_us(50));
  g.record(sender, 1, 2);
  const Time timeout = Time::from_us(10);
  const TaskId wait = g.wait(receiver, 2, "late", timeout);

  for (const bool keep : {true, false}) {  // the report needs no per-task timings
    INFO("timings kept: " << keep);
    sched.keep_timings(keep);
    const RunResult r = sched.run(g);
    const Time expired = r.begin + npu.stream.op_launch + timeout;
    CHECK(r.timed_out);
    if (keep) {
      CHECK_FALSE(r.timings[wait].finished);
    } else {
      CHECK(r.timings.empty());
    }
    REQUIRE_FALSE(r.failure.empty());
    CHECK_THAT(r.failure, Contains("HCCL_E_TIMEOUT"));
    CHECK_THAT(r.failure, Contains("notify 2"));
    CHECK_THAT(r.failure, Contains("Receiver"));
    CHECK_THAT(r.failure, Contains("timed out at " + format_us(expired) + " us"));
    CHECK_THAT(r.failure, Contains("after waiting " + format_us(timeout) + " us"));
  }
}

// --------------------------------------------------------- streams and deps

TEST_CASE("tasks of one stream run strictly in order, op_launch before the first and task_dispatch between",
          "[engine][stream]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId t = g.add_thread(0, "Main");
  const Time d[3] = {Time::from_us(1), Time::from_us(3), Time::from_ns(250)};
  TaskId ids[3];
  for (int i = 0; i < 3; ++i) ids[i] = delay(g, t, d[i]);

  // Two workloads one after the other: each pays op_launch again.
  for (int run = 0; run < 2; ++run) {
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    Time expect = r.begin + npu.stream.op_launch;
    for (int i = 0; i < 3; ++i) {
      if (i > 0) expect += npu.stream.task_dispatch;
      CHECK(r.timings[ids[i]].start == expect);
      expect += d[i];
      CHECK(r.timings[ids[i]].end == expect);
    }
    CHECK(r.end == expect);
    CHECK(r.elapsed() == npu.stream.op_launch + d[0] + d[1] + d[2] + npu.stream.task_dispatch +
                             npu.stream.task_dispatch);
  }
}

TEST_CASE("an explicit dependency holds a task until the other one finishes", "[engine][dependency]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId a = g.add_thread(0, "A");
  const ThreadId b = g.add_thread(1, "B");
  const ThreadId c = g.add_thread(1, "C");
  const TaskId long_task = delay(g, a, Time::from_us(10));
  const TaskId held = delay(g, b, Time::from_us(1));
  const TaskId free_task = delay(g, c, Time::from_us(1));
  g.add_dependency(long_task, held);

  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(r.timings[free_task].start == launched);  // the control: no dependency, starts at once
  CHECK(r.timings[long_task].end == launched + Time::from_us(10));
  CHECK(r.timings[held].start == r.timings[long_task].end);
  CHECK(r.timings[held].end == r.timings[long_task].end + Time::from_us(1));
}

// ------------------------------------------------------------------- pools

TEST_CASE("with one SDMA engine two transfers of one NPU run one after the other", "[engine][sdma]") {
  NpuParams npu = small_npu();
  npu.sdma.engines = 1;
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  TaskGraph g;
  const ThreadId s0 = g.add_thread(0, "S0");
  const ThreadId s1 = g.add_thread(0, "S1");
  const std::uint64_t bytes = 8192;
  const TaskId c0 = g.copy(s0, {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, bytes);
  const TaskId c1 = g.copy(s1, {0, BufferKind::Input, bytes}, {1, BufferKind::Output, bytes}, bytes);

  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time one = npu.sdma.task_fixed + serialization(bytes, kLink) + kLink.latency;
  const TaskTiming& first = r.timings[c0].start <= r.timings[c1].start ? r.timings[c0] : r.timings[c1];
  const TaskTiming& second = r.timings[c0].start <= r.timings[c1].start ? r.timings[c1] : r.timings[c0];
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(first.start == launched);
  CHECK(first.end == launched + one);
  CHECK(second.start == first.end);  // got the engine the moment it came free
  CHECK(second.end == first.end + one);
}

TEST_CASE("a Compute task occupies its AI cores for its whole duration", "[engine][cores]") {
  const NpuParams npu = small_npu();
  REQUIRE(npu.cores.aiv == 4);
  Platform platform(two_npus(npu));
  Scheduler sched(platform);
  const Time d = Time::from_us(5);

  {  // 3 + 3 cores of 4: the second waits for the first.
    TaskGraph g;
    const TaskId x = compute(g, g.add_thread(0, "X"), 3, d);
    const TaskId y = compute(g, g.add_thread(0, "Y"), 3, d);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    const Time launched = r.begin + npu.stream.op_launch;
    const TaskTiming& first = r.timings[x].start <= r.timings[y].start ? r.timings[x] : r.timings[y];
    const TaskTiming& second = r.timings[x].start <= r.timings[y].start ? r.timings[y] : r.timings[x];
    CHECK(first.start == launched);
    CHECK(first.end == launched + d);
    CHECK(second.start == first.end);
    CHECK(second.end == first.end + d);
  }
  {  // 2 + 2 cores of 4: both at once (the control).
    TaskGraph g;
    const TaskId x = compute(g, g.add_thread(0, "X"), 2, d);
    const TaskId y = compute(g, g.add_thread(0, "Y"), 2, d);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    const Time launched = r.begin + npu.stream.op_launch;
    CHECK(r.timings[x].start == launched);
    CHECK(r.timings[y].start == launched);
    CHECK(r.timings[x].end == launched + d);
    CHECK(r.timings[y].end == launched + d);
  }
}

TEST_CASE("an AIV move on a held core's write pipe (0 cores) runs while every core is busy; with 1 core it waits",
          "[engine][cores]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);
  const Time busy = Time::from_us(50);
  const std::uint64_t bytes = 8192;
  // The link (1 GB/s) is slower than one core's copy rate, so it sets the pace.
  REQUIRE(npu.aiv.core_bandwidth.bytes_per_s > kLink.bandwidth.bytes_per_s);
  const Time move = npu.aiv.copy_fixed + serialization(bytes, kLink) + kLink.latency;
  for (const int cores : {0, 1}) {
    TaskGraph g;
    compute(g, g.add_thread(0, "X"), npu.cores.aiv, busy);  // every vector core of NPU 0, first in line
    const TaskId m = g.aiv_move(g.add_thread(0, "Y"), {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, bytes,
                                false, "write", cores);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    const Time launched = r.begin + npu.stream.op_launch;
    const Time start = cores == 0 ? launched : launched + busy;
    INFO("cores " << cores);
    CHECK(r.timings[m].start == start);
    CHECK(r.timings[m].end == start + move);
  }
}

TEST_CASE("a Compute task asking for more cores than the NPU has is refused", "[engine][cores]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);
  TaskGraph g;
  compute(g, g.add_thread(0, "X"), npu.cores.aiv + 1, Time::from_us(1));
  REQUIRE_THROWS_AS(sched.run(g), GraphError);
}

// ------------------------------------------------ workloads after a failure

TEST_CASE("a workload after a deadlocked one is not disturbed by the stuck wait", "[engine][notify][reuse]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  {  // Deadlocks: the second record lands on a set register and is lost; the
     // second wait, on rank 1's stream 0, stays blocked on notify 7.
    TaskGraph g;
    const ThreadId receiver = g.add_thread(1, "Receiver");
    g.record(g.add_thread(0, "SenderA"), 1, 7);
    g.record(g.add_thread(0, "SenderB"), 1, 7);
    delay(g, receiver, Time::from_us(10));
    g.wait(receiver, 7);
    g.wait(receiver, 7);
    const RunResult r = sched.run(g);
    REQUIRE_THAT(r.failure, Contains("deadlock"));
  }
  // A healthy workload on the same hardware: rank 1's stream 0 is busy for
  // 10 us while its stream 1 waits, from 5 us on, for notify 7 from rank 0.
  TaskGraph g;
  const ThreadId busy = g.add_thread(1, "Busy");
  const ThreadId waiter = g.add_thread(1, "Waiter");
  const TaskId rec = g.record(g.add_thread(0, "Sender"), 1, 7);
  const TaskId long_task = delay(g, busy, Time::from_us(10));
  const TaskId pause = delay(g, waiter, Time::from_us(5));
  const TaskId wait = g.wait(waiter, 7);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  const Time launched = r.begin + npu.stream.op_launch;
  CHECK(r.timings[rec].end == launched + npu.notify.record_remote);
  CHECK(r.timings[long_task].end == launched + Time::from_us(10));  // not cut short by the record
  CHECK(r.timings[wait].start == r.timings[pause].end + npu.stream.task_dispatch);
  CHECK(r.timings[wait].end == r.timings[wait].start + npu.notify.wait);
  CHECK(r.timings[wait].released_by == static_cast<std::int64_t>(rec));
}

TEST_CASE("a record that lands after its wait timed out does not release a wait of the next workload",
          "[engine][notify][reuse]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);

  {  // Times out at 10 us; the record still lands at 50 us and sets notify 2.
    TaskGraph g;
    const ThreadId sender = g.add_thread(0, "Sender");
    delay(g, sender, Time::from_us(50));
    g.record(sender, 1, 2);
    g.wait(g.add_thread(1, "Receiver"), 2, "late", Time::from_us(10));
    const RunResult r = sched.run(g);
    REQUIRE(r.timed_out);
  }
  TaskGraph g;
  const ThreadId sender = g.add_thread(0, "Sender");
  delay(g, sender, Time::from_us(20));
  const TaskId rec = g.record(sender, 1, 2);
  const TaskId wait = g.wait(g.add_thread(1, "Receiver"), 2);
  const RunResult r = sched.run(g);
  REQUIRE(r.failure.empty());
  CHECK(r.timings[wait].end == r.timings[rec].end);
  CHECK(r.timings[wait].released_by == static_cast<std::int64_t>(rec));
}

TEST_CASE("a run that frees its graph while compiling gives the same results and the same failure reports",
          "[engine][scheduler][release]") {
  const NpuParams npu = small_npu();
  Platform platform(two_npus(npu));
  Scheduler sched(platform);
  int rebuilt = 0;
  auto releasing = [&](const std::function<TaskGraph()>& build) {
    return sched.run_releasing(build(), [&] {
      ++rebuilt;
      return build();
    });
  };

  // Three chunks of tasks, so that chunks are freed while later ones are
  // compiled; copies across the link, and dependencies from rank 0's
  // tasks to rank 1's (whose engine the release must reach).
  auto finishing = [] {
    TaskGraph g;
    const ThreadId a = g.add_thread(0, "A");
    const ThreadId b = g.add_thread(1, "B");
    const std::size_t n = 2 * ExecProgram::kChunk + 1000;
    TaskId last_b = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const TaskId t = i % 3 == 0 ? g.copy(a, BufferRef{0, BufferKind::Input, 0}, BufferRef{1, BufferKind::Output, 0}, 4096)
                                  : delay(g, a, Time::from_ns(100 + i % 7));
      if (i % 1000 == 999) {
        last_b = delay(g, b, Time::from_ns(50));
        g.add_dependency(t, last_b);
      }
    }
    return g;
  };
  const TaskGraph whole = finishing();
  REQUIRE(whole.tasks().size() > 2 * ExecProgram::kChunk);
  const RunResult kept = sched.run(whole);
  REQUIRE(kept.failure.empty());
  const RunResult freed = releasing(finishing);
  REQUIRE(freed.failure.empty());
  CHECK(rebuilt == 0);  // only a failure needs the tasks again
  CHECK(freed.elapsed() == kept.elapsed());
  REQUIRE(freed.timings.size() == kept.timings.size());
  std::size_t same = 0;
  for (std::size_t i = 0; i < kept.timings.size(); ++i) {
    same += freed.timings[i].start - freed.begin == kept.timings[i].start - kept.begin &&
            freed.timings[i].end - freed.begin == kept.timings[i].end - kept.begin;
  }
  CHECK(same == kept.timings.size());

  // A record lost on a register already set: the second wait deadlocks.
  auto deadlocking = [] {
    TaskGraph g;
    const ThreadId sender = g.add_thread(0, "Sender");
    g.record(sender, 1, 7);
    g.record(sender, 1, 7);
    const ThreadId receiver = g.add_thread(1, "Receiver");
    delay(g, receiver, Time::from_us(10));
    g.wait(receiver, 7);
    g.wait(receiver, 7);
    return g;
  };
  const RunResult dead_kept = sched.run(deadlocking());
  const RunResult dead_freed = releasing(deadlocking);
  CHECK(rebuilt == 1);
  CHECK_THAT(dead_freed.failure, Contains("deadlock"));
  CHECK_THAT(dead_freed.failure, Contains(deadlocking().describe(4)));  // the second wait
  // The same report but for when the run began (the report's times are absolute).
  const std::regex since(" since [0-9.]+ us");
  CHECK(std::regex_replace(dead_freed.failure, since, "") == std::regex_replace(dead_kept.failure, since, ""));
  CHECK(dead_freed.failure != std::regex_replace(dead_freed.failure, since, ""));

  // A wait that times out before its record.
  auto late = [] {
    TaskGraph g;
    const ThreadId sender = g.add_thread(0, "Sender");
    delay(g, sender, Time::from_us(50));
    g.record(sender, 1, 2);
    g.wait(g.add_thread(1, "Receiver"), 2, "late", Time::from_us(10));
    return g;
  };
  const RunResult late_kept = sched.run(late());
  const RunResult late_freed = releasing(late);
  CHECK(rebuilt == 2);
  CHECK(late_freed.timed_out);
  CHECK_THAT(late_freed.failure, Contains("HCCL_E_TIMEOUT"));
  // Times are absolute: the same text once the runs' starts are taken out.
  CHECK_THAT(late_freed.failure, Contains("timed out at " + format_us(late_freed.begin + npu.stream.op_launch + Time::from_us(10))));
  CHECK_THAT(late_kept.failure, Contains("timed out at " + format_us(late_kept.begin + npu.stream.op_launch + Time::from_us(10))));

  // A rebuild that makes another graph is refused rather than misreported.
  CHECK_THROWS_AS(sched.run_releasing(deadlocking(), [] { return TaskGraph{}; }), std::logic_error);
}

// ------------------------------------------------------------ transport cap

TEST_CASE("an SDMA task of HCCL's transport is held to the links' transport_rate; a one-sided batch is not",
          "[engine][sdma]") {
  // A2 HCCS: HCCL's own send/recv reads at 20.94 GB/s (calibration row
  // A2-3) where hixl's one-sided batches read at the link's 27 GB/s.
  TopologySpec spec = two_npus();
  spec.links[0].params.transport_rate = Bandwidth{kLink.bandwidth.bytes_per_s / 2};
  const NpuParams npu = spec.npu;
  Platform platform(spec);
  Scheduler sched(platform);
  constexpr std::uint64_t kBytes = 1'000'000;
  auto read_span = [&]() {
    TaskGraph g;
    const ThreadId reader = g.add_thread(1, "Plane0");  // rank 1 reads rank 0's input
    const TaskId copy = g.copy(reader, {0, BufferKind::Input, 0}, {1, BufferKind::Output, 0}, kBytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    return r.timings[copy].end - r.timings[copy].start;
  };
  const Time transport = read_span();
  sched.one_sided(true);
  const Time one_sided = read_span();
  // The set-up and the latency are the same; only the rate differs.
  CHECK(one_sided == npu.sdma.read_fixed + kLink.bandwidth.transfer_time(kBytes) + kLink.latency);
  CHECK(transport - one_sided == kLink.bandwidth.transfer_time(kBytes));
}
