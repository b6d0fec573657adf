// MoE dispatch and combine called from program kernels (sim/program with
// sim/moe): ordering against the kernel's AIV list and against AIC work
// through cross-core flags, the same time as `hcclsim moe` (run_moe) for the
// same parameters, and bad input named by file and JSON path.
//
// Assertions relate computed timings (a task starts no earlier than another
// ends, two runs give equal times); no time is copied from an output. One
// Platform per TEST_CASE (SystemC elaborates once per process); several runs
// on one platform are fine.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "sim/moe/moe.h"
#include "sim/program/program.h"
#include "sim/program/program_json.h"
#include "sim/scheduler.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

using hcclsim::testing::source_file;

// A program on the platform's NPUs, servers and SDMA domains (as `hcclsim run` sets them up).
struct ProgramOn : Program {
  explicit ProgramOn(const Platform& platform)
      : Program(platform.spec()) {}
};

std::vector<int> first_ranks(int n) {
  std::vector<int> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

MoeParams small_params(int ep) {
  MoeParams p;
  p.ep = ep;
  p.tokens = 256;
  p.hidden = 2048;
  p.topk = 8;
  p.experts = 64;
  return p;
}

RunResult run_ok(Scheduler& scheduler, const Program::Built& built) {
  RunResult r = scheduler.run(built.graph);
  REQUIRE(r.failure.empty());
  return r;
}

struct Span {
  Time start{~0ULL};
  Time end{};
  int tasks = 0;
};
// Earliest start and latest end of the call's tasks on `rank`.
Span call_on(const Program::Built& built, const RunResult& run, const Program::MoeCallInfo& call, int rank) {
  Span s;
  for (TaskId id : call.tasks) {
    if (built.graph.rank_of(id) != rank) continue;
    REQUIRE(run.timings[id].finished);
    s.start = std::min(s.start, run.timings[id].start);
    s.end = std::max(s.end, run.timings[id].end);
    ++s.tasks;
  }
  REQUIRE(s.tasks > 0);
  return s;
}

// The tasks of `rank`'s kernel list (thread "kernel/AIC" or "kernel/AIV") whose label is `label`, in order.
std::vector<TaskId> kernel_tasks(const TaskGraph& g, int rank, const std::string& list, const std::string& label) {
  std::vector<TaskId> out;
  for (const Thread& th : g.threads()) {
    if (th.rank != rank || th.name != "kernel/" + list) continue;
    for (TaskId id : th.tasks) {
      if (g.label(g.task(id)) == label) out.push_back(id);
    }
  }
  return out;
}

// A program file with `aiv_step` as the first AIV step of a kernel on ranks 0..ranks-1.
std::string write_program(const std::string& name, const std::string& aiv_step, int ranks = 8) {
  const std::string file = std::string("/tmp/hcclsim_test_") + name + ".json";
  std::ofstream out(file);
  out << R"({"name": ")" << name << R"(", "domains": [], "kernels": [{"ranks": [)";
  for (int r = 0; r < ranks; ++r) out << (r ? ", " : "") << r;
  out << "], \"aiv\": [" << aiv_step << "]}]}\n";
  return file;
}

std::string load_error(Platform& platform, const std::string& file) {
  ProgramOn p(platform);
  try {
    load_program(file, p);
  } catch (const InputError& e) {
    std::remove(file.c_str());
    return e.what();
  }
  std::remove(file.c_str());
  FAIL("no InputError for " << file);
  return {};
}

}  // namespace

