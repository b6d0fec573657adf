// The program API in the shape of the HCCL calls, so that a program written
// in C++ reads almost as the seed pages do. Each function records into a
// Program (see program.h) and returns what HCCL would.
//
//   Program program(load_topology("configs/topologies/a3-server.json"));
//   program.add_domain(0, {0, 1, 2, 3});
//   HcclComm comm = program.comm(0, 0);
//   api::ProgramScope use(program);                  // for the Hcomm* calls
//   ThreadHandle threads[5];
//   api::HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 5, 2, threads);
//
//   api::KernelScope aiv(program, /*rank=*/0, CoreKind::Aiv, {/*context 0 ->*/ 0, /*context 1 ->*/ 1});
//   api::Hccl hccl0;
//   hccl0.InitV2(api::GetHcclContext<0>(), &tiling);
//   auto h = hccl0.AlltoAll(x, y, 10, api::HcclDataType::HCCL_DATA_TYPE_FP16, 0);
#pragma once

#include <array>
#include <cstdint>

#include "sim/program/program.h"

namespace hcclsim::api {

// ---- host side ----
using aclrtStream = void*;
// Streams are modelled by the threads bound to them; this only hands out a handle.
int aclrtCreateStream(aclrtStream* stream);

// The program that the thread-handle-only calls (Hcomm*) record into.
class ProgramScope {
 public:
  explicit ProgramScope(Program& program);
  ~ProgramScope();
  ProgramScope(const ProgramScope&) = delete;
  ProgramScope& operator=(const ProgramScope&) = delete;

 private:
  Program* previous_;
};

HcclResult HcclThreadAcquire(HcclComm comm, CommEngine engine, std::uint32_t threadNum,
                             std::uint32_t notifyNumPerThread, ThreadHandle* threads);
HcclResult HcclThreadAcquireWithStream(HcclComm comm, CommEngine engine, aclrtStream* streams, std::uint32_t streamNum,
                                       ThreadHandle* threads);
HcclResult HcclThreadExportToCommEngine(HcclComm comm, std::uint32_t threadNum, const ThreadHandle* threads,
                                        CommEngine dstEngine, ThreadHandle* exportedThreads);
HcclResult HcommThreadNotifyRecordOnThread(ThreadHandle thread, ThreadHandle dstThread, std::uint32_t dstNotifyIdx);
// `timeout` in seconds, 0 = forever.
HcclResult HcommThreadNotifyWaitOnThread(ThreadHandle thread, std::uint32_t notifyIdx, std::uint32_t timeout);
HcclResult HcommLocalCopyOnThread(ThreadHandle thread, std::uint64_t bytes);
HcclResult HcommLocalReduceOnThread(ThreadHandle thread, std::uint64_t bytes);
HcclResult HcommWriteOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes);
HcclResult HcommReadOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes);
HcclResult HcommWriteWithNotifyOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes, ThreadHandle remoteThread,
                                        std::uint32_t remoteNotifyIdx);
HcclResult HcommChannelNotifyRecordOnThread(ThreadHandle thread, int peerRank, ThreadHandle remoteThread,
                                            std::uint32_t remoteNotifyIdx);

// ---- kernel side (Ascend C) ----
using GM_ADDR = std::uint8_t*;
enum class HcclDataType { HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_FP16,
                          HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_BFP16 };
enum class HcclReduceOp { HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX, HCCL_REDUCE_MIN };

// Which rank and core type the kernel code below runs on, and which domain
// each of the (at most two) contexts of GetHcclContext<i> stands for.
class KernelScope {
 public:
  KernelScope(Program& program, int rank, CoreKind core, std::array<int, 2> context_domains);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  KernelScope* previous_;
  friend class Hccl;
  friend HcclResult Matmul(std::uint64_t m, std::uint64_t n, std::uint64_t k, int aicCores);
  friend HcclResult VectorOp(std::uint64_t bytes, int aivCores);
  Program& program_;
  int rank_;
  CoreKind core_;
  std::array<int, 2> domains_;
};

// Compute on the current kernel's cores.
HcclResult Matmul(std::uint64_t m, std::uint64_t n, std::uint64_t k, int aicCores);
HcclResult VectorOp(std::uint64_t bytes, int aivCores);

GM_ADDR context_address(int index);
// GetHcclContext<0> and <1>; any other index yields a context InitV2 refuses.
template <int index>
GM_ADDR GetHcclContext() {
  return context_address(index);
}

class Hccl {
 public:
  void InitV2(GM_ADDR context, const void* tiling);
  std::int32_t SetCcTilingV2(std::uint64_t offset);
  HcclHandle AllReduce(GM_ADDR sendBuf, GM_ADDR recvBuf, std::uint64_t count, HcclDataType dataType,
                       HcclReduceOp op, std::uint8_t repeat = 1);
  HcclHandle AllGather(GM_ADDR sendBuf, GM_ADDR recvBuf, std::uint64_t sendCount, HcclDataType dataType,
                       std::uint64_t strideCount, std::uint8_t repeat = 1);
  HcclHandle ReduceScatter(GM_ADDR sendBuf, GM_ADDR recvBuf, std::uint64_t recvCount, HcclDataType dataType,
                           HcclReduceOp op, std::uint64_t strideCount, std::uint8_t repeat = 1);
  HcclHandle AlltoAll(GM_ADDR sendBuf, GM_ADDR recvBuf, std::uint64_t dataCount, HcclDataType dataType,
                      std::uint64_t strideCount = 0, std::uint8_t repeat = 1);
  // sendCounts: one count per rank of the domain.
  HcclHandle AlltoAllV(GM_ADDR sendBuf, const std::uint64_t* sendCounts, const std::uint64_t* sdispls,
                       HcclDataType sendType, GM_ADDR recvBuf, const std::uint64_t* recvCounts,
                       const std::uint64_t* rdispls, HcclDataType recvType, std::uint8_t repeat = 1);
  std::int32_t Commit(HcclHandle handle);
  std::int32_t Wait(HcclHandle handle);
  std::int32_t Query(HcclHandle handle);
  void InterHcclGroupSync(std::int8_t srcGroupID, HcclHandle srcHandleID);
  void Finalize();
  // The HcclResult of the last call on this object (InitV2 and
  // InterHcclGroupSync return nothing in Ascend C).
  HcclResult last_result() const { return last_; }

 private:
  HcclHandle prepare(const Program::PrepareArgs& args);
  KernelScope& scope() const;
  int context_ = -1;
  HcclResult last_ = HCCL_SUCCESS;
};

}  // namespace hcclsim::api
