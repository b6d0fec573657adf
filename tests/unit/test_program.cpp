// Semantics of communication programs (sim/program): programs built in C++
// through Program, or read from configs/programs/*.json and tests/programs/,
// run by the Scheduler on the real A2 / A3 server presets.
//
// Every assertion is a relation between computed timings (a task starts no
// earlier than another ends, two spans overlap, a wait ends when a record
// lands); no time is copied from an output. SystemC elaborates once per
// process: one Platform per TEST_CASE, no SECTIONs; several runs on one
// platform are fine.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "models/npu/task_engine.h"
#include "sim/program/program.h"
#include "sim/program/program_json.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

using hcclsim::testing::source_file;
std::string a2_server() { return source_file("configs/topologies/a2-server.json"); }
std::string a3_server() { return source_file("configs/topologies/a3-server.json"); }


Program program_for(const Platform& platform) {
  return Program(platform.spec());
}

// Earliest start and latest end of `ids` restricted to tasks on `rank`.
struct Span {
  Time start{~0ULL};
  Time end{};
  int tasks = 0;
};
Span span_on(const Program::Built& built, const RunResult& run, const std::vector<TaskId>& ids, int rank) {
  Span s;
  for (TaskId id : ids) {
    if (built.graph.rank_of(id) != rank) continue;
    REQUIRE(run.timings[id].finished);
    s.start = std::min(s.start, run.timings[id].start);
    s.end = std::max(s.end, run.timings[id].end);
    ++s.tasks;
  }
  return s;
}
// Over every repeat of a handle.
Span span_on(const Program::Built& built, const RunResult& run, const Program::HandleInfo& h, int rank) {
  std::vector<TaskId> all;
  for (const auto& ids : h.tasks) all.insert(all.end(), ids.begin(), ids.end());
  return span_on(built, run, all, rank);
}

const Program::HandleInfo& handle_of(const Program::Built& built, int domain, int handle) {
  for (const Program::HandleInfo& h : built.handles) {
    if (h.domain == domain && h.handle == handle) return h;
  }
  FAIL("no handle " << handle << " in domain " << domain);
  return built.handles.front();
}

// The tasks of the thread named `name` on `rank`, in order.
const std::vector<TaskId>& thread_tasks(const TaskGraph& g, int rank, const std::string& name) {
  for (const Thread& th : g.threads()) {
    if (th.rank == rank && th.name == name) return th.tasks;
  }
  FAIL("no thread '" << name << "' on rank " << rank);
  return g.threads().front().tasks;
}

// The `occurrence`-th task (0-based) whose label is exactly `label` on the
// kernel thread `kernel` of `rank`.
TaskId kernel_task(const TaskGraph& g, int rank, const std::string& label, int occurrence = 0,
                   const std::string& kernel = "kernel/AIV") {
  for (TaskId id : thread_tasks(g, rank, kernel)) {
    if (g.label(g.task(id)) == label && occurrence-- == 0) return id;
  }
  FAIL("no task '" << label << "' on rank " << rank << " " << kernel);
  return 0;
}

// Query result as tools/hcclsim_main.cpp computes it: repeats of the handle
// whose every task on the querying rank ended by the time the Query ran.
int completed_at(const Program::Built& built, const RunResult& run, const Program::QueryInfo& q) {
  int done = 0;
  for (const Program::HandleInfo& h : built.handles) {
    if (h.domain != q.domain || h.handle != q.handle) continue;
    for (const auto& ids : h.tasks) {
      bool finished = true;
      for (TaskId id : ids) {
        if (built.graph.rank_of(id) == q.rank) finished = finished && run.timings[id].end <= run.timings[q.task].start;
      }
      done += finished ? 1 : 0;
    }
  }
  return done;
}

// A kernel on the AIV cores of `rank` that binds context 0 to `domain`.
void init_aiv(Program& p, int rank, int domain, int context = 0) {
  REQUIRE(p.hccl_init(rank, CoreKind::Aiv, context, domain) == HCCL_SUCCESS);
  REQUIRE(p.hccl_set_tiling(rank, CoreKind::Aiv, context) == HCCL_SUCCESS);
}

Program::PrepareArgs collective(CollOp op, std::uint64_t count, int repeat = 1) {
  Program::PrepareArgs a;
  a.op = op;
  a.count = count;
  a.dtype = DataType::Fp16;
  a.repeat = repeat;
  return a;
}

