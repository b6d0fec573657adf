// The HCCL-shaped C++ API (sim/program/hccl_api.h): the two seed examples
// written with the api:: functions as close to the seed text as the API
// allows, run on the server presets and checked as the JSON programs are;
// and the HcclResult codes the wrappers return.
//
// One Platform per TEST_CASE (SystemC elaborates once per process).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/program/hccl_api.h"
#include "sim/program/program_json.h"
#include "sim/scheduler.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;
using namespace hcclsim::api;
using Catch::Matchers::Contains;

namespace {

using hcclsim::testing::source_file;

Program program_for(const Platform& platform) {
  return Program(platform.spec());
}

struct Span {
  Time start{~0ULL};
  Time end{};
  int tasks = 0;
};
Span span_on(const Program::Built& built, const RunResult& run, const Program::HandleInfo& h, int rank) {
  Span s;
  for (const auto& ids : h.tasks) {
    for (TaskId id : ids) {
      if (built.graph.rank_of(id) != rank) continue;
      REQUIRE(run.timings[id].finished);
      s.start = std::min(s.start, run.timings[id].start);
      s.end = std::max(s.end, run.timings[id].end);
      ++s.tasks;
    }
  }
  return s;
}

const Program::HandleInfo& handle_of(const Program::Built& built, int domain, int handle) {
  for (const Program::HandleInfo& h : built.handles) {
    if (h.domain == domain && h.handle == handle) return h;
  }
  FAIL("no handle " << handle << " in domain " << domain);
  return built.handles.front();
}

const std::vector<TaskId>& thread_tasks(const TaskGraph& g, int rank, const std::string& name) {
  for (const Thread& th : g.threads()) {
    if (th.rank == rank && th.name == name) return th.tasks;
  }
  FAIL("no thread '" << name << "' on rank " << rank);
  return g.threads().front().tasks;
}

RunResult run_ok(Scheduler& scheduler, const Program::Built& built) {
  const RunResult r = scheduler.run(built.graph);
  INFO(r.failure);
  REQUIRE(r.failure.empty());
  return r;
}

// ---- the InterHcclGroupSync seed (shared/seeds/InterHcclGroupSync.md) ----

struct AlltoAllAllGatherCustomTilingData {
  std::uint8_t alltoallTiling[64];
  std::uint8_t allgatherTiling[64];
};

// The body of alltoall_allgather_custom, once per rank (the kernel runs on
// every rank of the two domains); `sync` false drops the InterHcclGroupSync.
void alltoall_allgather_custom(Program& program, int rank, std::uint64_t dataCount, bool sync,
                               std::vector<HcclResult>& results) {
  KernelScope aiv(program, rank, CoreKind::Aiv, {0, 1});  // if (AscendC::g_coreType == AIV)
  AlltoAllAllGatherCustomTilingData tilingData{};
  GM_ADDR xGM = nullptr, alltoallGM = nullptr, allgatherGM = nullptr;
  GM_ADDR contextGM0 = GetHcclContext<0>();
  GM_ADDR contextGM1 = GetHcclContext<1>();

  Hccl hccl0;
  Hccl hccl1;
  HcclDataType dtype = HcclDataType::HCCL_DATA_TYPE_FP16;
  const uint64_t strideCount = 0U;
  hccl0.InitV2(contextGM0, &tilingData);
  results.push_back(hccl0.last_result());
  hccl1.InitV2(contextGM1, &tilingData);
  results.push_back(hccl1.last_result());
  results.push_back(static_cast<HcclResult>(hccl0.SetCcTilingV2(offsetof(AlltoAllAllGatherCustomTilingData, alltoallTiling))));
  results.push_back(static_cast<HcclResult>(hccl1.SetCcTilingV2(offsetof(AlltoAllAllGatherCustomTilingData, allgatherTiling))));

  auto group0_handle = hccl0.AlltoAll(xGM, alltoallGM, dataCount, dtype, strideCount);
  results.push_back(hccl0.last_result());
  if (sync) {
    hccl1.InterHcclGroupSync(0, group0_handle);
    results.push_back(hccl1.last_result());
  }
  // The seed passes `op` (HcclReduceOp) before strideCount, as ReduceScatter
  // would; Ascend C's AllGather takes no reduce op, so it is left out here.
  auto group1_handle = hccl1.AllGather(alltoallGM, allgatherGM, dataCount, dtype, strideCount);
  results.push_back(hccl1.last_result());

  results.push_back(static_cast<HcclResult>(hccl0.Commit(group0_handle)));
  results.push_back(static_cast<HcclResult>(hccl1.Commit(group1_handle)));
  results.push_back(static_cast<HcclResult>(hccl0.Wait(group0_handle)));
  results.push_back(static_cast<HcclResult>(hccl1.Wait(group1_handle)));
  // AscendC::SyncAll<true>() has no counterpart: one kernel per rank here.
  hccl0.Finalize();
  results.push_back(hccl0.last_result());
  hccl1.Finalize();
  results.push_back(hccl1.last_result());
  CHECK(group0_handle == 0);
  CHECK(group1_handle == 0);
}

Program::Built seed_alltoall_allgather(Program& program, std::uint64_t dataCount, bool sync) {
  REQUIRE(program.add_domain(0, {0, 1, 2, 3}) == HCCL_SUCCESS);
  REQUIRE(program.add_domain(1, {0, 1, 2, 3}) == HCCL_SUCCESS);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<HcclResult> results;
    alltoall_allgather_custom(program, rank, dataCount, sync, results);
    INFO("rank " << rank << ": " << program.last_error());
    CHECK(results.size() == (sync ? 13U : 12U));
    for (HcclResult r : results) CHECK(r == HCCL_SUCCESS);
  }
  return program.build();
}

