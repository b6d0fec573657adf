// Which constants of a hardware profile a run's timing reads, named by
// their dotted profile paths ("npu.stream.task_dispatch",
// "links.hccs.latency"), and the one mapping from what a task is to the
// constants it pays (task_costs.cpp). Reports intersect a run's set with the
// profile's assumed constants (TopologySpec::assumed_constants).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/npu/exec_task.h"
#include "models/params.h"

namespace hcclsim {

// The profile's timing constants. Links come last, four per link kind in
// LinkKind order (hccs, sio, ub, roce): bandwidth, write_bandwidth, latency,
// transport_rate.
enum class Constant : std::uint8_t {
  CoresAic, CoresAiv, CoresAicRate, CoresAivBandwidth,
  SdmaEngines, SdmaTaskFixed, SdmaReadFixed, SdmaCopyBandwidth, SdmaReduceBandwidth,
  NotifyRecordLocal, NotifyRecordRemote, NotifyWait,
  StreamTaskDispatch, StreamOpLaunch, StreamHostSync,
  RdmaPost, RdmaNotifyWrite,
  AivCoreBandwidth, AivCopyFixed, AivFlagWrite, AivFlagPoll, AivRemoteBandwidth,
  LocalBandwidth, LocalLatency,
  FirstLink,
};
enum class LinkConstant : std::uint8_t { Bandwidth, WriteBandwidth, Latency, TransportRate };
constexpr int kLinkConstants = 4;
constexpr int kConstantCount = static_cast<int>(Constant::FirstLink) + kLinkConstants * 4;

// "npu.sdma.task_fixed"; a link's: "links.hccs.write_bandwidth".
std::string constant_path(int index);

// A set of constants (a bit each).
class UsedConstants {
 public:
  void add(Constant c) { bits_ |= bit(static_cast<int>(c)); }
  void add(LinkKind kind, LinkConstant c);
  void merge(const UsedConstants& other) { bits_ |= other.bits_; }
  bool has(Constant c) const { return (bits_ & bit(static_cast<int>(c))) != 0; }
  bool empty() const { return bits_ == 0; }
  bool operator==(const UsedConstants& other) const { return bits_ == other.bits_; }
  // Their dotted paths, sorted.
  std::vector<std::string> paths() const;

 private:
  static std::uint64_t bit(int index) { return std::uint64_t{1} << index; }
  std::uint64_t bits_ = 0;
};
static_assert(kConstantCount <= 64, "a set of constants is one word");

// A task as the timing model tells it apart: its compiled kind and what
// decides its costs. Link kinds are bits (1 << LinkKind).
struct ChargedTask {
  ExecKind kind = ExecKind::Delay;
  bool remote = false;        // NotifyRecord: to another chip
  bool read = false;          // Transfer: pulls a peer's memory
  bool reduce = false;        // Transfer: Reduce_Inline
  bool aiv = false;           // Transfer: moved by AIV cores, not an SDMA engine
  bool aiv_port = false;      // Transfer by AIV between NPUs through their AIV ports (aiv.remote_bandwidth)
  bool moves_bytes = false;   // Transfer, RdmaWrite, RdmaNotify: a flow crosses `path_kinds`
  int cores = 0;              // Transfer by AIV (0: a held core's write pipe), Compute
  CoreKind core_kind = CoreKind::Aiv;   // Compute
  std::uint8_t path_kinds = 0;          // the kinds of the channels its flow crosses
  std::uint8_t write_capped_kinds = 0;  // of those, the ones whose write_bandwidth caps it
};

// The mapping: adds the constants `task` pays to `used`. Stream costs
// (task_dispatch between tasks, op_launch before a stream's first) and
// constants a builder bakes into a duration (Compute's rate, a host
// synchronisation's Delay) are the caller's: a task does not show them.
void add_charged_constants(const ChargedTask& task, UsedConstants& used);

}  // namespace hcclsim