HcclHandle prepare(Program& p, int rank, int context, const Program::PrepareArgs& args) {
  HcclResult r = HCCL_E_INTERNAL;
  const HcclHandle h = p.hccl_prepare(rank, CoreKind::Aiv, context, args, &r);
  INFO(p.last_error());
  REQUIRE(r == HCCL_SUCCESS);
  REQUIRE(h >= 0);
  return h;
}

RunResult run_ok(Scheduler& scheduler, const Program::Built& built) {
  const RunResult r = scheduler.run(built.graph);
  INFO(r.failure);
  REQUIRE(r.failure.empty());
  REQUIRE_FALSE(r.timed_out);
  return r;
}

}  // namespace

// ------------------------------------------------------------ Commit / Wait

TEST_CASE("program: a prepared collective starts on each rank only after that rank's Commit", "[program][commit]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1, 2, 3};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    init_aiv(p, r, 0);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllReduce, 64 * 1024));
    // Vector work of a different length on each rank delays its Commit.
    REQUIRE(p.kernel_vector(r, static_cast<std::uint64_t>(r + 1) * 4 * 1024 * 1024, 1) == HCCL_SUCCESS);
    REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const Program::HandleInfo& h = handle_of(built, 0, 0);
  Time previous_commit{};
  for (int r : ranks) {
    const TaskId commit = kernel_task(built.graph, r, "Commit d0 handle 0");
    const Span s = span_on(built, run, h, r);
    INFO("rank " << r);
    REQUIRE(s.tasks > 0);
    CHECK(s.start >= run.timings[commit].end);
    // The Commits really are staggered, so the gate is exercised per rank.
    CHECK(run.timings[commit].end > previous_commit);
    previous_commit = run.timings[commit].end;
  }
}

TEST_CASE("program: Wait ends no earlier than the last task of its collective on that rank", "[program][wait]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    init_aiv(p, r, 0);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllGather, 256 * 1024));
    REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const Program::HandleInfo& h = handle_of(built, 0, 0);
  for (int r : ranks) {
    INFO("rank " << r);
    const TaskId wait = kernel_task(built.graph, r, "Wait d0 handle 0");
    const TaskId commit = kernel_task(built.graph, r, "Commit d0 handle 0");
    const Span s = span_on(built, run, h, r);
    CHECK(run.timings[wait].end >= s.end);
    // The Wait is the next kernel call after the Commit, so without its
    // dependency it would have ended right after the collective started.
    CHECK(run.timings[commit].end <= s.start);
    CHECK(s.end > s.start);
    // Finalize follows the Wait.
    const TaskId fin = kernel_task(built.graph, r, "Finalize context 0");
    CHECK(run.timings[fin].start >= run.timings[wait].end);
  }
  CHECK(run.elapsed() > Time{});
}

TEST_CASE("program: Query reports the repeats finished on its rank when it runs and does not block", "[program][query]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    init_aiv(p, r, 0);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllReduce, 1024 * 1024, 2));
    REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_query(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);   // before any Wait
    REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_query(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);   // after Wait #1
    REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_query(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);   // after Wait #2
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  REQUIRE(built.queries.size() == 6);
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const Program::HandleInfo& h = handle_of(built, 0, 0);
  REQUIRE(h.tasks.size() == 2);
  for (int r : ranks) {
    INFO("rank " << r);
    std::vector<const Program::QueryInfo*> qs;
    for (const auto& q : built.queries) {
      if (q.rank == r) qs.push_back(&q);
    }
    REQUIRE(qs.size() == 3);
    const Span first = span_on(built, run, h.tasks[0], r);
    // Query #1 runs while repeat 1 is still in flight: it did not block, and reports 0.
    CHECK(run.timings[qs[0]->task].start < first.end);
    CHECK(completed_at(built, run, *qs[0]) == 0);
    // After Wait #k, exactly k repeats are done (repeat k+1 is not even committed).
    CHECK(completed_at(built, run, *qs[1]) == 1);
    CHECK(completed_at(built, run, *qs[2]) == 2);
    for (const auto* q : qs) {
      CHECK(q->domain == 0);
      CHECK(q->handle == 0);
    }
  }
}