struct SeedSpans {
  Span alltoall;
  Span allgather;
};
std::vector<SeedSpans> seed_spans(const Program::Built& built, const RunResult& run) {
  std::vector<SeedSpans> out;
  for (int r = 0; r < 4; ++r) {
    out.push_back({span_on(built, run, handle_of(built, 0, 0), r), span_on(built, run, handle_of(built, 1, 0), r)});
    REQUIRE(out.back().alltoall.tasks > 0);
    REQUIRE(out.back().allgather.tasks > 0);
  }
  return out;
}

constexpr std::uint64_t kSeedCount = 10;          // dataCount of the seed
constexpr std::uint64_t kBigCount = 1024 * 1024;  // large enough for the order to show

}  // namespace

TEST_CASE("api: the InterHcclGroupSync seed in C++ runs the AllGather after the AlltoAll on every rank",
          "[api][inter_group_sync][seed]") {
  Platform platform(load_topology(source_file("configs/topologies/a3-server.json")));
  Scheduler scheduler(platform);
  for (std::uint64_t count : {kSeedCount, kBigCount}) {
    INFO("dataCount " << count);
    Program program = program_for(platform);
    const Program::Built built = seed_alltoall_allgather(program, count, true);
    const RunResult run = run_ok(scheduler, built);
    const auto spans = seed_spans(built, run);
    for (int r = 0; r < 4; ++r) {
      INFO("rank " << r);
      CHECK(spans[static_cast<std::size_t>(r)].allgather.start >= spans[static_cast<std::size_t>(r)].alltoall.end);
    }
  }
}

TEST_CASE("api: the InterHcclGroupSync seed in C++ without the sync lets the two collectives overlap",
          "[api][inter_group_sync][seed]") {
  Platform platform(load_topology(source_file("configs/topologies/a3-server.json")));
  Scheduler scheduler(platform);
  Program program = program_for(platform);
  const Program::Built built = seed_alltoall_allgather(program, kBigCount, false);
  const RunResult run = run_ok(scheduler, built);
  int overlapping = 0;
  for (const SeedSpans& s : seed_spans(built, run)) {
    if (s.allgather.start < s.alltoall.end && s.alltoall.start < s.allgather.end) ++overlapping;
  }
  CHECK(overlapping >= 1);
}

