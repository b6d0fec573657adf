#include "models/npu/task_costs.h"

#include <algorithm>

namespace hcclsim {

namespace {
constexpr const char* kNpuPaths[] = {
    "npu.cores.aic",          "npu.cores.aiv",           "npu.cores.aic_fp16_rate", "npu.cores.aiv_bandwidth",
    "npu.sdma.engines",       "npu.sdma.task_fixed",     "npu.sdma.read_fixed",     "npu.sdma.copy_bandwidth",
    "npu.sdma.reduce_bandwidth", "npu.notify.record_local", "npu.notify.record_remote", "npu.notify.wait",
    "npu.stream.task_dispatch", "npu.stream.op_launch",  "npu.stream.host_sync",    "npu.rdma.post",
    "npu.rdma.notify_write",  "npu.aiv.core_bandwidth",  "npu.aiv.copy_fixed",      "npu.aiv.flag_write",
    "npu.aiv.flag_poll",      "npu.aiv.remote_bandwidth", "npu.local_memory.bandwidth", "npu.local_memory.latency"};
static_assert(std::size(kNpuPaths) == static_cast<std::size_t>(Constant::FirstLink), "a path per NPU constant");
constexpr const char* kLinkConstantNames[] = {"bandwidth", "write_bandwidth", "latency", "transport_rate"};
static_assert(std::size(kLinkConstantNames) == kLinkConstants, "a name per link constant");
}  // namespace

std::string constant_path(int index) {
  const int first_link = static_cast<int>(Constant::FirstLink);
  if (index < first_link) return kNpuPaths[index];
  const auto kind = static_cast<LinkKind>(1 + (index - first_link) / kLinkConstants);
  return std::string("links.") + link_kind_name(kind) + "." + kLinkConstantNames[(index - first_link) % kLinkConstants];
}

void UsedConstants::add(LinkKind kind, LinkConstant c) {
  if (kind == LinkKind::Memory) {  // an NPU's local memory: npu.local_memory (it has no write limit)
    if (c == LinkConstant::Bandwidth) add(Constant::LocalBandwidth);
    if (c == LinkConstant::Latency) add(Constant::LocalLatency);
    return;
  }
  bits_ |= bit(static_cast<int>(Constant::FirstLink) + kLinkConstants * (static_cast<int>(kind) - 1) + static_cast<int>(c));
}

std::vector<std::string> UsedConstants::paths() const {
  std::vector<std::string> out;
  for (int i = 0; i < kConstantCount; ++i) {
    if ((bits_ & bit(i)) != 0) out.push_back(constant_path(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Where each cost is charged: models/npu/task_engine.cpp (TaskEngine) unless
// said otherwise; "compile" is sim/scheduler.cpp, Scheduler::compile, which
// sets a transfer's fixed cost and rate cap from the profile.
void add_charged_constants(const ChargedTask& task, UsedConstants& used) {
  auto add_path = [&] {
    if (!task.moves_bytes) return;  // no flow starts (TimerKind::FixedDone, post_rdma)
    // A flow runs at most at each channel's bandwidth and arrives the sum of
    // their latencies later (models/link/flow_network.cpp, channel.cpp);
    // an SDMA or AIV write is capped by a link's write_bandwidth, and an
    // SDMA task of HCCL's transport by its transport_rate (compile; the
    // one-sided batches of validate's p2p rows, which skip it, report none).
    const bool sdma = task.kind == ExecKind::Transfer && !task.aiv;
    for (const LinkKind kind : {LinkKind::Memory, LinkKind::Hccs, LinkKind::Sio, LinkKind::Ub, LinkKind::Roce}) {
      const auto bit = static_cast<std::uint8_t>(1u << static_cast<unsigned>(kind));
      if ((task.path_kinds & bit) == 0) continue;
      used.add(kind, LinkConstant::Bandwidth);
      used.add(kind, LinkConstant::Latency);
      if ((task.write_capped_kinds & bit) != 0) used.add(kind, LinkConstant::WriteBandwidth);
      if (sdma) used.add(kind, LinkConstant::TransportRate);
    }
  };
  switch (task.kind) {
    case ExecKind::NotifyRecord:  // try_start / start_ahead: busy for record_local or record_remote
      used.add(task.remote ? Constant::NotifyRecordRemote : Constant::NotifyRecordLocal);
      break;
    case ExecKind::NotifyWait:  // try_start: `wait` when its register is already set
      used.add(Constant::NotifyWait);
      break;
    case ExecKind::Transfer:
      if (task.aiv) {
        // compile: span = aiv.copy_fixed, rate cap = cores x aiv.core_bandwidth;
        // try_start takes `cores` from the pool of cores.aiv (none for 0).
        used.add(Constant::AivCopyFixed);
        if (task.moves_bytes) used.add(Constant::AivCoreBandwidth);
        if (task.cores > 0) used.add(Constant::CoresAiv);
        // Platform::aiv_route: between NPUs through both NPUs' AIV ports.
        if (task.moves_bytes && task.aiv_port) used.add(Constant::AivRemoteBandwidth);
      } else {
        // try_start takes one of sdma.engines; compile: span = read_fixed for
        // a read, else task_fixed; rate cap = reduce_bandwidth or copy_bandwidth.
        used.add(Constant::SdmaEngines);
        used.add(task.read ? Constant::SdmaReadFixed : Constant::SdmaTaskFixed);
        if (task.moves_bytes) used.add(task.reduce ? Constant::SdmaReduceBandwidth : Constant::SdmaCopyBandwidth);
      }
      add_path();
      break;
    case ExecKind::RdmaWrite:  // try_start / start_ahead: busy for rdma.post; post_rdma: no rate cap
      used.add(Constant::RdmaPost);
      add_path();
      break;
    case ExecKind::RdmaNotify:  // the same; post_rdma: a flow of rdma.notify_write bytes
      used.add(Constant::RdmaPost);
      used.add(Constant::RdmaNotifyWrite);
      add_path();
      break;
    case ExecKind::FlagSet:  // try_start / start_ahead: lands aiv.flag_write after it starts
      used.add(Constant::AivFlagWrite);
      break;
    case ExecKind::FlagWait:  // poll_flag: ends aiv.flag_poll after the flag holds its count
      used.add(Constant::AivFlagPoll);
      break;
    case ExecKind::Compute:  // try_start: `cores` from the pool of cores.aic or cores.aiv
      used.add(task.core_kind == CoreKind::Aic ? Constant::CoresAic : Constant::CoresAiv);
      break;
    case ExecKind::Delay:  // its own span only
      break;
  }
}

}  // namespace hcclsim