TEST_CASE("program: repeat 3 with three Commits runs three times in order and Wait k returns after repeat k",
          "[program][repeat]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1, 2, 3};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    init_aiv(p, r, 0);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllReduce, 256 * 1024, 3));
    for (int k = 0; k < 3; ++k) REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    for (int k = 0; k < 3; ++k) REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  const Program::HandleInfo& h = handle_of(built, 0, 0);
  REQUIRE(h.repeat == 3);
  REQUIRE(h.tasks.size() == 3);
  // Each repeat is a full expansion of the same collective.
  CHECK(h.tasks[0].size() == h.tasks[1].size());
  CHECK(h.tasks[1].size() == h.tasks[2].size());
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  for (int r : ranks) {
    std::vector<Span> rep;
    for (int k = 0; k < 3; ++k) rep.push_back(span_on(built, run, h.tasks[static_cast<std::size_t>(k)], r));
    for (int k = 0; k < 3; ++k) {
      INFO("rank " << r << " repeat " << k);
      const TaskId commit = kernel_task(built.graph, r, "Commit d0 handle 0", k);
      const TaskId wait = kernel_task(built.graph, r, "Wait d0 handle 0", k);
      CHECK(rep[static_cast<std::size_t>(k)].start >= run.timings[commit].end);
      if (k > 0) CHECK(rep[static_cast<std::size_t>(k)].start >= rep[static_cast<std::size_t>(k - 1)].end);
      CHECK(run.timings[wait].end >= rep[static_cast<std::size_t>(k)].end);
      // Wait #k does not wait for the later repeats.
      if (k < 2) CHECK(run.timings[wait].end < rep[static_cast<std::size_t>(k + 1)].end);
    }
  }
}

TEST_CASE("program: with Commit and Wait interleaved each repeat starts after the previous Wait", "[program][repeat]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  for (int r : ranks) {
    init_aiv(p, r, 0);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllGather, 128 * 1024, 3));
    for (int k = 0; k < 3; ++k) {
      REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
      REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    }
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const Program::HandleInfo& h = handle_of(built, 0, 0);
  for (int r : ranks) {
    for (int k = 1; k < 3; ++k) {
      INFO("rank " << r << " repeat " << k);
      const TaskId previous_wait = kernel_task(built.graph, r, "Wait d0 handle 0", k - 1);
      CHECK(span_on(built, run, h.tasks[static_cast<std::size_t>(k)], r).start >= run.timings[previous_wait].end);
    }
  }
}

TEST_CASE("program: several collectives prepared on one domain run one after the other in Prepare order",
          "[program][order]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  const std::vector<CollOp> ops{CollOp::AllReduce, CollOp::AlltoAll, CollOp::AllGather, CollOp::ReduceScatter};
  for (int r : ranks) {
    init_aiv(p, r, 0);
    std::vector<HcclHandle> hs;
    for (CollOp op : ops) hs.push_back(prepare(p, r, 0, collective(op, 64 * 1024, op == CollOp::AllGather ? 2 : 1)));
    // Commits in reverse order: the domain still runs its collectives in Prepare order.
    REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, hs[2]) == HCCL_SUCCESS);
    for (int k = 3; k >= 0; --k) REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, hs[static_cast<std::size_t>(k)]) == HCCL_SUCCESS);
    for (HcclHandle h : hs) {
      const int repeat = h == hs[2] ? 2 : 1;
      for (int k = 0; k < repeat; ++k) REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    }
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  const Program::Built built = p.build();
  REQUIRE(built.handles.size() == ops.size());
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  for (int r : ranks) {
    Time previous_end{};
    for (std::size_t h = 0; h < ops.size(); ++h) {
      const Program::HandleInfo& info = handle_of(built, 0, static_cast<int>(h));
      CHECK(info.op == coll_op_name(ops[h]));
      for (std::size_t k = 0; k < info.tasks.size(); ++k) {
        INFO("rank " << r << " handle " << h << " repeat " << k);
        const Span s = span_on(built, run, info.tasks[k], r);
        REQUIRE(s.tasks > 0);
        CHECK(s.start >= previous_end);
        previous_end = s.end;
      }
    }
  }
}

// ------------------------------------------------ InterHcclGroupSync (seed)