TEST_CASE("api: the InterHcclGroupSync seed in C++ and in JSON give the same timings", "[api][seed][json]") {
  Platform platform(load_topology(source_file("configs/topologies/a3-server.json")));
  Scheduler scheduler(platform);
  struct Case {
    const char* file;
    std::uint64_t count;
    bool sync;
  };
  for (const Case c : {Case{"configs/programs/seed-alltoall-allgather.json", kSeedCount, true},
                       Case{"tests/programs/seed-alltoall-allgather-1m.json", kBigCount, true},
                       Case{"tests/programs/seed-alltoall-allgather-1m-nosync.json", kBigCount, false}}) {
    INFO(c.file);
    Program from_api = program_for(platform);
    const Program::Built api_built = seed_alltoall_allgather(from_api, c.count, c.sync);
    Program from_json = program_for(platform);
    load_program(source_file(c.file), from_json);
    const Program::Built json_built = from_json.build();
    REQUIRE(api_built.graph.tasks().size() == json_built.graph.tasks().size());
    const RunResult a = run_ok(scheduler, api_built);
    const RunResult j = run_ok(scheduler, json_built);
    CHECK(a.elapsed() == j.elapsed());
    const auto sa = seed_spans(api_built, a);
    const auto sj = seed_spans(json_built, j);
    for (std::size_t r = 0; r < 4; ++r) {
      INFO("rank " << r);
      CHECK((sa[r].alltoall.start - a.begin) == (sj[r].alltoall.start - j.begin));
      CHECK((sa[r].alltoall.end - a.begin) == (sj[r].alltoall.end - j.begin));
      CHECK((sa[r].allgather.start - a.begin) == (sj[r].allgather.start - j.begin));
      CHECK((sa[r].allgather.end - a.begin) == (sj[r].allgather.end - j.begin));
    }
  }
}

// ---- the HcclThreadAcquire seed (shared/seeds/HcclThreadAcquire.md) ----

TEST_CASE("api: the HcclThreadAcquire seed in C++ - each wait ends exactly when the other thread's record lands",
          "[api][notify][seed]") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  Program program = program_for(platform);
  REQUIRE(program.add_domain(0, {0}) == HCCL_SUCCESS);
  HcclComm comm = program.comm(0, 0);
  REQUIRE(comm != nullptr);
  ProgramScope use(program);
  std::vector<HcclResult> results;

  // --host side--
  aclrtStream stream;
  aclrtCreateStream(&stream);
  ThreadHandle cpuThread;
  results.push_back(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, &stream, 1, &cpuThread));
  ThreadHandle aicpuThread;
  results.push_back(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, &aicpuThread));
  ThreadHandle exportedCpuThread;
  results.push_back(HcclThreadExportToCommEngine(comm, 1, &aicpuThread, COMM_ENGINE_CPU_TS, &exportedCpuThread));
  ThreadHandle exportedAicpuThread;
  results.push_back(HcclThreadExportToCommEngine(comm, 1, &cpuThread, COMM_ENGINE_AICPU_TS, &exportedAicpuThread));
  results.push_back(HcommThreadNotifyRecordOnThread(cpuThread, exportedCpuThread, 0));
  uint32_t timeout = 1;
  results.push_back(HcommThreadNotifyWaitOnThread(cpuThread, 0, timeout));
  // --aicpu side--
  results.push_back(HcommThreadNotifyWaitOnThread(aicpuThread, 0, timeout));
  results.push_back(HcommLocalCopyOnThread(aicpuThread, 1024 * 1024));   // "任务编排" (the work)
  results.push_back(HcommThreadNotifyRecordOnThread(aicpuThread, exportedAicpuThread, 0));
  for (HcclResult r : results) CHECK(r == HCCL_SUCCESS);
  CHECK(exportedCpuThread != aicpuThread);
  CHECK(exportedAicpuThread != cpuThread);

  const Program::Built built = program.build();
  Scheduler scheduler(platform);
  const RunResult run = run_ok(scheduler, built);
  const auto& cpu = thread_tasks(built.graph, 0, "d0/CPU_TS/thread0");
  const auto& aicpu = thread_tasks(built.graph, 0, "d0/AICPU_TS/thread1");
  REQUIRE(cpu.size() == 2);
  REQUIRE(aicpu.size() == 3);
  CHECK(run.timings[aicpu[0]].released_by == static_cast<std::int64_t>(cpu[0]));
  CHECK(run.timings[aicpu[0]].end == run.timings[cpu[0]].end);
  CHECK(run.timings[cpu[1]].released_by == static_cast<std::int64_t>(aicpu[2]));
  CHECK(run.timings[cpu[1]].end == run.timings[aicpu[2]].end);
  // The 1 s timeouts are far from expiring.
  CHECK_FALSE(run.timed_out);

  // The JSON form of the seed is the same program.
  Program from_json = program_for(platform);
  load_program(source_file("configs/programs/seed-thread-notify.json"), from_json);
  const Program::Built json_built = from_json.build();
  const RunResult j = run_ok(scheduler, json_built);
  CHECK(j.elapsed() == run.elapsed());
  REQUIRE(json_built.graph.tasks().size() == built.graph.tasks().size());
}

