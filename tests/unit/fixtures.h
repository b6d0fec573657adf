// Small hand-made hardware for model tests: round parameters, so that every
// expected time in a test can be computed from them (never a pasted result).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "models/params.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/platform.h"

// Times print as picoseconds in failure messages.
namespace Catch {
template <>
struct StringMaker<hcclsim::Time> {
  static std::string convert(hcclsim::Time t) { return std::to_string(t.ps) + " ps"; }
};
}  // namespace Catch

namespace hcclsim::testing {

// A file of the source tree (configs, topologies), wherever the tests run from.
inline std::string source_file(const std::string& relative) { return std::string(HCCLSIM_SOURCE_DIR) + "/" + relative; }

// A shipped product's profile (configs/profiles/), read once per product.
inline const HardwareProfile& shipped_profile(HcclRules product) {
  static const HardwareProfile a2 = load_profile(source_file("configs/profiles/a2-910b.json"));
  static const HardwareProfile a3 = load_profile(source_file("configs/profiles/a3-910c.json"));
  return product == HcclRules::A3 ? a3 : a2;
}

// HCCL's traits and executor-selection thresholds on `product`, as its
// shipped profile states them.
inline const HcclApiLimits& shipped_hccl_api(HcclRules product) { return shipped_profile(product).npu.hccl_api; }

// The shipped products' clusters, as their topology presets build them:
// `servers` A2 servers of 8 NPUs; `supernodes` x `per_supernode` A3 servers
// of 16 dies.
inline ClusterLayout a2_cluster_layout(int servers, const RoceFabricOptions& roce = {}) {
  ClusterLayout layout = product_cluster_layout(shipped_profile(HcclRules::A2).npu.traits, 1, servers, roce);
  layout.name = "a2-cluster-" + std::to_string(servers);
  return layout;
}
inline ClusterLayout cloudmatrix_layout(int supernodes, int per_supernode = 48, const RoceFabricOptions& roce = {},
                                        const UbFabricOptions& ub = {}) {
  ClusterLayout layout = product_cluster_layout(shipped_profile(HcclRules::A3).npu.traits, supernodes, per_supernode, roce, ub);
  layout.name = "cloudmatrix-" + std::to_string(supernodes) + "x" + std::to_string(per_supernode);
  return layout;
}

// A channel with no SDMA-specific caps or extras.
inline ChannelParams channel_params(Bandwidth bandwidth, Time latency, std::uint64_t segment_bytes) {
  ChannelParams c;
  c.bandwidth = bandwidth;
  c.latency = latency;
  c.segment_bytes = segment_bytes;
  return c;
}

inline NpuParams small_npu(int sdma_engines) {
  NpuParams n;
  n.model = "test";
  n.cores.aic = 2;
  n.cores.aiv = 4;
  n.cores.aic_flops_per_s = 1'000'000'000'000ULL;
  n.cores.aiv_bandwidth = Bandwidth{1'000'000'000};
  n.sdma.engines = sdma_engines;
  n.sdma.task_fixed = Time::from_ns(1000);
  n.sdma.read_fixed = Time::from_ns(1500);
  n.sdma.copy_bandwidth = Bandwidth{100'000'000'000};  // far above the links: no cap
  n.sdma.reduce_bandwidth = Bandwidth{100'000'000'000};
  n.notify.record_local = Time::from_ns(500);
  n.notify.record_remote = Time::from_ns(700);
  n.notify.wait = Time::from_ns(20);
  n.stream.task_dispatch = Time::from_ns(300);
  n.stream.op_launch = Time::from_ns(2000);
  n.stream.host_sync = Time::from_ns(5000);
  n.aiv.core_bandwidth = Bandwidth{2'000'000'000};
  n.aiv.copy_fixed = Time::from_ns(400);
  n.aiv.flag_write = Time::from_ns(200);
  n.aiv.flag_poll = Time::from_ns(600);
  n.local_memory = channel_params(Bandwidth{10'000'000'000}, Time::from_ns(0), 4096);
  n.hccl_buffer_bytes = 1024 * 1024;
  return n;
}

// 1 GB/s, 100 ns, 4 KiB segments.
inline const ChannelParams kLink = channel_params(Bandwidth{1'000'000'000}, Time::from_ns(100), 4096);

inline TopologySpec two_npus(const NpuParams& npu) {
  TopologySpec spec;
  spec.name = "two-npus";
  spec.npus = 2;
  spec.npus_per_server = 2;
  spec.npu = npu;
  spec.links = {LinkSpec{0, 1, "hccs", kLink}};
  return spec;
}

}  // namespace hcclsim::testing