TEST_CASE("program moe: the shipped A3 layer runs the grouped matmul after each rank's dispatch and combine after it",
          "[program][moe][order]") {
  Platform platform(load_topology(source_file("configs/topologies/a3-server.json")));
  Scheduler scheduler(platform);
  ProgramOn program(platform);
  const LoadedProgram loaded = load_program(source_file("configs/programs/moe-layer-a3.json"), program);
  const Program::Built built = program.build();
  const RunResult run = run_ok(scheduler, built);
  REQUIRE(built.moe_calls.size() == 2);
  const Program::MoeCallInfo& dispatch = built.moe_calls[0];
  const Program::MoeCallInfo& combine = built.moe_calls[1];
  CHECK(dispatch.op == "moe_dispatch");
  CHECK(combine.op == "moe_combine");
  CHECK(loaded.moe_names.at(0) == "dispatch");
  CHECK(dispatch.ranks == first_ranks(16));
  for (int rank = 0; rank < 16; ++rank) {
    const Span d = call_on(built, run, dispatch, rank);
    const Span c = call_on(built, run, combine, rank);
    const std::vector<TaskId> matmuls = kernel_tasks(built.graph, rank, "AIC", "matmul");
    const std::vector<TaskId> vectors = kernel_tasks(built.graph, rank, "AIV", "vector");
    REQUIRE(matmuls.size() == 2);
    REQUIRE(vectors.size() == 1);
    const TaskTiming& gate_up = run.timings[matmuls[0]];
    const TaskTiming& swiglu = run.timings[vectors[0]];
    const TaskTiming& down = run.timings[matmuls[1]];
    INFO("rank " << rank);
    // Boundaries on this rank: dispatch -> gate-up (AIC) -> SwiGLU (AIV) -> down (AIC) -> combine.
    CHECK(gate_up.start >= d.end);
    CHECK(swiglu.start >= gate_up.end);
    CHECK(down.start >= swiglu.end);
    CHECK(c.start >= down.end);
    // The matmul waits for this rank's dispatch only: no later than a
    // cross-core set and its wait after the slowest rank's.
    CHECK(gate_up.start > Time{});
  }
  // Ranks finish dispatch at different times, and each starts its matmul on its own.
  Time first_end{~0ULL};
  Time last_end{};
  for (int rank = 0; rank < 16; ++rank) {
    const Span d = call_on(built, run, dispatch, rank);
    first_end = std::min(first_end, d.end);
    last_end = std::max(last_end, d.end);
  }
  CHECK(first_end < last_end);
  bool some_rank_before_slowest = false;
  for (int rank = 0; rank < 16; ++rank) {
    const TaskTiming& gate_up = run.timings[kernel_tasks(built.graph, rank, "AIC", "matmul").at(0)];
    some_rank_before_slowest = some_rank_before_slowest || gate_up.start < last_end;
  }
  CHECK(some_rank_before_slowest);
}

TEST_CASE("program moe: AIV steps after an MoE call start after its tasks on that rank, steps before it end first",
          "[program][moe][order]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  Scheduler scheduler(platform);
  ProgramOn program(platform);
  const std::vector<int> ranks = first_ranks(8);
  for (int r : ranks) {
    REQUIRE(program.kernel_vector(r, 64 << 20, 48) == HCCL_SUCCESS);
    REQUIRE(program.kernel_moe(r, ranks, MoePhase::Dispatch, small_params(8)) == HCCL_SUCCESS);
    REQUIRE(program.kernel_vector(r, 64 << 20, 48) == HCCL_SUCCESS);
  }
  const Program::Built built = program.build();
  const RunResult run = run_ok(scheduler, built);
  REQUIRE(built.moe_calls.size() == 1);
  for (int rank : ranks) {
    const std::vector<TaskId> v = kernel_tasks(built.graph, rank, "AIV", "vector");
    REQUIRE(v.size() == 2);
    const Span call = call_on(built, run, built.moe_calls[0], rank);
    INFO("rank " << rank);
    CHECK(call.start >= run.timings[v[0]].end);
    CHECK(run.timings[v[1]].start >= call.end);
  }
}