// ---- result codes ----

TEST_CASE("api: the host wrappers return HCCL's result codes", "[api][result]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
  Program program(spec);
  REQUIRE(program.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  HcclComm comm = program.comm(0, 0);
  CHECK(program.comm(0, 5) == nullptr);
  ThreadHandle t[41];
  CHECK(HcclThreadAcquire(nullptr, COMM_ENGINE_AICPU_TS, 1, 1, t) == HCCL_E_PTR);
  CHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, nullptr) == HCCL_E_PTR);
  CHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 0, 1, t) == HCCL_E_PARA);
  CHECK(HcclThreadAcquire(comm, static_cast<CommEngine>(9), 1, 1, t) == HCCL_E_PARA);
  CHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 41, 1, t) == HCCL_E_UNAVAIL);
  CHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 2, 1, t) == HCCL_SUCCESS);
  CHECK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, nullptr, 1, &t[2]) == HCCL_E_PTR);
  CHECK(HcclThreadExportToCommEngine(nullptr, 1, t, COMM_ENGINE_CPU_TS, &t[3]) == HCCL_E_PTR);
  CHECK(HcclThreadExportToCommEngine(comm, 0, t, COMM_ENGINE_CPU_TS, &t[3]) == HCCL_E_PARA);

  // Hcomm* calls need a ProgramScope.
  CHECK_THROWS_AS(HcommLocalCopyOnThread(t[0], 16), std::logic_error);
  ProgramScope use(program);
  CHECK(HcommThreadNotifyRecordOnThread(t[0], t[1], 0) == HCCL_SUCCESS);
  CHECK(HcommThreadNotifyRecordOnThread(t[0], t[1], 1) == HCCL_E_PARA);
  CHECK(HcommThreadNotifyRecordOnThread(t[0], 12345, 0) == HCCL_E_PARA);
  CHECK(HcommThreadNotifyWaitOnThread(t[1], 0, 1) == HCCL_SUCCESS);
  CHECK(HcommThreadNotifyWaitOnThread(t[1], 1, 1) == HCCL_E_PARA);
  CHECK(HcommThreadNotifyWaitOnThread(0, 0, 1) == HCCL_E_PARA);
  CHECK(HcommLocalCopyOnThread(t[0], 4096) == HCCL_SUCCESS);
  CHECK(HcommLocalReduceOnThread(t[0], 4096) == HCCL_SUCCESS);
  // Peers are domain ranks; the thread's own rank is not a peer.
  CHECK(HcommWriteOnThread(t[0], 1, 4096) == HCCL_SUCCESS);
  CHECK(HcommReadOnThread(t[0], 1, 4096) == HCCL_SUCCESS);
  CHECK(HcommWriteOnThread(t[0], 0, 4096) == HCCL_E_PARA);
  CHECK(HcommWriteOnThread(t[0], 2, 4096) == HCCL_E_PARA);
  // A thread notify record stays on its rank; across ranks it is a channel record.
  ThreadHandle remote;
  REQUIRE(HcclThreadAcquire(program.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 1, &remote) == HCCL_SUCCESS);
  CHECK(HcommThreadNotifyRecordOnThread(t[0], remote, 0) == HCCL_E_PARA);
  CHECK(HcommChannelNotifyRecordOnThread(t[0], 1, remote, 0) == HCCL_SUCCESS);
  CHECK(HcommChannelNotifyRecordOnThread(t[0], 0, remote, 0) == HCCL_E_PARA);
  CHECK(HcommWriteWithNotifyOnThread(t[0], 1, 4096, remote, 0) == HCCL_SUCCESS);
  CHECK(HcommWriteWithNotifyOnThread(t[0], 1, 4096, remote, 1) == HCCL_E_PARA);
}

