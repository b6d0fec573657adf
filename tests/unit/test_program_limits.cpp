// HCCL's limits as Program enforces them (docs/sources.md §2, the seed pages),
// each checked exactly at its boundary: the last call that is allowed passes
// and the first one past it returns the HcclResult HCCL would. Nothing here
// builds a Platform or runs anything.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/program/program.h"
#include "topologies/config.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

NpuParams npu_of(const char* topology) {
  return load_topology(std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/" + topology).npu;
}
Program a2() { return Program(8, npu_of("a2-server.json")); }
Program a3() { return Program(16, npu_of("a3-server.json")); }

Program::PrepareArgs all_reduce(std::uint64_t count = 1024) {
  Program::PrepareArgs a;
  a.op = CollOp::AllReduce;
  a.count = count;
  return a;
}
Program::PrepareArgs alltoall(std::uint64_t count = 1024) {
  Program::PrepareArgs a;
  a.op = CollOp::AlltoAll;
  a.count = count;
  return a;
}

// Rank 0's AIV kernel: context c bound to domain c, for each c in `contexts`.
void kernel_on(Program& p, std::vector<int> contexts, CoreKind core = CoreKind::Aiv, int rank = 0) {
  for (int c : contexts) {
    REQUIRE(p.hccl_init(rank, core, c, c) == HCCL_SUCCESS);
    REQUIRE(p.hccl_set_tiling(rank, core, c) == HCCL_SUCCESS);
  }
}

HcclHandle prepare(Program& p, int context, HcclResult* r, const Program::PrepareArgs& args = all_reduce(),
                   CoreKind core = CoreKind::Aiv) {
  *r = HCCL_E_INTERNAL;
  return p.hccl_prepare(0, core, context, args, r);
}

}  // namespace

// ------------------------------------------------------ messages per domain

TEST_CASE("limits: 63 Prepare calls on one domain pass and the 64th fails with HCCL_E_PARA on A2", "[limits]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0});
  HcclResult r;
  for (int i = 0; i < 63; ++i) {
    INFO("Prepare #" << i + 1);
    REQUIRE(prepare(p, 0, &r) == i);
    REQUIRE(r == HCCL_SUCCESS);
  }
  CHECK(npu_of("a2-server.json").hccl_api.messages_per_domain == 63);
  CHECK(prepare(p, 0, &r) == -1);
  CHECK(r == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("HCCL_E_PARA"));
  CHECK_THAT(p.last_error(), Contains("63"));
}

TEST_CASE("limits: 63 Prepare calls pass on A3 too and the 64th fails", "[limits]") {
  Program p = a3();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0});
  HcclResult r;
  for (int i = 0; i < 63; ++i) REQUIRE(prepare(p, 0, &r) == i);
  CHECK(prepare(p, 0, &r) == -1);
  CHECK(r == HCCL_E_PARA);
}

TEST_CASE("limits: on A3 62 Prepares and 1 InterHcclGroupSync pass and the next Prepare fails", "[limits][a3]") {
  Program p = a3();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(p.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0, 1});
  HcclResult r;
  const HcclHandle src = prepare(p, 0, &r);
  REQUIRE(r == HCCL_SUCCESS);
  REQUIRE(p.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, src) == HCCL_SUCCESS);
  for (int i = 0; i < 62; ++i) {
    INFO("Prepare #" << i + 1 << " after the sync");
    REQUIRE(prepare(p, 1, &r) == i);
    REQUIRE(r == HCCL_SUCCESS);
  }
  CHECK(prepare(p, 1, &r) == -1);
  CHECK(r == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("InterHcclGroupSync"));
  // The other domain has its own 63: only one used there.
  CHECK(prepare(p, 0, &r) == 1);
  CHECK(r == HCCL_SUCCESS);
}

TEST_CASE("limits: on A3 62 Prepares and 1 InterHcclGroupSync pass and the next InterHcclGroupSync fails",
          "[limits][a3]") {
  Program p = a3();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(p.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0, 1});
  HcclResult r;
  const HcclHandle src = prepare(p, 0, &r);
  REQUIRE(r == HCCL_SUCCESS);
  for (int i = 0; i < 62; ++i) REQUIRE(prepare(p, 1, &r) == i);
  REQUIRE(p.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, src) == HCCL_SUCCESS);
  CHECK(p.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, src) == HCCL_E_PARA);
  CHECK(prepare(p, 1, &r) == -1);
  CHECK(r == HCCL_E_PARA);
}

