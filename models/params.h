// Typed hardware parameters. Filled by topologies/ from a hardware profile;
// models take them in their constructors and never see JSON.
#pragma once

#include <cstdint>
#include <string>

#include "sim/units.h"

namespace hcclsim {

// One direction of a point-to-point link or a switch port.
struct ChannelParams {
  Bandwidth bandwidth;        // serialization rate
  Time latency;               // from the end of a segment's serialization to its arrival
  std::uint64_t segment_bytes = 64 * 1024;  // granularity of sharing and pipelining
};

struct SdmaParams {
  int engines = 1;                  // concurrent SDMA tasks per NPU
  Time task_fixed;                  // set-up cost before the first byte moves
  Bandwidth copy_bandwidth;         // per-engine rate cap for copies
  Bandwidth reduce_bandwidth;       // per-engine rate cap for Reduce_Inline
};

struct NotifyParams {
  int registers = 64;               // per NPU
  Time record_local;                // duration of a record to a notify on the same chip
  Time record_remote;               // duration of a record to another chip
  Time wait;                        // duration of a wait whose notify is already set
};

// RDMA through the NIC (RoCE), as HCCL's RDMASend task.
struct RdmaParams {
  Time post;                        // stream time to post one work request
  std::uint64_t notify_bytes = 4;   // a remote notify record is a write of this size
};

struct StreamParams {
  Time task_dispatch;               // stream engine's gap before each task starts
  Time op_launch;                   // before the first task of a workload on each stream
};

struct CoreParams {
  int aic = 0;                      // cube cores
  int aiv = 0;                      // vector cores
  std::uint64_t aic_flops_per_s = 0;  // one AIC, fp16 multiply-add counted as 2 flops
  Bandwidth aiv_bandwidth;          // one AIV, bytes processed per second
};

struct NpuParams {
  std::string model;                // "910B", "910C"
  CoreParams cores;
  SdmaParams sdma;
  NotifyParams notify;
  StreamParams stream;
  RdmaParams rdma;
  ChannelParams local_memory;       // on-chip SDMA copies share this channel
  std::uint64_t hccl_buffer_bytes = 200ULL * 1024 * 1024;  // HCCL_BUFFSIZE default 200 (MiB)
};

}  // namespace hcclsim