TEST_CASE("program moe: a dispatch or combine alone in a program takes run_moe's time for the same parameters",
          "[program][moe][same_builder]") {
  Platform platform(load_topology(source_file("configs/topologies/a3-server.json")));
  Scheduler scheduler(platform);
  MoeParams p = small_params(16);
  p.tokens = 512;
  p.hidden = 7168;
  p.experts = 256;
  for (const MoePhase phase : {MoePhase::Dispatch, MoePhase::Combine}) {
    const MoeRun alone = run_moe(platform, p, {phase}).front();
    ProgramOn program(platform);
    for (int r = 0; r < 16; ++r) REQUIRE(program.kernel_moe(r, first_ranks(16), phase, p) == HCCL_SUCCESS);
    const Program::Built built = program.build();
    const RunResult run = run_ok(scheduler, built);
    REQUIRE(built.moe_calls.size() == 1);
    CHECK(built.moe_calls[0].kernel == alone.kernel);
    // run_moe times each rank from the run's start to its last task.
    std::vector<double> per_rank;
    for (int rank = 0; rank < 16; ++rank) {
      per_rank.push_back((call_on(built, run, built.moe_calls[0], rank).end - run.begin).us());
    }
    INFO((phase == MoePhase::Dispatch ? "dispatch" : "combine"));
    CHECK(*std::max_element(per_rank.begin(), per_rank.end()) == alone.time_us);
    CHECK(*std::min_element(per_rank.begin(), per_rank.end()) == alone.time_min_us);
    CHECK(built.moe_calls[0].tasks.size() == alone.tasks);
  }
}

TEST_CASE("program moe: across two A2 servers the call takes run_moe's time (RDMA between the servers)",
          "[program][moe][same_builder][cluster]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-cluster.json"), {}, 2);
  Platform platform(spec);
  Scheduler scheduler(platform);
  MoeParams p = small_params(16);
  p.tokens = 128;
  p.mode = MoeMode::LowLatency;
  const MoeRun alone = run_moe(platform, p, {MoePhase::Dispatch}).front();
  REQUIRE(alone.link_bytes.count("roce") == 1);
  ProgramOn program(platform);
  for (int r = 0; r < 16; ++r) REQUIRE(program.kernel_moe(r, first_ranks(16), MoePhase::Dispatch, p) == HCCL_SUCCESS);
  const Program::Built built = program.build();
  const RunResult run = run_ok(scheduler, built);
  Time last{};
  for (int rank = 0; rank < 16; ++rank) last = std::max(last, call_on(built, run, built.moe_calls[0], rank).end);
  CHECK((last - run.begin).us() == alone.time_us);

  // Ranks 4..11 (half of each server) cannot be laid out: refused when the call is made.
  ProgramOn uneven(platform);
  std::vector<int> ranks{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  MoeParams q = small_params(12);
  q.experts = 96;
  CHECK(uneven.kernel_moe(4, ranks, MoePhase::Dispatch, q) == HCCL_E_PARA);
  CHECK_THAT(uneven.last_error(), Contains("SDMA domains") && Contains("4 and 8"));
}

TEST_CASE("program moe: the same program gives the same times bit for bit", "[program][moe][determinism]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  Scheduler scheduler(platform);
  std::vector<std::vector<TaskTiming>> timings;
  for (int i = 0; i < 2; ++i) {
    ProgramOn program(platform);
    load_program(source_file("configs/programs/moe-layer-a2.json"), program);
    const RunResult run = run_ok(scheduler, program.build());
    timings.push_back(run.timings);
    for (TaskTiming& t : timings.back()) {
      t.start = t.start - run.begin;
      t.end = t.end - run.begin;
    }
  }
  REQUIRE(timings[0].size() == timings[1].size());
  for (std::size_t i = 0; i < timings[0].size(); ++i) {
    CHECK(timings[0][i].start == timings[1][i].start);
    CHECK(timings[0][i].end == timings[1][i].end);
  }
}

TEST_CASE("program moe: every rank of a call must make it, with the same parameters", "[program][moe][build]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  const std::vector<int> ranks = first_ranks(8);
  ProgramOn differs(platform);
  REQUIRE(differs.kernel_moe(0, ranks, MoePhase::Dispatch, small_params(8)) == HCCL_SUCCESS);
  MoeParams other = small_params(8);
  other.seed = 2;
  CHECK(differs.kernel_moe(1, ranks, MoePhase::Dispatch, other) == HCCL_E_PARA);
  CHECK_THAT(differs.last_error(), Contains("differs from rank 0"));
  CHECK(differs.kernel_moe(1, ranks, MoePhase::Combine, small_params(8)) == HCCL_E_PARA);

  ProgramOn missing(platform);
  for (int r = 0; r < 7; ++r) REQUIRE(missing.kernel_moe(r, ranks, MoePhase::Dispatch, small_params(8)) == HCCL_SUCCESS);
  CHECK_THROWS_AS(missing.build(), ProgramError);
  CHECK_THROWS_WITH(missing.build(), Contains("rank 7 never makes MoE call 0"));

  ProgramOn wrong_ep(platform);
  CHECK(wrong_ep.kernel_moe(0, ranks, MoePhase::Dispatch, small_params(4)) == HCCL_E_PARA);
  CHECK_THAT(wrong_ep.last_error(), Contains("ep 4 on 8 ranks"));
}

