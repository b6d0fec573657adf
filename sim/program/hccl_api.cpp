#include "sim/program/hccl_api.h"

#include <stdexcept>

namespace hcclsim::api {

namespace {
// The scopes in force on this (host) thread. Programs are recorded by one
// thread; the pointers only mirror HCCL's process-wide handles.
thread_local Program* current_program = nullptr;
thread_local KernelScope* current_kernel = nullptr;
std::uint8_t context_token[HcclLimits::kContexts + 1];

Program& program() {
  if (current_program == nullptr) throw std::logic_error("an Hcomm* call outside any api::ProgramScope");
  return *current_program;
}

DataType data_type(HcclDataType t) {
  switch (t) {
    case HcclDataType::HCCL_DATA_TYPE_INT8: return DataType::Int8;
    case HcclDataType::HCCL_DATA_TYPE_INT16: return DataType::Int16;
    case HcclDataType::HCCL_DATA_TYPE_INT32: return DataType::Int32;
    case HcclDataType::HCCL_DATA_TYPE_FP16: return DataType::Fp16;
    case HcclDataType::HCCL_DATA_TYPE_FP32: return DataType::Fp32;
    case HcclDataType::HCCL_DATA_TYPE_INT64: return DataType::Int64;
    case HcclDataType::HCCL_DATA_TYPE_BFP16: return DataType::Bf16;
  }
  return DataType::Fp16;
}

ReduceOp reduce_op(HcclReduceOp op) {
  switch (op) {
    case HcclReduceOp::HCCL_REDUCE_SUM: return ReduceOp::Sum;
    case HcclReduceOp::HCCL_REDUCE_PROD: return ReduceOp::Prod;
    case HcclReduceOp::HCCL_REDUCE_MAX: return ReduceOp::Max;
    case HcclReduceOp::HCCL_REDUCE_MIN: return ReduceOp::Min;
  }
  return ReduceOp::Sum;
}
}  // namespace

int aclrtCreateStream(aclrtStream* stream) {
  static std::uint8_t streams;
  *stream = &streams;
  return 0;
}

ProgramScope::ProgramScope(Program& program) : previous_(current_program) { current_program = &program; }
ProgramScope::~ProgramScope() { current_program = previous_; }

HcclResult HcclThreadAcquire(HcclComm comm, CommEngine engine, std::uint32_t threadNum,
                             std::uint32_t notifyNumPerThread, ThreadHandle* threads) {
  if (comm == nullptr) return HCCL_E_PTR;
  return comm->program->thread_acquire(comm, engine, threadNum, notifyNumPerThread, threads);
}

HcclResult HcclThreadAcquireWithStream(HcclComm comm, CommEngine engine, aclrtStream* streams, std::uint32_t streamNum,
                                       ThreadHandle* threads) {
  if (comm == nullptr || streams == nullptr) return HCCL_E_PTR;
  return comm->program->thread_acquire_with_stream(comm, engine, streamNum, threads);
}

HcclResult HcclThreadExportToCommEngine(HcclComm comm, std::uint32_t threadNum, const ThreadHandle* threads,
                                        CommEngine dstEngine, ThreadHandle* exportedThreads) {
  if (comm == nullptr) return HCCL_E_PTR;
  return comm->program->thread_export(comm, threadNum, threads, dstEngine, exportedThreads);
}

HcclResult HcommThreadNotifyRecordOnThread(ThreadHandle thread, ThreadHandle dstThread, std::uint32_t dstNotifyIdx) {
  return program().notify_record(thread, dstThread, dstNotifyIdx);
}

HcclResult HcommThreadNotifyWaitOnThread(ThreadHandle thread, std::uint32_t notifyIdx, std::uint32_t timeout) {
  return program().notify_wait(thread, notifyIdx, Time{std::uint64_t{timeout} * 1000000000000ULL});
}

HcclResult HcommLocalCopyOnThread(ThreadHandle thread, std::uint64_t bytes) { return program().local_copy(thread, bytes); }
HcclResult HcommLocalReduceOnThread(ThreadHandle thread, std::uint64_t bytes) {
  return program().local_reduce(thread, bytes);
}
HcclResult HcommWriteOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes) {
  return program().write(thread, peerRank, bytes);
}
HcclResult HcommReadOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes) {
  return program().read(thread, peerRank, bytes);
}
HcclResult HcommWriteWithNotifyOnThread(ThreadHandle thread, int peerRank, std::uint64_t bytes, ThreadHandle remoteThread,
                                        std::uint32_t remoteNotifyIdx) {
  return program().write_with_notify(thread, peerRank, bytes, remoteThread, remoteNotifyIdx);
}
HcclResult HcommChannelNotifyRecordOnThread(ThreadHandle thread, int peerRank, ThreadHandle remoteThread,
                                            std::uint32_t remoteNotifyIdx) {
  return program().channel_notify_record(thread, peerRank, remoteThread, remoteNotifyIdx);
}

KernelScope::KernelScope(Program& program, int rank, CoreKind core, std::array<int, 2> context_domains)
    : previous_(current_kernel), program_(program), rank_(rank), core_(core), domains_(context_domains) {
  current_kernel = this;
}
KernelScope::~KernelScope() { current_kernel = previous_; }

GM_ADDR context_address(int index) {
  return &context_token[index >= 0 && index < HcclLimits::kContexts ? index : HcclLimits::kContexts];
}

