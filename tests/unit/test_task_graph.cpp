// Unit tests for sim/task_graph validation and for the scheduler's report of
// a graph that passes validation but deadlocks when it runs.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "base/error.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "fixtures.h"
#include "models/npu/task_engine.h"
#include "topologies/platform.h"

using namespace hcclsim;
using hcclsim::testing::channel_params;
using Catch::Matchers::Contains;

namespace {

constexpr int kRanks = 2;

// The GraphError message validate() throws, or fails the test.
std::string validation_error(const TaskGraph& g, int ranks = kRanks) {
  try {
    g.validate(ranks);
  } catch (const GraphError& e) {
    return e.what();
  }
  FAIL("expected validate() to throw GraphError");
  return {};
}

TaskId delay(TaskGraph& g, ThreadId thread, Time d) {
  Task t;
  t.kind = TaskKind::Delay;
  t.thread = thread;
  t.duration = d;
  return g.add(std::move(t));
}

}  // namespace

TEST_CASE("validate accepts a record/wait pair", "[graph][validate]") {
  TaskGraph g;
  g.record(g.add_thread(0, "A"), 1, 4);
  g.wait(g.add_thread(1, "B"), 4);
  CHECK_NOTHROW(g.validate(kRanks));
}

TEST_CASE("validate refuses a wait that nothing records, naming rank, thread and notify", "[graph][validate]") {
  TaskGraph g;
  g.record(g.add_thread(0, "Main"), 1, 4);   // records notify 4, not 5
  g.wait(g.add_thread(1, "Plane3"), 5, "step 2");
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains("rank 1"));
  CHECK_THAT(msg, Contains("Plane3"));
  CHECK_THAT(msg, Contains("notify 5"));
  CHECK_THAT(msg, Contains("no task records it"));
}

TEST_CASE("notify registers are sized by use: a large index is fine, a negative one refused", "[graph][validate]") {
  TaskGraph ok;
  ok.record(ok.add_thread(0, "Main"), 1, 100000);
  ok.wait(ok.add_thread(1, "Plane0"), 100000);
  CHECK_NOTHROW(ok.validate(kRanks));
  TaskGraph g;
  g.record(g.add_thread(0, "Main"), 1, -1);
  CHECK_THAT(validation_error(g), Contains("notify -1"));
}

TEST_CASE("validate refuses a flag wait for more than is ever set", "[graph][validate][flag]") {
  TaskGraph g;
  const ThreadId a = g.add_thread(0, "AIV0");
  const ThreadId b = g.add_thread(1, "AIV0");
  g.flag_set(a, 1, 3);
  g.flag_set(a, 1, 3);
  g.flag_wait(b, 1, 3, 2);
  CHECK_NOTHROW(g.validate(kRanks));
  g.flag_wait(b, 1, 3, 3);
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains("flag 3 of rank 1 for 3"));
  CHECK_THAT(msg, Contains("only 2 flag set(s)"));
}

TEST_CASE("validate refuses a record to a rank that does not exist", "[graph][validate]") {
  TaskGraph g;
  g.record(g.add_thread(0, "Main"), kRanks, 0);
  CHECK_THAT(validation_error(g), Contains("rank " + std::to_string(kRanks)));
}

TEST_CASE("validate refuses a copy between two other ranks", "[graph][validate]") {
  TaskGraph g;
  g.copy(g.add_thread(0, "Main"), {1, BufferKind::Input, 0}, {2, BufferKind::Output, 0}, 64);
  CHECK_THAT(validation_error(g, 3), Contains("one end must be its own rank"));
}

TEST_CASE("validate refuses two threads waiting on each other and lists the tasks of the cycle",
          "[graph][validate][cycle]") {
  TaskGraph g;
  const ThreadId a = g.add_thread(0, "Left");
  const ThreadId b = g.add_thread(1, "Right");
  const TaskId wa = g.wait(a, 0);
  const TaskId ra = g.record(a, 1, 1);
  const TaskId wb = g.wait(b, 1);
  const TaskId rb = g.record(b, 0, 0);
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains("cycle"));
  for (const TaskId id : {wa, ra, wb, rb}) CHECK_THAT(msg, Contains(g.describe(id)));
}

TEST_CASE("validate finds a cycle closed by an explicit dependency", "[graph][validate][cycle]") {
  TaskGraph g;
  const ThreadId a = g.add_thread(0, "A");
  const ThreadId b = g.add_thread(1, "B");
  const TaskId x = delay(g, a, Time::from_us(1));
  const TaskId y = delay(g, b, Time::from_us(1));
  g.add_dependency(x, y);
  g.add_dependency(y, x);
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains("cycle"));
  CHECK_THAT(msg, Contains(g.describe(x)));
  CHECK_THAT(msg, Contains(g.describe(y)));
}