TEST_CASE("program moe: a cross-core wait with no matching set on the other list makes build throw",
          "[program][moe][cross_core]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  ProgramOn program(platform);
  REQUIRE(program.kernel_cross_core_set(0, CoreKind::Aiv, 3) == HCCL_SUCCESS);
  REQUIRE(program.kernel_cross_core_wait(0, CoreKind::Aic, 3) == HCCL_SUCCESS);
  REQUIRE(program.kernel_cross_core_wait(0, CoreKind::Aic, 3) == HCCL_SUCCESS);
  CHECK_THROWS_AS(program.build(), ProgramError);
  CHECK_THROWS_WITH(program.build(), Contains("rank 0") && Contains("AIC list waits 2 times for cross-core flag 3") &&
                                         Contains("sets it once"));
  CHECK(program.kernel_cross_core_set(0, CoreKind::Aiv, 11) == HCCL_E_PARA);
  CHECK(program.kernel_cross_core_wait(0, CoreKind::Aic, -1) == HCCL_E_PARA);
  CHECK(program.kernel_cross_core_set(0, CoreKind::Aiv, 10) == HCCL_SUCCESS);
}

TEST_CASE("program moe: bad MoE steps in a program file name the file, the JSON path and what was expected",
          "[program][moe][json]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  const std::string good = R"("tokens": 64, "hidden": 1024, "topk": 8, "experts": 64)";
  {
    const std::string file = write_program("moe_topk", R"({"op": "moe_dispatch", "tokens": 64, "hidden": 1024, "topk": 9, "experts": 8})");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains(file) && Contains("$.kernels[0].aiv[0].topk") && Contains("at least that many experts"));
  }
  {
    const std::string file = write_program("moe_ep", R"({"op": "moe_dispatch", "ep": 16, )" + good + "}");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains(file) && Contains("$.kernels[0].aiv[0].ep") && Contains("8 ranks") && Contains("$.kernels[0].ranks"));
  }
  {
    const std::string file = write_program("moe_missing", R"({"op": "moe_combine", "tokens": 64, "topk": 8, "experts": 64})");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains(file) && Contains("$.kernels[0].aiv[0]") && Contains("hidden"));
  }
  {
    const std::string file = write_program("moe_hidden", R"({"op": "moe_dispatch", "tokens": 64, "hidden": 1000, "topk": 8, "experts": 64})");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains("$.kernels[0].aiv[0].hidden") && Contains("multiple of 128"));
  }
  {
    const std::string file = write_program("moe_mode", R"({"op": "moe_dispatch", "mode": "fast", )" + good + "}");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains("$.kernels[0].aiv[0].mode") && Contains("low_latency"));
  }
  {
    const std::string file = write_program("moe_routing", R"({"op": "moe_dispatch", "routing": "zipf:-1", )" + good + "}");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains("$.kernels[0].aiv[0].routing") && Contains("zipf:S"));
  }
  {
    const std::string file = write_program("moe_key", R"({"op": "moe_dispatch", "topK": 8, )" + good + "}");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains("$.kernels[0].aiv[0]") && Contains("unknown key 'topK'"));
  }
  {
    const std::string file = write_program("moe_flag", R"({"op": "cross_core_set", "flag": 11})");
    const std::string e = load_error(platform, file);
    CHECK_THAT(e, Contains("$.kernels[0].aiv[0].flag"));
  }
}