HcclResult Matmul(std::uint64_t m, std::uint64_t n, std::uint64_t k, int aicCores) {
  if (current_kernel == nullptr) throw std::logic_error("Matmul outside any api::KernelScope");
  return current_kernel->program_.kernel_matmul(current_kernel->rank_, m, n, k, aicCores);
}

HcclResult VectorOp(std::uint64_t bytes, int aivCores) {
  if (current_kernel == nullptr) throw std::logic_error("VectorOp outside any api::KernelScope");
  return current_kernel->program_.kernel_vector(current_kernel->rank_, bytes, aivCores);
}

KernelScope& Hccl::scope() const {
  if (current_kernel == nullptr) throw std::logic_error("an Hccl call outside any api::KernelScope");
  return *current_kernel;
}

void Hccl::InitV2(GM_ADDR context, const void*) {
  KernelScope& k = scope();
  const int index = static_cast<int>(context - context_token);
  context_ = index;
  const int domain = index >= 0 && index < HcclLimits::kContexts ? k.domains_[static_cast<std::size_t>(index)] : -1;
  last_ = k.program_.hccl_init(k.rank_, k.core_, index, domain);
}

std::int32_t Hccl::SetCcTilingV2(std::uint64_t) {
  KernelScope& k = scope();
  last_ = k.program_.hccl_set_tiling(k.rank_, k.core_, context_);
  return last_;
}

HcclHandle Hccl::prepare(const Program::PrepareArgs& args) {
  KernelScope& k = scope();
  return k.program_.hccl_prepare(k.rank_, k.core_, context_, args, &last_);
}

HcclHandle Hccl::AllReduce(GM_ADDR, GM_ADDR, std::uint64_t count, HcclDataType dataType, HcclReduceOp op,
                           std::uint8_t repeat) {
  Program::PrepareArgs a;
  a.op = CollOp::AllReduce;
  a.count = count;
  a.dtype = data_type(dataType);
  a.reduce_op = reduce_op(op);
  a.repeat = repeat;
  return prepare(a);
}

HcclHandle Hccl::AllGather(GM_ADDR, GM_ADDR, std::uint64_t sendCount, HcclDataType dataType, std::uint64_t strideCount,
                           std::uint8_t repeat) {
  Program::PrepareArgs a;
  a.op = CollOp::AllGather;
  a.count = sendCount;
  a.dtype = data_type(dataType);
  a.stride_count = strideCount;
  a.repeat = repeat;
  return prepare(a);
}

HcclHandle Hccl::ReduceScatter(GM_ADDR, GM_ADDR, std::uint64_t recvCount, HcclDataType dataType, HcclReduceOp op,
                               std::uint64_t strideCount, std::uint8_t repeat) {
  Program::PrepareArgs a;
  a.op = CollOp::ReduceScatter;
  a.count = recvCount;
  a.dtype = data_type(dataType);
  a.reduce_op = reduce_op(op);
  a.stride_count = strideCount;
  a.repeat = repeat;
  return prepare(a);
}

HcclHandle Hccl::AlltoAll(GM_ADDR, GM_ADDR, std::uint64_t dataCount, HcclDataType dataType, std::uint64_t strideCount,
                          std::uint8_t repeat) {
  Program::PrepareArgs a;
  a.op = CollOp::AlltoAll;
  a.count = dataCount;
  a.dtype = data_type(dataType);
  a.stride_count = strideCount;
  a.repeat = repeat;
  return prepare(a);
}

HcclHandle Hccl::AlltoAllV(GM_ADDR, const std::uint64_t* sendCounts, const std::uint64_t*, HcclDataType sendType,
                           GM_ADDR, const std::uint64_t*, const std::uint64_t*, HcclDataType, std::uint8_t repeat) {
  KernelScope& k = scope();
  Program::PrepareArgs a;
  a.op = CollOp::AlltoAll;
  a.alltoallv = true;
  a.dtype = data_type(sendType);
  a.repeat = repeat;
  // One count per rank of the context's domain; the domain size comes from the program.
  const int domain = context_ >= 0 && context_ < HcclLimits::kContexts ? k.domains_[static_cast<std::size_t>(context_)] : -1;
  const int size = k.program_.domain_size(domain);
  if (sendCounts != nullptr) a.send_counts.assign(sendCounts, sendCounts + (size > 0 ? size : 0));
  return prepare(a);
}

std::int32_t Hccl::Commit(HcclHandle handle) {
  KernelScope& k = scope();
  return last_ = k.program_.hccl_commit(k.rank_, k.core_, context_, handle);
}

std::int32_t Hccl::Wait(HcclHandle handle) {
  KernelScope& k = scope();
  return last_ = k.program_.hccl_wait(k.rank_, k.core_, context_, handle);
}

std::int32_t Hccl::Query(HcclHandle handle) {
  KernelScope& k = scope();
  return last_ = k.program_.hccl_query(k.rank_, k.core_, context_, handle);
}

void Hccl::InterHcclGroupSync(std::int8_t srcGroupID, HcclHandle srcHandleID) {
  KernelScope& k = scope();
  last_ = k.program_.hccl_inter_group_sync(k.rank_, k.core_, context_, srcGroupID, srcHandleID);
}

void Hccl::Finalize() {
  KernelScope& k = scope();
  last_ = k.program_.hccl_finalize(k.rank_, k.core_, context_);
}

}  // namespace hcclsim::api
