// Builders for A2 RoCE clusters and A3 supernodes (see cluster.h).
//
// Node numbering: NPUs (A2) or dies (A3) first, server by server; then, per
// A3 server, its HCCS/UB switch (the UB L1); then, per A3 supernode of more
// than one server, its L2 switches; then the RoCE leaves and, if there is
// more than one leaf, the spines.
#include "topologies/cluster.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace hcclsim {

namespace {

constexpr int kMaxNpus = 1 << 20;

[[noreturn]] void refuse(const ClusterLayout& layout, const std::string& reason) {
  const std::string name = layout.name.empty() ? std::string("cluster") : "cluster '" + layout.name + "'";
  throw std::invalid_argument(name + ": " + reason);
}

std::string server_name(const ClusterLayout& layout, std::size_t index) {
  const ServerLayout& s = layout.servers[index];
  return "server " + std::to_string(index) + (s.id.empty() ? std::string() : " ('" + s.id + "')");
}

const ChannelParams& link_of(const ClusterLayout& layout, const HardwareProfile& profile, const std::string& kind,
                             const std::string& needed_for) {
  const auto found = profile.links.find(kind);
  if (found == profile.links.end()) {
    refuse(layout, "hardware profile '" + profile.name + "'" + (profile.file.empty() ? "" : " (" + profile.file + ")") +
                       " has no \"" + kind + "\" link, which " + needed_for + " needs");
  }
  return found->second;
}

// `numerator` bytes/s divided by `divisor`, rounded to the nearest byte/s, at least 1.
Bandwidth share(double numerator, double divisor) {
  const double v = std::floor(numerator / divisor + 0.5);
  return Bandwidth{v < 1.0 ? 1 : static_cast<std::uint64_t>(v)};
}

void validate(const ClusterLayout& layout, const ProductTraits& product) {
  if (layout.kind != product.cluster_kind()) {
    refuse(layout, "kind '" + layout.kind + "' is not its profile's product, \"" + product.cluster_kind() + "\"");
  }
  if (layout.servers.empty()) refuse(layout, "a cluster needs at least one server");
  long long total = 0;
  for (std::size_t i = 0; i < layout.servers.size(); ++i) {
    const ServerLayout& s = layout.servers[i];
    if (s.devices < 1) refuse(layout, server_name(layout, i) + " has no devices");
    if (s.devices % product.dies_per_chip != 0) {
      refuse(layout, server_name(layout, i) + " has " + std::to_string(s.devices) + " dies; an " + product.name +
                         " server holds whole chips of " + std::to_string(product.dies_per_chip) + " dies each");
    }
    if (product.has_supernodes() && s.superpod < 0) {
      refuse(layout, server_name(layout, i) + " has a negative supernode index " + std::to_string(s.superpod));
    }
    total += s.devices;
    if (total > kMaxNpus) refuse(layout, "more than " + std::to_string(kMaxNpus) + " NPUs");
  }
  const RoceFabricOptions& r = layout.roce;
  if (r.npus_per_leaf < 1) refuse(layout, "roce.npus_per_leaf must be at least 1");
  if (r.spines < 1) refuse(layout, "roce.spines must be at least 1");
  if (!std::isfinite(r.oversubscription) || r.oversubscription < 1.0) {
    refuse(layout, "roce.oversubscription must be a finite number >= 1 (1 = non-blocking)");
  }
  if (product.has_supernodes() && layout.ub.l2_switches < 1) refuse(layout, "ub.l2_switches must be at least 1");
}

}  // namespace