// ------------------------------------------------------------- A3-only calls

TEST_CASE("limits: InterHcclGroupSync AlltoAllV and Iterate return HCCL_E_NOT_SUPPORT on A2", "[limits][a2]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(p.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0, 1});
  HcclResult r;
  const HcclHandle src = prepare(p, 0, &r);
  REQUIRE(r == HCCL_SUCCESS);
  CHECK(p.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, src) == HCCL_E_NOT_SUPPORT);
  CHECK_THAT(p.last_error(), Contains("InterHcclGroupSync"));
  Program::PrepareArgs v = alltoall();
  v.alltoallv = true;
  v.send_counts = {16, 16};
  CHECK(prepare(p, 0, &r, v) == -1);
  CHECK(r == HCCL_E_NOT_SUPPORT);
  CHECK_THAT(p.last_error(), Contains("AlltoAllV"));
  CHECK(p.hccl_iterate(0, CoreKind::Aiv, 0) == HCCL_E_NOT_SUPPORT);
  CHECK_THAT(p.last_error(), Contains("Iterate"));
  // Control: the same calls pass the architecture check on A3.
  Program q = a3();
  REQUIRE(q.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(q.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  kernel_on(q, {0, 1});
  const HcclHandle qsrc = prepare(q, 0, &r);
  CHECK(q.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, qsrc) == HCCL_SUCCESS);
  CHECK(prepare(q, 0, &r, v) == 1);
  CHECK(r == HCCL_SUCCESS);
}

TEST_CASE("limits: AlltoAll on a 128-rank domain passes and on 129 ranks fails on A3", "[limits][a3]") {
  Program p(256, npu_of("a3-server.json"));
  std::vector<int> ranks128, ranks129;
  for (int r = 0; r < 128; ++r) ranks128.push_back(r);
  for (int r = 0; r < 129; ++r) ranks129.push_back(r);
  REQUIRE(p.add_domain(0, ranks128) == HCCL_SUCCESS);
  REQUIRE(p.add_domain(1, ranks129) == HCCL_SUCCESS);
  kernel_on(p, {0, 1});
  HcclResult r;
  CHECK(prepare(p, 0, &r, alltoall()) == 0);
  CHECK(r == HCCL_SUCCESS);
  CHECK(prepare(p, 1, &r, alltoall()) == -1);
  CHECK(r == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("128"));
  // AlltoAllV has the same bound.
  Program::PrepareArgs v = alltoall();
  v.alltoallv = true;
  v.send_counts.assign(128, 8);
  CHECK(prepare(p, 0, &r, v) == 1);
  CHECK(r == HCCL_SUCCESS);
  v.send_counts.assign(129, 8);
  CHECK(prepare(p, 1, &r, v) == -1);
  CHECK(r == HCCL_E_PARA);
  // Other collectives are not bounded this way.
  CHECK(prepare(p, 1, &r, all_reduce()) == 0);
  CHECK(r == HCCL_SUCCESS);
}

// ------------------------------------------------------------------ contexts

TEST_CASE("limits: GetHcclContext index 0 and 1 pass and 2 fails with HCCL_E_PARA", "[limits]") {
  Program p = a2();
  for (int d = 0; d < 3; ++d) REQUIRE(p.add_domain(d, {0, 1}) == HCCL_SUCCESS);
  CHECK(p.hccl_init(0, CoreKind::Aiv, 0, 0) == HCCL_SUCCESS);
  CHECK(p.hccl_init(0, CoreKind::Aiv, 1, 1) == HCCL_SUCCESS);
  CHECK(p.hccl_init(0, CoreKind::Aiv, 2, 2) == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("0 or 1"));
  CHECK(p.hccl_init(0, CoreKind::Aiv, -1, 2) == HCCL_E_PARA);
  CHECK(p.hccl_set_tiling(0, CoreKind::Aiv, 2) == HCCL_E_PARA);
}

// ------------------------------------------------------------ core types