namespace {

// For each rank of the seed (0..3): the AllGather of domain 1 against the
// AlltoAll of domain 0 on that rank.
struct SeedSpans {
  Span alltoall;
  Span allgather;
};
std::vector<SeedSpans> seed_spans(const Program::Built& built, const RunResult& run) {
  const Program::HandleInfo& a2a = handle_of(built, 0, 0);
  const Program::HandleInfo& ag = handle_of(built, 1, 0);
  REQUIRE(a2a.op == coll_op_name(CollOp::AlltoAll));
  REQUIRE(ag.op == coll_op_name(CollOp::AllGather));
  std::vector<SeedSpans> out;
  for (int r = 0; r < 4; ++r) {
    out.push_back(SeedSpans{span_on(built, run, a2a, r), span_on(built, run, ag, r)});
    REQUIRE(out.back().alltoall.tasks > 0);
    REQUIRE(out.back().allgather.tasks > 0);
  }
  return out;
}

}  // namespace

TEST_CASE("program: the seed AlltoAll then AllGather from JSON - InterHcclGroupSync orders them on every rank",
          "[program][inter_group_sync][seed]") {
  Platform platform(load_topology(a3_server()));
  REQUIRE(platform.spec().npu.hccl_rules == HcclRules::A3);
  Scheduler scheduler(platform);
  // The seed itself (10 elements) and the same program with 1M fp16 elements.
  for (const std::string file : {"configs/programs/seed-alltoall-allgather.json",
                                 "tests/programs/seed-alltoall-allgather-1m.json"}) {
    INFO(file);
    Program p = program_for(platform);
    const LoadedProgram loaded = load_program(source_file(file), p);
    CHECK(loaded.handle_names.at({0, 0}) == "group0_handle");
    CHECK(loaded.handle_names.at({1, 0}) == "group1_handle");
    const Program::Built built = p.build();
    const RunResult run = run_ok(scheduler, built);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      const SeedSpans s = seed_spans(built, run)[static_cast<std::size_t>(r)];
      CHECK(s.allgather.start >= s.alltoall.end);
      // And the Wait of the AllGather returns after it.
      const TaskId wait1 = kernel_task(built.graph, r, "Wait d1 handle 0");
      CHECK(run.timings[wait1].end >= s.allgather.end);
    }
  }
}

TEST_CASE("program: the seed AlltoAll and AllGather from JSON without InterHcclGroupSync overlap",
          "[program][inter_group_sync][seed]") {
  Platform platform(load_topology(a3_server()));
  Scheduler scheduler(platform);
  Program p = program_for(platform);
  load_program(source_file("tests/programs/seed-alltoall-allgather-1m-nosync.json"), p);
  const Program::Built built = p.build();
  const RunResult run = run_ok(scheduler, built);
  int overlapping = 0;
  for (const SeedSpans& s : seed_spans(built, run)) {
    if (s.allgather.start < s.alltoall.end && s.alltoall.start < s.allgather.end) ++overlapping;
  }
  CHECK(overlapping >= 1);

  // The same file with the sync is longer in total: the sync costs time.
  Program with_sync = program_for(platform);
  load_program(source_file("tests/programs/seed-alltoall-allgather-1m.json"), with_sync);
  const Program::Built built_sync = with_sync.build();
  const RunResult run_sync = run_ok(scheduler, built_sync);
  CHECK(run_sync.elapsed() > run.elapsed());
}

// ---------------------------------------------------- thread / notify (seed)