TEST_CASE("api: the kernel wrappers return HCCL's result codes on A2", "[api][result]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
  Program program(spec);
  REQUIRE(program.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(program.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  KernelScope aiv(program, 0, CoreKind::Aiv, {0, 1});
  int tiling = 0;
  GM_ADDR buf = nullptr;

  Hccl bad;
  bad.InitV2(GetHcclContext<2>(), &tiling);
  CHECK(bad.last_result() == HCCL_E_PARA);

  Hccl hccl0;
  Hccl hccl1;
  // Prepare before InitV2 / SetCcTilingV2.
  CHECK(hccl0.AllReduce(buf, buf, 16, HcclDataType::HCCL_DATA_TYPE_FP32, HcclReduceOp::HCCL_REDUCE_SUM) == -1);
  CHECK(hccl0.last_result() == HCCL_E_PARA);
  hccl0.InitV2(GetHcclContext<0>(), &tiling);
  CHECK(hccl0.last_result() == HCCL_SUCCESS);
  CHECK(hccl0.AllReduce(buf, buf, 16, HcclDataType::HCCL_DATA_TYPE_FP32, HcclReduceOp::HCCL_REDUCE_SUM) == -1);
  CHECK(hccl0.last_result() == HCCL_E_PARA);
  CHECK(hccl0.SetCcTilingV2(0) == HCCL_SUCCESS);
  hccl1.InitV2(GetHcclContext<1>(), &tiling);
  CHECK(hccl1.SetCcTilingV2(0) == HCCL_SUCCESS);

  const HcclHandle h0 = hccl0.AllReduce(buf, buf, 16, HcclDataType::HCCL_DATA_TYPE_FP32, HcclReduceOp::HCCL_REDUCE_MAX);
  CHECK(h0 == 0);
  CHECK(hccl0.last_result() == HCCL_SUCCESS);
  const HcclHandle h1 = hccl0.ReduceScatter(buf, buf, 16, HcclDataType::HCCL_DATA_TYPE_BFP16,
                                            HcclReduceOp::HCCL_REDUCE_SUM, 0, 2);
  CHECK(h1 == 1);
  // A3-only calls.
  hccl1.InterHcclGroupSync(0, h0);
  CHECK(hccl1.last_result() == HCCL_E_NOT_SUPPORT);
  const std::uint64_t counts[2] = {8, 8};
  CHECK(hccl0.AlltoAllV(buf, counts, counts, HcclDataType::HCCL_DATA_TYPE_FP16, buf, counts, counts,
                        HcclDataType::HCCL_DATA_TYPE_FP16) == -1);
  CHECK(hccl0.last_result() == HCCL_E_NOT_SUPPORT);
  // Commit / Wait / Query return the code as int32.
  CHECK(hccl0.Commit(5) == HCCL_E_PARA);
  CHECK(hccl0.Commit(h0) == HCCL_SUCCESS);
  CHECK(hccl0.Commit(h0) == HCCL_E_PARA);   // repeat 1: one Commit
  CHECK(hccl0.Commit(h1) == HCCL_SUCCESS);
  CHECK(hccl0.Commit(h1) == HCCL_SUCCESS);  // repeat 2: two Commits
  CHECK(hccl0.Wait(h1) == HCCL_E_PARA);     // before h0: out of Prepare order
  CHECK(hccl0.Query(h1) == HCCL_SUCCESS);
  CHECK(hccl0.Wait(h0) == HCCL_SUCCESS);
  CHECK(hccl0.Wait(h1) == HCCL_SUCCESS);
  CHECK(hccl0.Wait(h1) == HCCL_SUCCESS);
  CHECK(hccl0.Wait(h1) == HCCL_E_PARA);
  hccl0.Finalize();
  CHECK(hccl0.last_result() == HCCL_SUCCESS);
  CHECK(hccl0.AllGather(buf, buf, 16, HcclDataType::HCCL_DATA_TYPE_INT8, 0) == -1);   // after Finalize
  CHECK(hccl0.last_result() == HCCL_E_PARA);

  // The same kernel's Commit from the AIC cores is refused.
  {
    KernelScope aic(program, 0, CoreKind::Aic, {0, 1});
    Hccl on_aic;
    on_aic.InitV2(GetHcclContext<0>(), &tiling);   // context 0 is already initialised on this rank
    CHECK(on_aic.last_result() == HCCL_E_PARA);
  }
  // Compute on the kernel's cores.
  CHECK(Matmul(128, 128, 128, spec.npu.cores.aic) == HCCL_SUCCESS);
  CHECK(Matmul(128, 128, 128, spec.npu.cores.aic + 1) == HCCL_E_PARA);
  CHECK(VectorOp(4096, spec.npu.cores.aiv) == HCCL_SUCCESS);
  CHECK(VectorOp(4096, 0) == HCCL_E_PARA);
}

TEST_CASE("api: AlltoAllV and InterHcclGroupSync pass on A3 and AlltoAllV takes one count per domain rank",
          "[api][result][a3]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a3-server.json"));
  Program program(spec);
  REQUIRE(program.add_domain(0, {0, 1, 2}) == HCCL_SUCCESS);
  REQUIRE(program.add_domain(1, {0, 1, 2}) == HCCL_SUCCESS);
  KernelScope aiv(program, 0, CoreKind::Aiv, {0, 1});
  int tiling = 0;
  GM_ADDR buf = nullptr;
  Hccl hccl0;
  Hccl hccl1;
  hccl0.InitV2(GetHcclContext<0>(), &tiling);
  hccl1.InitV2(GetHcclContext<1>(), &tiling);
  hccl0.SetCcTilingV2(0);
  hccl1.SetCcTilingV2(0);
  const std::uint64_t counts[3] = {4, 8, 16};
  const HcclHandle v = hccl0.AlltoAllV(buf, counts, counts, HcclDataType::HCCL_DATA_TYPE_FP16, buf, counts, counts,
                                       HcclDataType::HCCL_DATA_TYPE_FP16);
  CHECK(v == 0);
  CHECK(hccl0.last_result() == HCCL_SUCCESS);
  hccl1.InterHcclGroupSync(0, v);
  CHECK(hccl1.last_result() == HCCL_SUCCESS);
  hccl1.InterHcclGroupSync(0, 7);   // a handle never prepared
  CHECK(hccl1.last_result() == HCCL_E_PARA);
  hccl1.InterHcclGroupSync(1, v);   // its own domain
  CHECK(hccl1.last_result() == HCCL_E_PARA);
  // Iterate exists on A3 but is not modelled.
  CHECK(program.hccl_iterate(0, CoreKind::Aiv, 0) == HCCL_E_NOT_SUPPORT);
  CHECK_THAT(program.last_error(), Contains("not modelled"));
}