TEST_CASE("limits: Commit Wait Query InterHcclGroupSync and Finalize on the other core type fail with HCCL_E_PARA",
          "[limits][a3]") {
  Program p = a3();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  REQUIRE(p.add_domain(1, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0, 1});
  HcclResult r;
  const HcclHandle h = prepare(p, 0, &r);   // on AIV
  REQUIRE(r == HCCL_SUCCESS);
  CHECK(p.hccl_commit(0, CoreKind::Aic, 0, h) == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("core type"));
  CHECK(p.hccl_wait(0, CoreKind::Aic, 0, h) == HCCL_E_PARA);
  CHECK(p.hccl_query(0, CoreKind::Aic, 0, h) == HCCL_E_PARA);
  CHECK(p.hccl_inter_group_sync(0, CoreKind::Aic, 1, 0, h) == HCCL_E_PARA);
  CHECK(p.hccl_finalize(0, CoreKind::Aic, 0) == HCCL_E_PARA);
  // The same calls on AIV pass.
  CHECK(p.hccl_commit(0, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
  CHECK(p.hccl_query(0, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
  CHECK(p.hccl_inter_group_sync(0, CoreKind::Aiv, 1, 0, h) == HCCL_SUCCESS);
  CHECK(p.hccl_wait(0, CoreKind::Aiv, 0, h) == HCCL_SUCCESS);
  CHECK(p.hccl_finalize(0, CoreKind::Aiv, 0) == HCCL_SUCCESS);
}

TEST_CASE("limits: Wait out of Prepare order fails with HCCL_E_PARA", "[limits]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  kernel_on(p, {0});
  HcclResult r;
  const HcclHandle h0 = prepare(p, 0, &r);
  const HcclHandle h1 = prepare(p, 0, &r);
  REQUIRE(h0 == 0);
  REQUIRE(h1 == 1);
  REQUIRE(p.hccl_commit(0, CoreKind::Aiv, 0, h0) == HCCL_SUCCESS);
  REQUIRE(p.hccl_commit(0, CoreKind::Aiv, 0, h1) == HCCL_SUCCESS);
  CHECK(p.hccl_wait(0, CoreKind::Aiv, 0, h1) == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("Prepare order"));
  CHECK(p.hccl_wait(0, CoreKind::Aiv, 0, h0) == HCCL_SUCCESS);
  CHECK(p.hccl_wait(0, CoreKind::Aiv, 0, h1) == HCCL_SUCCESS);
  // And neither more Waits nor more Commits than the repeat.
  CHECK(p.hccl_wait(0, CoreKind::Aiv, 0, h1) == HCCL_E_PARA);
  CHECK(p.hccl_commit(0, CoreKind::Aiv, 0, h1) == HCCL_E_PARA);
}

// -------------------------------------------------------- threads / notifies

TEST_CASE("limits: 40 threads per communicator pass and the 41st fails with HCCL_E_UNAVAIL", "[limits][threads]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  std::vector<ThreadHandle> t(41);
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 39, 1, t.data()) == HCCL_SUCCESS);
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_CPU_TS, 1, 0, &t[39]) == HCCL_SUCCESS);
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_CPU_TS, 1, 0, &t[40]) == HCCL_E_UNAVAIL);
  CHECK_THAT(p.last_error(), Contains("40"));
  // 40 at once pass on another communicator (the other rank); 41 at once do not.
  CHECK(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 41, 0, t.data()) == HCCL_E_UNAVAIL);
  CHECK(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 40, 0, t.data()) == HCCL_SUCCESS);
  // A thread handle of each acquisition is distinct and usable.
  CHECK(p.thread_of(0, 1, 39).has_value());
  CHECK_FALSE(p.thread_of(0, 1, 40).has_value());
}

TEST_CASE("limits: 64 notifies per communicator pass and the 65th fails", "[limits][threads]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  ThreadHandle t[32];
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 31, 2, t) == HCCL_SUCCESS);   // 62
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 3, &t[31]) == HCCL_E_UNAVAIL);  // 65
  CHECK_THAT(p.last_error(), Contains("64"));
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 2, &t[31]) == HCCL_SUCCESS);  // 64
  ThreadHandle extra = 0;
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 1, &extra) == HCCL_E_UNAVAIL);  // 65
  // A thread without notifies still fits.
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 1, 0, &extra) == HCCL_SUCCESS);
  // 64 on one thread at once on the other rank; 65 do not.
  CHECK(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 65, &extra) == HCCL_E_UNAVAIL);
  CHECK(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 64, &extra) == HCCL_SUCCESS);
}