TEST_CASE("program: the thread/notify seed - each wait ends exactly when the other thread's record lands",
          "[program][notify][seed]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  load_program(source_file("configs/programs/seed-thread-notify.json"), p);
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  // cpuThread (with_stream) is thread 0, aicpuThread thread 1.
  const auto& cpu = thread_tasks(built.graph, 0, "d0/CPU_TS/thread0");
  const auto& aicpu = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread1");
  REQUIRE(cpu.size() == 2);    // record, wait
  REQUIRE(aicpu.size() == 3);  // wait, local copy, record
  const TaskId cpu_record = cpu[0], cpu_wait = cpu[1];
  const TaskId aicpu_wait = aicpu[0], aicpu_copy = aicpu[1], aicpu_record = aicpu[2];
  REQUIRE(built.graph.task(cpu_record).kind == TaskKind::NotifyRecord);
  REQUIRE(built.graph.task(cpu_wait).kind == TaskKind::NotifyWait);
  REQUIRE(built.graph.task(aicpu_wait).kind == TaskKind::NotifyWait);
  REQUIRE(built.graph.task(aicpu_copy).kind == TaskKind::Memcpy);
  REQUIRE(built.graph.task(aicpu_record).kind == TaskKind::NotifyRecord);
  // The records target the waiting thread's notify (through the exported handles).
  CHECK(built.graph.task(cpu_record).notify == built.graph.task(aicpu_wait).notify);
  CHECK(built.graph.task(aicpu_record).notify == built.graph.task(cpu_wait).notify);
  CHECK(built.graph.task(cpu_wait).notify != built.graph.task(aicpu_wait).notify);

  CHECK(run.timings[aicpu_wait].released_by == static_cast<std::int64_t>(cpu_record));
  CHECK(run.timings[aicpu_wait].end == run.timings[cpu_record].end);
  CHECK(run.timings[aicpu_copy].start >= run.timings[aicpu_wait].end);
  CHECK(run.timings[cpu_wait].released_by == static_cast<std::int64_t>(aicpu_record));
  CHECK(run.timings[cpu_wait].end == run.timings[aicpu_record].end);
  CHECK(run.end == run.timings[cpu_wait].end);
}

TEST_CASE("program: a notify wait whose timeout expires fails the run with HCCL_E_TIMEOUT", "[program][notify][timeout]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  REQUIRE(p.add_domain(0, {0}) == HCCL_SUCCESS);
  ThreadHandle t[2];
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_CPU_TS, 2, 1, t) == HCCL_SUCCESS);
  const Time timeout = Time::from_us(1);
  // t[0] waits 1 us; t[1] records only after a 16 MiB local copy.
  REQUIRE(p.notify_wait(t[0], 0, timeout) == HCCL_SUCCESS);
  REQUIRE(p.local_copy(t[1], 16 * 1024 * 1024) == HCCL_SUCCESS);
  REQUIRE(p.notify_record(t[1], t[0], 0) == HCCL_SUCCESS);
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = scheduler.run(built.graph);
  const TaskId wait = thread_tasks(built.graph, 0, "d0/CPU_TS/thread0").at(0);
  const TaskId copy = thread_tasks(built.graph, 0, "d0/CPU_TS/thread1").at(0);
  REQUIRE(run.timings[wait].started);
  // Precondition: the record really comes later than the timeout.
  REQUIRE(run.timings[copy].end > run.timings[wait].start + timeout);
  CHECK(run.timed_out);
  CHECK_FALSE(run.timings[wait].finished);
  CHECK_THAT(run.failure, Contains("HCCL_E_TIMEOUT"));
  CHECK_THAT(run.failure, Contains(built.graph.describe(wait)));   // thread and notify
  CHECK_THAT(run.failure, Contains("d0/CPU_TS/thread0"));
  CHECK_THAT(run.failure, Contains("notify " + std::to_string(built.graph.task(wait).notify)));
  CHECK_THAT(run.failure, Contains("at " + format_us(run.timings[wait].start + timeout) + " us"));
}

// ------------------------------------------- programs that cannot finish

namespace {
// Two host threads of rank 0, each waiting (with `timeout`, 0 = forever)
// for the other's record before recording to it.
Program::Built two_threads_waiting_on_each_other(Program& p, Time timeout) {
  REQUIRE(p.add_domain(0, {0}) == HCCL_SUCCESS);
  ThreadHandle a = 0, b = 0;
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_CPU_TS, 1, 1, &a) == HCCL_SUCCESS);
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_CPU_TS, 1, 1, &b) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(a, 0, timeout) == HCCL_SUCCESS);
  REQUIRE(p.notify_record(a, b, 0) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(b, 0, timeout) == HCCL_SUCCESS);
  REQUIRE(p.notify_record(b, a, 0) == HCCL_SUCCESS);
  return p.build();
}
}  // namespace

TEST_CASE("program: two host threads each waiting first for the other's record is a cycle", "[program][graph_error]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const Program::Built built = two_threads_waiting_on_each_other(p, Time{});
  const TaskId wait_a = thread_tasks(built.graph, 0, "d0/CPU_TS/thread0").at(0);
  const TaskId wait_b = thread_tasks(built.graph, 0, "d0/CPU_TS/thread1").at(0);
  Scheduler scheduler(platform);
  try {
    scheduler.run(built.graph);
    FAIL("a cyclic program ran");
  } catch (const GraphError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("cycle"));
    CHECK_THAT(what, Contains(built.graph.describe(wait_a)));
    CHECK_THAT(what, Contains(built.graph.describe(wait_b)));
  }
}