TEST_CASE("validate refuses two threads waiting on one notify", "[graph][validate]") {
  TaskGraph g;
  const ThreadId sender = g.add_thread(1, "Sender");
  g.record(sender, 0, 3);
  g.record(sender, 0, 3);
  g.wait(g.add_thread(0, "First"), 3);
  g.wait(g.add_thread(0, "Second"), 3);
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains("two threads"));
  CHECK_THAT(msg, Contains("First"));
  CHECK_THAT(msg, Contains("Second"));
}

TEST_CASE("validate refuses more waits than records from a single recording thread", "[graph][validate]") {
  TaskGraph g;
  g.record(g.add_thread(0, "Sender"), 1, 2);
  const ThreadId r = g.add_thread(1, "Receiver");
  g.wait(r, 2);
  const TaskId second = g.wait(r, 2);
  const std::string msg = validation_error(g);
  CHECK_THAT(msg, Contains(g.describe(second)));
  CHECK_THAT(msg, Contains("no record to release it"));
}

TEST_CASE("a graph that deadlocks only at run time fails with every blocked thread listed",
          "[graph][scheduler][deadlock]") {
  NpuParams npu;
  npu.model = "test";
  npu.cores.aic = 1;
  npu.cores.aiv = 1;
  npu.sdma.engines = 1;
  npu.sdma.task_fixed = Time::from_ns(1000);
  npu.sdma.copy_bandwidth = Bandwidth{100'000'000'000};
  npu.sdma.reduce_bandwidth = Bandwidth{100'000'000'000};
  npu.notify.record_local = Time::from_ns(500);
  npu.notify.record_remote = Time::from_ns(700);
  npu.notify.wait = Time::from_ns(20);
  npu.stream.task_dispatch = Time::from_ns(300);
  npu.stream.op_launch = Time::from_ns(2000);
  npu.local_memory = channel_params(Bandwidth{10'000'000'000}, Time::from_ns(0), 4096);
  TopologySpec spec;
  spec.name = "two-npus";
  spec.npus = 2;
  spec.npu = npu;
  spec.links = {LinkSpec{0, 1, "hccs", channel_params(Bandwidth{1'000'000'000}, Time::from_ns(100), 4096)}};
  Platform platform(spec);
  Scheduler sched(platform);

  // Two threads of rank 0 each record notify 6 of rank 1 once; rank 1 waits on
  // it twice, but only after both records have landed, so the second record
  // finds the register still set and is lost. With two recording threads the
  // pairing is not static, so validate() cannot see it. A fourth thread depends
  // on the second wait and is stuck behind it.
  TaskGraph g;
  const ThreadId sa = g.add_thread(0, "SenderA");
  const ThreadId sb = g.add_thread(0, "SenderB");
  const ThreadId rx = g.add_thread(1, "Receiver");
  const ThreadId dep = g.add_thread(0, "Dependent");
  g.record(sa, 1, 6);
  g.record(sb, 1, 6);
  delay(g, rx, Time::from_us(10));
  g.wait(rx, 6);
  const TaskId stuck_wait = g.wait(rx, 6);
  const TaskId stuck_dep = delay(g, dep, Time::from_us(1));
  g.add_dependency(stuck_wait, stuck_dep);
  REQUIRE_NOTHROW(g.validate(spec.npus));

  for (const bool keep : {true, false}) {  // the report needs no per-task timings
    INFO("timings kept: " << keep);
    sched.keep_timings(keep);
    const std::uint64_t lost_before = platform.engine(1).records_lost();
    const auto wall = std::chrono::steady_clock::now();
    const RunResult r = sched.run(g);
    CHECK(std::chrono::steady_clock::now() - wall < std::chrono::seconds(10));  // returns, never spins

    REQUIRE_FALSE(r.failure.empty());
    CHECK_FALSE(r.timed_out);
    CHECK_THAT(r.failure, Contains("deadlock"));
    CHECK_THAT(r.failure, Contains(g.describe(stuck_wait)));
    CHECK_THAT(r.failure, Contains("notify 6 of rank 1 is not set"));
    CHECK_THAT(r.failure, Contains("1 record(s) to it landed while it was already set and were lost"));
    CHECK_THAT(r.failure, Contains(g.describe(stuck_dep)));
    CHECK_THAT(r.failure, Contains("depends on unfinished " + g.describe(stuck_wait)));
    CHECK_THAT(r.failure, !Contains("SenderA"));  // finished threads are not listed
    CHECK(platform.engine(1).records_lost() == lost_before + 1);
    if (keep) {
      CHECK_FALSE(r.timings[stuck_dep].started);
    } else {
      CHECK(r.timings.empty());
    }
  }
}