TopologySpec make_cluster(const ClusterLayout& layout, const HardwareProfile& profile) {
  const ProductTraits& product = profile.npu.traits;
  validate(layout, product);
  const bool die_pairs = product.dies_per_chip == 2;   // SIO between the two dies of a chip

  TopologySpec spec;
  spec.name = layout.name;
  spec.npu = profile.npu;
  spec.assumed_constants = profile.assumed;
  spec.profile_file = profile.file;
  spec.npus_per_chip = product.dies_per_chip;
  spec.npus_per_server = layout.servers.front().devices;

  // NPUs, server by server; SDMA domains: the server, or the supernode (A3).
  std::vector<int> first_npu;
  for (std::size_t s = 0; s < layout.servers.size(); ++s) {
    first_npu.push_back(spec.npus);
    for (int d = 0; d < layout.servers[s].devices; ++d) {
      spec.server_of.push_back(static_cast<int>(s));
      spec.sdma_domain_of.push_back(product.supernode_sdma ? layout.servers[s].superpod : static_cast<int>(s));
    }
    spec.npus += layout.servers[s].devices;
  }
  int next_node = spec.npus;
  {
    // The links below, counted first: 100,000 NPUs have half a million, and
    // growing the list by doubling copied them and zeroed fresh pages for a
    // third of loading such a topology.
    std::size_t links = 0;
    std::map<int, std::size_t> per_superpod;
    for (const ServerLayout& server : layout.servers) {
      const auto n = static_cast<std::size_t>(server.devices);
      links += (die_pairs ? (n + 1) / 2 : 0) + (product.server_switch ? n : (n < 2 ? 0 : n * (n - 1) / 2));
      ++per_superpod[server.superpod];
    }
    for (const auto& [superpod, servers] : per_superpod) {
      if (product.has_supernodes() && servers > 1) links += servers * static_cast<std::size_t>(std::max(layout.ub.l2_switches, 0));
    }
    const auto npus = static_cast<std::size_t>(spec.npus);
    const auto per_leaf = static_cast<std::size_t>(std::max(layout.roce.npus_per_leaf, 1));
    const std::size_t leaves = (npus + per_leaf - 1) / per_leaf;
    links += npus + (leaves > 1 ? leaves * static_cast<std::size_t>(std::max(layout.roce.spines, 0)) : 0);
    spec.links.reserve(links);
  }

  if (!product.server_switch) {
    // A2: HCCS full mesh inside each server.
    for (std::size_t s = 0; s < layout.servers.size(); ++s) {
      const int n = layout.servers[s].devices;
      if (die_pairs) {
        const ChannelParams& sio = link_of(layout, profile, "sio", "the die pairs of an " + product.name + " server");
        for (int d = 0; d + 1 < n; d += 2) spec.links.push_back(LinkSpec{first_npu[s] + d, first_npu[s] + d + 1, "sio", sio});
      }
      if (n < 2) continue;
      const ChannelParams& hccs = link_of(layout, profile, "hccs", "the HCCS mesh of an " + product.name + " server");
      for (int a = 0; a < n; ++a) {
        for (int b = a + 1; b < n; ++b) {
          spec.links.push_back(LinkSpec{first_npu[s] + a, first_npu[s] + b, "hccs", hccs});
        }
      }
    }
  } else {
    // A3: as configs/topologies/a3-server.json, per server: SIO between dies
    // 2k and 2k+1, an HCCS port from every die to the server's switch (UB L1).
    const ChannelParams* sio = die_pairs ? &link_of(layout, profile, "sio", "the die pairs of an " + product.name + " server") : nullptr;
    const ChannelParams& hccs = link_of(layout, profile, "hccs", "the die ports of an " + product.name + " server");
    FabricSpec ub;
    ub.kind = "ub";
    ub.leaf_of.assign(static_cast<std::size_t>(spec.npus), -1);
    std::vector<int> l1_of(layout.servers.size());
    for (std::size_t s = 0; s < layout.servers.size(); ++s) {
      const int l1 = next_node++;
      l1_of[s] = l1;
      const int n = layout.servers[s].devices;
      if (sio != nullptr) {
        for (int d = 0; d < n; d += 2) spec.links.push_back(LinkSpec{first_npu[s] + d, first_npu[s] + d + 1, "sio", *sio});
      }
      for (int d = 0; d < n; ++d) {
        spec.links.push_back(LinkSpec{first_npu[s] + d, l1, "hccs", hccs});
        ub.leaf_of[static_cast<std::size_t>(first_npu[s] + d)] = l1;
      }
    }
    // Supernodes of more than one server: every L1 links to every L2 of its
    // supernode. Each L1-L2 link carries (dies of the server x the profile's
    // per-die UB share) / L2 switches, and never less than one die's port, so
    // that one die's flow is limited by its own port (non-blocking UB fabric,
    // calibration.md A3-3).
    std::map<int, std::vector<std::size_t>> members;  // supernode -> its servers
    for (std::size_t s = 0; s < layout.servers.size(); ++s) members[layout.servers[s].superpod].push_back(s);
    std::vector<std::pair<int, std::vector<int>>> l2_links;  // (L1, its L2 switches)
    for (const auto& [superpod, servers] : members) {
      if (!product.has_supernodes() || servers.size() < 2) continue;
      const ChannelParams& ub_link = link_of(layout, profile, "ub", "the UB switches joining the servers of a supernode");
      std::vector<int> l2;
      for (int k = 0; k < layout.ub.l2_switches; ++k) l2.push_back(next_node++);
      for (const std::size_t s : servers) {
        ChannelParams up = ub_link;
        const double needed = static_cast<double>(layout.servers[s].devices) * static_cast<double>(ub_link.bandwidth.bytes_per_s);
        up.bandwidth = share(needed, layout.ub.l2_switches);
        if (up.bandwidth.bytes_per_s < hccs.bandwidth.bytes_per_s) up.bandwidth = hccs.bandwidth;
        for (const int sw : l2) spec.links.push_back(LinkSpec{l1_of[s], sw, "ub", up});
        l2_links.push_back({l1_of[s], l2});
      }
    }
    ub.spines_of.resize(static_cast<std::size_t>(next_node));
    for (auto& [l1, l2] : l2_links) ub.spines_of[static_cast<std::size_t>(l1)] = std::move(l2);
    spec.fabrics.push_back(std::move(ub));
  }

  // RoCE leaf/spine: a NIC per NPU (A2) or die (A3), `npus_per_leaf` to a
  // leaf in rank order; every leaf links to every spine, its uplinks
  // together carrying its NICs' rate / oversubscription.
  {
    const ChannelParams& nic = link_of(layout, profile, "roce", "the RoCE NICs between servers");
    const RoceFabricOptions& opt = layout.roce;
    FabricSpec roce;
    roce.kind = "roce";
    roce.leaf_of.assign(static_cast<std::size_t>(spec.npus), -1);
    const int leaves = (spec.npus + opt.npus_per_leaf - 1) / opt.npus_per_leaf;
    std::vector<int> leaf_nodes;
    for (int l = 0; l < leaves; ++l) leaf_nodes.push_back(next_node++);
    for (int n = 0; n < spec.npus; ++n) {
      const int leaf = leaf_nodes[static_cast<std::size_t>(n / opt.npus_per_leaf)];
      spec.links.push_back(LinkSpec{n, leaf, "roce", nic});
      roce.leaf_of[static_cast<std::size_t>(n)] = leaf;
    }
    std::vector<int> spines;
    if (leaves > 1) {
      for (int k = 0; k < opt.spines; ++k) spines.push_back(next_node++);
      for (int l = 0; l < leaves; ++l) {
        const int nics = std::min(opt.npus_per_leaf, spec.npus - l * opt.npus_per_leaf);
        ChannelParams up = nic;
        up.bandwidth = share(static_cast<double>(nics) * static_cast<double>(nic.bandwidth.bytes_per_s),
                             static_cast<double>(opt.spines) * opt.oversubscription);
        for (const int sw : spines) spec.links.push_back(LinkSpec{leaf_nodes[static_cast<std::size_t>(l)], sw, "roce", up});
      }
    }
    roce.spines_of.resize(static_cast<std::size_t>(next_node));
    for (const int leaf : leaf_nodes) roce.spines_of[static_cast<std::size_t>(leaf)] = spines;
    spec.fabrics.push_back(std::move(roce));
  }

  spec.switches = next_node - spec.npus;
  for (FabricSpec& f : spec.fabrics) f.spines_of.resize(static_cast<std::size_t>(next_node));
  return spec;
}

ClusterLayout product_cluster_layout(const ProductTraits& product, int supernodes, int servers_per_supernode,
                                     const RoceFabricOptions& roce, const UbFabricOptions& ub) {
  ClusterLayout layout;
  layout.kind = product.cluster_kind();
  layout.name = layout.kind + "-cluster";
  layout.roce = roce;
  layout.ub = ub;
  for (int p = 0; p < supernodes; ++p) {
    for (int s = 0; s < servers_per_supernode; ++s) {
      const std::string name = product.has_supernodes() ? "superpod" + std::to_string(p) + "-server" + std::to_string(s)
                                                        : "server" + std::to_string(s);
      layout.servers.push_back(ServerLayout{name, product.devices_per_server, p});
    }
  }
  return layout;
}

}  // namespace hcclsim
