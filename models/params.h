// Typed hardware parameters. Filled by topologies/ from a hardware profile;
// models take them in their constructors and never see JSON.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/units.h"

namespace hcclsim {

// The HCCL rule set a product follows: HCCL selects and builds executors
// by device type (910B: A2; 910_93: A3), and hcclsim has both rule sets
// (sim/executors/select_*.cpp). A profile names its product's device type
// (npu.product.hccl_device_type); what the product is made of is data too,
// the rest of npu.product (ProductTraits).
enum class HcclRules : std::uint8_t { A2, A3 };

// A product as its profile states it (npu.product): how its servers and
// supernodes are built, and what HCCL's rank tables for it hold. Topologies
// and rank tables are built from these, never from the product's name.
struct ProductTraits {
  std::string name;                     // "A2", "A3", ...; a topology's cluster kind is its lower case
  std::string hccl_device_type;         // "910B" or "910_93": whose HCCL selection rules and API defaults apply
  int devices_per_server = 8;           // ranks (dies) a server holds at most
  int dies_per_chip = 1;                // 2: a chip's two dies, SIO between them, each a rank
  bool server_switch = false;           // a server's NPUs reach each other through its switch, else a full HCCS mesh
  bool supernode_sdma = false;          // one SDMA domain per supernode (UB between its servers), else per server
  int servers_per_supernode = 1;        // a cluster's default; above 1 clusters count supernodes
  std::vector<std::string> rank_table_versions;  // HCCL rank table versions its tables may have
  std::string rank_table_doc;           // the HCCL document describing them, for messages
  // The cluster kind of its topologies: the name in lower case ("a2").
  std::string cluster_kind() const;
  bool has_supernodes() const { return servers_per_supernode > 1; }
};

// What a channel is: an NPU's local memory, or a link of a kind the profile
// describes under "links" (its constants are links.<kind>.*).
enum class LinkKind : std::uint8_t { Memory, Hccs, Sio, Ub, Roce };
const char* link_kind_name(LinkKind kind);   // "memory", "hccs", "sio", "ub", "roce"
// The kinds a profile's `links` and a topology's `links[].kind` name (the
// fabric's; Memory is a platform's own): "hccs", "sio", "ub", "roce".
const std::vector<std::string>& link_kind_names();
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
  // An SDMA task whose path crosses this link waits this much longer for
  // its completion (A3: the engine's responses from beyond the server's
  // HCCS/UB switch, calibration rows A3-1 two machines), once per task
  // whatever the hops. AIV loads and stores do not wait for it. 0: none.
  Time sdma_write_extra;
  Time sdma_read_extra;
  // One SDMA task through this link moves at most this rate (0: no cap
  // beyond the link's own); AIV cores, many at once, fill the link.
  Bandwidth sdma_write_rate;
  Bandwidth sdma_read_rate;
  // One SDMA task of HCCL's two-sided transport (the copies of a collective
  // or a send/recv, either way) through this link moves at most this rate;
  // the one-sided batches (hixl_cs, HcclBatchPut/Get) are not held to it.
  // A2 HCCS: calibration row A2-3 (0: no such cap).
  Bandwidth transport_rate;
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

// HCCL's one-sided batch path (HcclBatchPut / HcclBatchGet; hcomm
// one_sided_service): one task per descriptor, issued by the host (A2) or
// the AI CPU (A3, aicpu unfold) while the stream runs the earlier ones.
// Collectives do not take this path; `validate` runs its rows on it.
struct OneSidedParams {
  Time direct_issue;                // hixl_cs's client issuing one block's SDMA copy (not through HCCL)
  Time sdma_issue;                  // issuing one descriptor's SDMA copy (inside an SDMA domain)
  Time rdma_issue;                  // issuing one descriptor's RDMA write (work request and doorbell task)
  Time rdma_doorbell;               // the doorbell task on the stream, which waits for the previous write's completion
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
  // One AIC in flash attention (the profile's aic_attention_rate; without
  // it, aic_flops_per_s): the step's core attention, whose softmax tiles
  // between the matmuls keep the cube below its GEMM rate.
  std::uint64_t aic_attention_flops_per_s = 0;
  // One AIC's fixed time per output base block of a GEMM (128 x 256, as
  // hcclsim step cuts it; the profile's aic_gemm_block_fixed; 0 without it): loading
  // the block's first operands and writing its accumulator out, on top of
  // its K loop at aic_flops_per_s. What makes a GEMM of a short reduction
  // (a small model's hidden size, a TP shard) slower per flop.
  Time aic_gemm_block_fixed;
  // Flash attention's time per score block (128 queries x 256 keys) beyond
  // its two matmuls at aic_attention_flops_per_s: the block's online softmax
  // on the AIC's vector units (the profile's aic_attention_block_fixed; 0
  // without it). Independent of the head dimension, unlike the matmuls.
  Time aic_attention_block_fixed;
  Bandwidth aiv_bandwidth;          // one AIV, bytes processed per second
  // Not hardware: a what-if (a scenario's slow rank, docs/user-guide.md
  // "Scenarios"): Compute tasks on this NPU take this many times the
  // duration their builder gave them. 1: as given.
  double compute_factor = 1.0;
};

// The NPU's own memory (HBM) as hcclsim step's compute roofline and memory
// check use it (npu.memory; 0: the profile does not say).
struct MemoryParams {
  Bandwidth hbm_bandwidth;          // HBM read + write bandwidth of one rank
  std::uint64_t hbm_capacity = 0;   // bytes of HBM of one rank
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
  // All AIV moves of an NPU's cores that leave its memory for a peer's (or
  // come in from one) over the links share this rate each way (A2: the
  // vector cores' loads and stores to peers' HBM, however many links they
  // spread over). 0: no such limit, only the links' and the cores' own.
  Bandwidth remote_bandwidth;
};

// What HCCL's APIs allow on a product (docs/sources.md §2, the seed pages
// HcclThreadAcquire.md and InterHcclGroupSync.md): the thread / notify API
// per communicator and the Ascend C Hccl kernel API; and where HCCL builds
// an executor differently per product. From the profile (npu.hccl_api), so
// programs and executors go by data, not by product name.
struct HcclApiLimits {
  int threads_per_comm = 40;
  int notifies_per_comm = 64;
  int messages_per_domain = 63;     // Prepare calls, and InterHcclGroupSync where it exists
  bool inter_group_sync = false;    // InterHcclGroupSync (it then takes a message slot too)
  bool iterate = false;             // Hccl::Iterate
  bool alltoallv = false;           // Hccl::AlltoAllV in kernels
  int alltoall_max_ranks = 0;       // AlltoAll / AlltoAllV domain size limit; 0: none
  std::string expanding_engine = "HOST";  // who expands a Prepare by default: HOST or AICPU
  // AllReduceMeshSmallCountExecutor's template: false, one shot through the
  // HCCL buffer (910B's AllReduceReduceBcast); true, recursive halving-doubling
  // that loops like any level-1 form (910_93's HD_OPTIM).
  bool small_count_all_reduce_hd = false;
  // RunAlltoAllDirectFullmesh among ranks of several servers (910_93, over
  // UB and RoCE); false: inside one server only (910B).
  bool alltoall_fullmesh_across_servers = false;
  // HCCL's executor-selection thresholds (the profile's npu.hccl_selection),
  // by name: the sizes the product's selection rules (sim/executors/select_*.cpp)
  // compare a collective's data size or its HCCL buffer with.
  std::map<std::string, std::uint64_t> selection_sizes;
  // The rank counts those rules compare a communicator's size with
  // (npu.hccl_selection_ranks), by name.
  std::map<std::string, int> selection_ranks;
  std::string selection_file;   // the profile they were read from, for messages
};

struct NpuParams {
  std::string model;                // "910B", "910C"
  HcclRules hccl_rules = HcclRules::A2;   // from traits.hccl_device_type
  ProductTraits traits;
  HcclApiLimits hccl_api;
  CoreParams cores;
  MemoryParams memory;
  SdmaParams sdma;
  NotifyParams notify;
  StreamParams stream;
  OneSidedParams one_sided;
  RdmaParams rdma;
  AivParams aiv;
  ChannelParams local_memory;       // on-chip SDMA copies share this channel
  std::uint64_t hccl_buffer_bytes = 200ULL * 1024 * 1024;  // HCCL_BUFFSIZE default 200 (MiB)
  // DeepEP's normal mode across RDMA domains runs its layered kernels
  // (notify_dispatch_a2, dispatch_normal_a2, moe_distribute_combine_a2) on
  // this NPU; otherwise hcclsim's generic relay form stands in (npu.moe).
  bool moe_layered_kernels = false;
};

}  // namespace hcclsim