// The cycle check runs only once a run has not finished: a cycle whose
// waits time out ends the run by timeout, and is still refused as a cycle.
TEST_CASE("program: a cycle of waits with timeouts is refused as a cycle, not reported as a timeout",
          "[program][graph_error]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  const Program::Built built = two_threads_waiting_on_each_other(p, Time::from_us(5));
  Scheduler scheduler(platform);
  try {
    scheduler.run(built.graph);
    FAIL("a cyclic program ran");
  } catch (const GraphError& e) {
    CHECK_THAT(std::string(e.what()), Contains("cycle"));
  }
}

TEST_CASE("program: a host wait that nothing records is refused before the run", "[program][graph_error]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  REQUIRE(p.add_domain(0, {0}) == HCCL_SUCCESS);
  ThreadHandle t = 0;
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 2, &t) == HCCL_SUCCESS);
  REQUIRE(p.local_copy(t, 4096) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(t, 1, Time{}) == HCCL_SUCCESS);
  const Program::Built built = p.build();
  const TaskId wait = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread0").at(1);
  Scheduler scheduler(platform);
  try {
    scheduler.run(built.graph);
    FAIL("a wait without a record ran");
  } catch (const GraphError& e) {
    CHECK_THAT(std::string(e.what()), Contains(built.graph.describe(wait)));
    CHECK_THAT(std::string(e.what()), Contains("no task records it"));
  }
}

TEST_CASE("program: a Wait on a handle that is never committed makes build throw ProgramError", "[program][build]") {
  const TopologySpec spec = load_topology(a2_server());
  Program p(spec);
  REQUIRE(p.add_domain(3, {0, 1}) == HCCL_SUCCESS);
  for (int r : {0, 1}) {
    init_aiv(p, r, 3);
    const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllReduce, 1024));
    // Recorded without complaint call by call: only the whole program cannot finish.
    REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
    REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
  }
  try {
    (void)p.build();
    FAIL("build accepted a Wait that can never return");
  } catch (const ProgramError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("never commits"));
    CHECK_THAT(what, Contains("handle 0"));
    CHECK_THAT(what, Contains("domain 3"));
  }
}

TEST_CASE("program: a record lost on a notify that is already set ends the run with a deadlock report",
          "[program][deadlock]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  REQUIRE(p.add_domain(0, {0}) == HCCL_SUCCESS);
  ThreadHandle t[2];
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 2, 1, t) == HCCL_SUCCESS);
  const ThreadHandle sender = t[0], receiver = t[1];
  // Both records land while the receiver is still copying: a notify is a
  // flag, so the second is lost and the second wait never returns.
  REQUIRE(p.notify_record(sender, receiver, 0) == HCCL_SUCCESS);
  REQUIRE(p.notify_record(sender, receiver, 0) == HCCL_SUCCESS);
  REQUIRE(p.local_copy(receiver, 4 * 1024 * 1024) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(receiver, 0, Time{}) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(receiver, 0, Time{}) == HCCL_SUCCESS);
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = scheduler.run(built.graph);  // returns: never hangs
  const auto& send = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread0");
  const auto& recv = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread1");
  REQUIRE(recv.size() == 3);
  // Precondition: both records had landed before the first wait started.
  REQUIRE(run.timings[send.at(1)].end <= run.timings[recv[1]].start);
  CHECK(run.timings[recv[1]].finished);
  CHECK_FALSE(run.timings[recv[2]].finished);
  CHECK_FALSE(run.timed_out);
  CHECK(platform.engine(0).records_lost() == 1);
  CHECK_THAT(run.failure, Contains("deadlock"));
  CHECK_THAT(run.failure, Contains(built.graph.describe(recv[2])));   // the blocked thread and its wait
  CHECK_THAT(run.failure, Contains("waiting for a notify record"));
}

// ------------------------------------------------------------ fused kernel