TEST_CASE("limits: exporting 0 or 41 threads fails with HCCL_E_PARA and 1 or 40 pass", "[limits][threads]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  std::vector<ThreadHandle> t(41);
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 40, 1, t.data()) == HCCL_SUCCESS);
  t[40] = t[0];
  std::vector<ThreadHandle> out(41, 0);
  CHECK(p.thread_export(p.comm(0, 0), 0, t.data(), COMM_ENGINE_CPU_TS, out.data()) == HCCL_E_PARA);
  CHECK(p.thread_export(p.comm(0, 0), 41, t.data(), COMM_ENGINE_CPU_TS, out.data()) == HCCL_E_PARA);
  CHECK(p.thread_export(p.comm(0, 0), 1, t.data(), COMM_ENGINE_CPU_TS, out.data()) == HCCL_SUCCESS);
  CHECK(out[0] != 0);
  CHECK(p.thread_export(p.comm(0, 0), 40, t.data(), COMM_ENGINE_CPU_TS, out.data()) == HCCL_SUCCESS);
  for (int i = 0; i < 40; ++i) CHECK(out[static_cast<std::size_t>(i)] != t[static_cast<std::size_t>(i)]);
  // A thread of another communicator cannot be exported through this one.
  ThreadHandle other = 0;
  REQUIRE(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 1, &other) == HCCL_SUCCESS);
  CHECK(p.thread_export(p.comm(0, 0), 1, &other, COMM_ENGINE_CPU_TS, out.data()) == HCCL_E_PARA);
}

TEST_CASE("limits: a notify index equal to the thread's notify count fails with HCCL_E_PARA", "[limits][threads]") {
  Program p = a2();
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  ThreadHandle t[2];
  REQUIRE(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 2, 3, t) == HCCL_SUCCESS);
  CHECK(p.notify_wait(t[0], 2, Time{}) == HCCL_SUCCESS);
  CHECK(p.notify_wait(t[0], 3, Time{}) == HCCL_E_PARA);
  CHECK_THAT(p.last_error(), Contains("notify index 3"));
  CHECK(p.notify_record(t[1], t[0], 2) == HCCL_SUCCESS);
  CHECK(p.notify_record(t[1], t[0], 3) == HCCL_E_PARA);
  // Through an exported handle the same notifies are seen.
  ThreadHandle exported = 0;
  REQUIRE(p.thread_export(p.comm(0, 0), 1, t, COMM_ENGINE_CPU_TS, &exported) == HCCL_SUCCESS);
  CHECK(p.notify_record(t[1], exported, 2) == HCCL_SUCCESS);
  CHECK(p.notify_record(t[1], exported, 3) == HCCL_E_PARA);
  // Channel records and writes with notify check the remote thread's count.
  ThreadHandle remote = 0;
  REQUIRE(p.thread_acquire(p.comm(0, 1), COMM_ENGINE_AICPU_TS, 1, 1, &remote) == HCCL_SUCCESS);
  CHECK(p.channel_notify_record(t[0], 1, remote, 0) == HCCL_SUCCESS);
  CHECK(p.channel_notify_record(t[0], 1, remote, 1) == HCCL_E_PARA);
  CHECK(p.write_with_notify(t[0], 1, 4096, remote, 1) == HCCL_E_PARA);
  CHECK(p.write_with_notify(t[0], 1, 4096, remote, 0) == HCCL_SUCCESS);
}

// The limits are the profile's (npu.hccl_api), not the product's name.
TEST_CASE("limits: a profile's hccl_api sets the thread limit and what the kernel API allows", "[program][limits]") {
  NpuParams npu = npu_of("a2-server.json");
  npu.hccl_api.threads_per_comm = 2;
  Program p(8, npu);
  REQUIRE(p.add_domain(0, {0, 1}) == HCCL_SUCCESS);
  std::vector<ThreadHandle> threads(3);
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 3, 1, threads.data()) == HCCL_E_UNAVAIL);
  CHECK(p.thread_acquire(p.comm(0, 0), COMM_ENGINE_AICPU_TS, 2, 1, threads.data()) == HCCL_SUCCESS);
  // An A2 NPU whose profile allows InterHcclGroupSync gets past the product check.
  NpuParams open_api = npu_of("a2-server.json");
  CHECK(Program(8, open_api).hccl_inter_group_sync(0, CoreKind::Aiv, 0, 1, 0) == HCCL_E_NOT_SUPPORT);
  open_api.hccl_api.inter_group_sync = true;
  CHECK(Program(8, open_api).hccl_inter_group_sync(0, CoreKind::Aiv, 0, 1, 0) != HCCL_E_NOT_SUPPORT);
}
