// Typed hardware parameters. Filled by topologies/ from a hardware profile;
// models take them in their constructors and never see JSON.
#pragma once

#include <cstdint>
#include <string>

#include "sim/units.h"

namespace hcclsim {

// The product generation an NPU belongs to: HCCL selects executors, limits
// and expansion modes per generation (910B -> A2, 910C / 910_93 -> A3).
enum class Product : std::uint8_t { A2, A3 };
const char* product_name(Product product);   // "A2", "A3"

// What a channel is: an NPU's local memory, or a link of a kind the profile
// describes under "links" (its constants are links.<kind>.*).
enum class LinkKind : std::uint8_t { Memory, Hccs, Sio, Ub, Roce };
const char* link_kind_name(LinkKind kind);   // "memory", "hccs", "sio", "ub", "roce"
// "hccs" -> LinkKind::Hccs; throws std::invalid_argument for another name.
LinkKind parse_link_kind(const std::string& name);

// One direction of a point-to-point link or a switch port.
struct ChannelParams {
  Bandwidth bandwidth;        // serialization rate (what an SDMA read through it reaches)
  Time latency;               // from the end of a segment's serialization to its arrival
  std::uint64_t segment_bytes = 64 * 1024;  // granularity of sharing and pipelining
  // SDMA writes (the local engine pushes into a peer) through this link are
  // slower than reads on A2 HCCS (calibration rows A2-1): a cap for a write
  // flow crossing it. 0: writes run at `bandwidth` too.
  Bandwidth write_bandwidth;
  LinkKind kind = LinkKind::Memory;  // set by the platform from its link's kind
};

struct SdmaParams {
  int engines = 1;                  // concurrent SDMA tasks per NPU
  Time task_fixed;                  // set-up cost before the first byte moves (local copy, remote write)
  Time read_fixed;                  // the same for a read of a peer's memory (the request crosses first)
  Bandwidth copy_bandwidth;         // per-engine rate cap for copies
  Bandwidth reduce_bandwidth;       // per-engine rate cap for Reduce_Inline
};

// Notify registers are sized by what a workload uses (there is no fixed
// count to exceed); HCCL's API limits (64 per communicator) live in programs.
struct NotifyParams {
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
  Time host_sync;                   // the host waits for a stream and reads a small result back
};

struct CoreParams {
  int aic = 0;                      // cube cores
  int aiv = 0;                      // vector cores
  std::uint64_t aic_flops_per_s = 0;  // one AIC, fp16 multiply-add counted as 2 flops
  Bandwidth aiv_bandwidth;          // one AIV, bytes processed per second
};

// AI Vector cores moving data with their own loads and stores (HCCL's AIV
// expansion mode, MoE dispatch/combine kernels): each core copies tile by
// tile (GM -> UB -> GM, local or a peer's memory over the links) and
// synchronises through flags in memory that peers write and it polls.
struct AivParams {
  Bandwidth core_bandwidth;         // one core's copy rate (MTE2 in, MTE3 out, double-buffered)
  Time copy_fixed;                  // per copy: issue and the first tile's round trip
  Time flag_write;                  // a 32-byte flag store to local or peer memory, until it lands
  Time flag_poll;                   // one poll of a flag: a waiting core sees a landed flag this much later
};

struct NpuParams {
  std::string model;                // "910B", "910C"
  Product product = Product::A2;
  CoreParams cores;
  SdmaParams sdma;
  NotifyParams notify;
  StreamParams stream;
  RdmaParams rdma;
  AivParams aiv;
  ChannelParams local_memory;       // on-chip SDMA copies share this channel
  std::uint64_t hccl_buffer_bytes = 200ULL * 1024 * 1024;  // HCCL_BUFFSIZE default 200 (MiB)
};

}  // namespace hcclsim