namespace {

// On every rank of an A2 server: a matmul on the AIC cores and/or an
// AllGather issued from the AIV cores (the fused-matmul-allgather config).
constexpr std::uint64_t kMatmul = 4096;
constexpr std::uint64_t kGatherCount = 8 * 1024 * 1024;  // fp16 per rank

Program::Built fused(const Platform& platform, bool matmul, bool allgather) {
  Program p = program_for(platform);
  std::vector<int> ranks;
  for (int r = 0; r < platform.npus(); ++r) ranks.push_back(r);
  REQUIRE(p.add_domain(0, ranks) == HCCL_SUCCESS);
  const int aic = platform.spec().npu.cores.aic;
  for (int r : ranks) {
    if (matmul) REQUIRE(p.kernel_matmul(r, kMatmul, kMatmul, kMatmul, aic) == HCCL_SUCCESS);
    if (allgather) {
      init_aiv(p, r, 0);
      const HcclHandle h = prepare(p, r, 0, collective(CollOp::AllGather, kGatherCount));
      REQUIRE(p.hccl_commit(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
      REQUIRE(p.hccl_wait(r, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
      REQUIRE(p.hccl_finalize(r, CoreKind::Aiv, 0) == HCCL_SUCCESS);
    }
  }
  return p.build();
}

}  // namespace

TEST_CASE("program: a fused kernel overlaps the AIC matmul with the AllGather issued from AIV", "[program][fused]") {
  Platform platform(load_topology(a2_server()));
  Scheduler scheduler(platform);
  const Program::Built both = fused(platform, true, true);
  const Program::Built matmul_only = fused(platform, true, false);
  const Program::Built gather_only = fused(platform, false, true);
  const RunResult run_both = run_ok(scheduler, both);
  const RunResult run_matmul = run_ok(scheduler, matmul_only);
  const RunResult run_gather = run_ok(scheduler, gather_only);
  const Time total = run_both.elapsed();
  const Time m = run_matmul.elapsed();
  const Time a = run_gather.elapsed();
  CHECK(total < m + a);
  CHECK(total >= std::max(m, a));
  // The matmul and the AllGather really run at the same time on rank 0.
  const TaskId mm = thread_tasks(both.graph, 0, "kernel/AIC").at(0);
  REQUIRE(both.graph.task(mm).kind == TaskKind::Compute);
  const Span g = span_on(both, run_both, handle_of(both, 0, 0), 0);
  CHECK(run_both.timings[mm].start < g.end);
  CHECK(g.start < run_both.timings[mm].end);

  // configs/programs/fused-matmul-allgather.json is the same kernel.
  Program from_file = program_for(platform);
  load_program(source_file("configs/programs/fused-matmul-allgather.json"), from_file);
  const RunResult run_file = run_ok(scheduler, from_file.build());
  CHECK(run_file.elapsed() == total);
}

// ------------------------------------------------------- write with notify

TEST_CASE("program: write_with_notify releases the peer's wait only after the data has landed", "[program][write]") {
  Platform platform(load_topology(a2_server()));
  Program p = program_for(platform);
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  ThreadHandle t0 = 0, t1 = 0;
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 1, &t0) == HCCL_SUCCESS);
  REQUIRE(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 1, &t1) == HCCL_SUCCESS);
  const std::uint64_t bytes = 8 * 1024 * 1024;
  REQUIRE(p.write_with_notify(t0, 1, bytes, t1, 0) == HCCL_SUCCESS);
  REQUIRE(p.notify_wait(t1, 0, Time{}) == HCCL_SUCCESS);
  const Program::Built built = p.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const auto& writer = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread0");
  const auto& reader = thread_tasks(built.graph, 1, "d0/AICPU_TS/thread0");
  REQUIRE(writer.size() == 2);
  REQUIRE(reader.size() == 1);
  const TaskId write = writer[0], record = writer[1], wait = reader[0];
  REQUIRE(built.graph.task(write).kind == TaskKind::Memcpy);
  CHECK(built.graph.task(write).dst.rank == 1);
  CHECK(built.graph.task(write).bytes == bytes);
  REQUIRE(built.graph.task(record).kind == TaskKind::NotifyRecord);
  CHECK(built.graph.task(record).peer == 1);
  CHECK(run.timings[wait].released_by == static_cast<std::int64_t>(record));
  CHECK(run.timings[record].start >= run.timings[write].end);
  CHECK(run.timings[wait].end >= run.timings[write].end);
  // The wait was blocked from the start and ends when the record lands.
  CHECK(run.timings[wait].start < run.timings[write].end);
  CHECK(run.timings[wait].end == run.timings[record].end);
}
