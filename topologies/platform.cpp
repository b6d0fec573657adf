#include "topologies/platform.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "base/error.h"
#include "models/link/channel.h"
#include "models/link/flow_network.h"
#include "models/npu/task_engine.h"
#include "models/wake_clock.h"

namespace hcclsim {

namespace {
// An NPU's AIV port one way: the rate its cores' moves to or from peers
// share; no latency of its own (the links' is paid on the way).
ChannelParams aiv_port_params(const NpuParams& npu) {
  ChannelParams p;
  p.bandwidth = npu.aiv.remote_bandwidth;
  p.segment_bytes = 256 * 1024;
  p.kind = LinkKind::Memory;
  return p;
}
std::string node_name(int node, int npus) {
  return node < npus ? "npu" + std::to_string(node) : "switch" + std::to_string(node - npus);
}
bool any_link_down(const TopologySpec& spec) {
  return std::any_of(spec.links.begin(), spec.links.end(), [](const LinkSpec& l) { return l.down; });
}
}  // namespace

Platform::Platform(const TopologySpec& spec) : spec_(spec), clock_(std::make_unique<WakeClock>("wake_clock")), finder_(spec_) {
  const int nodes = spec.npus + spec.switches;
  auto bad_node = [&](int node) { return node < 0 || node >= nodes; };
  for (const LinkSpec& link : spec.links) {
    if (bad_node(link.a) || bad_node(link.b) || link.a == link.b) {
      throw std::invalid_argument("topology '" + spec.name + "': " + link.kind + " link " + std::to_string(link.a) +
                                  "-" + std::to_string(link.b) + " does not join two different nodes of [0, " +
                                  std::to_string(nodes - 1) + "]");
    }
  }
  for (const FabricSpec& f : spec.fabrics) {
    const std::string where = "topology '" + spec.name + "': fabric '" + f.kind + "'";
    if (f.leaf_of.size() != static_cast<std::size_t>(spec.npus)) {
      throw std::invalid_argument(where + " gives a leaf for " + std::to_string(f.leaf_of.size()) + " NPUs, not " +
                                  std::to_string(spec.npus));
    }
    if (f.spines_of.size() > static_cast<std::size_t>(nodes)) {
      throw std::invalid_argument(where + " lists spines for more nodes than the topology has");
    }
    for (const int leaf : f.leaf_of) {
      if (leaf != -1 && bad_node(leaf)) throw std::invalid_argument(where + " names a leaf outside the nodes");
    }
    for (const auto& spines : f.spines_of) {
      for (const int sw : spines) {
        if (bad_node(sw)) throw std::invalid_argument(where + " names a spine outside the nodes");
      }
    }
  }
  FlowNetwork* flows = nullptr;
  if (spec.network == NetworkModel::Flow) {
    auto owned = std::make_unique<FlowNetwork>("flow_network", *clock_, spec.flow_batching);
    flows = owned.get();
    flows_ = flows;
    network_ = std::move(owned);
  } else {
    network_ = std::make_unique<SegmentNetwork>();
  }
  for (int n = 0; n < spec.npus; ++n) {
    const std::string name = "npu" + std::to_string(n);
    engines_.push_back(
        std::make_unique<TaskEngine>(name.c_str(), n, npu_params_of(spec, n), *network_, *clock_));
    local_memory_.push_back(
        std::make_unique<Channel>((name + "_memory").c_str(), spec.npu.local_memory, name + " local memory", *clock_));
  }
  for (const LinkSpec& link : spec.links) {
    for (const auto& [from, to] : {std::pair{link.a, link.b}, std::pair{link.b, link.a}}) {
      const std::string label = link.kind + " " + node_name(from, spec.npus) + "->" + node_name(to, spec.npus);
      std::string module = label;
      std::replace(module.begin(), module.end(), ' ', '_');
      std::replace(module.begin(), module.end(), '>', '_');
      std::replace(module.begin(), module.end(), '-', '_');
      ChannelParams params = link.params;
      params.kind = parse_link_kind(link.kind);  // a report tells which links.<kind> constants a run used
      channels_.push_back(std::make_unique<Channel>(module.c_str(), params, label, *clock_));
    }
  }
  if (spec.npu.aiv.remote_bandwidth.bytes_per_s != 0) {
    for (int n = 0; n < spec.npus; ++n) {
      for (const char* way : {"out", "in"}) {
        const std::string name = "npu" + std::to_string(n) + "_aiv_" + way;
        aiv_ports_.push_back(std::make_unique<Channel>(name.c_str(), aiv_port_params(spec.npu),
                                                       "npu" + std::to_string(n) + " AIV " + way, *clock_));
      }
    }
  }
  any_down_ = any_link_down(spec_);
  down_.assign(spec_.links.size(), 0);
  for (std::size_t i = 0; i < spec_.links.size(); ++i) down_[i] = spec_.links[i].down ? 1 : 0;
  if (flows != nullptr) {
    for (const auto& c : local_memory_) flows->add_channel(*c);
    for (const auto& c : channels_) flows->add_channel(*c);
    for (const auto& c : aiv_ports_) flows->add_channel(*c);
  }
}

Platform::~Platform() = default;

void Platform::set_parameters(const TopologySpec& spec) {
  const std::string where = "re-timing topology '" + spec_.name + "': ";
  const bool same_nodes = spec.npus == spec_.npus && spec.switches == spec_.switches &&
                          spec.npus_per_chip == spec_.npus_per_chip && spec.npus_per_server == spec_.npus_per_server &&
                          spec.sdma_domain_of == spec_.sdma_domain_of && spec.server_of == spec_.server_of &&
                          spec.network == spec_.network && spec.links.size() == spec_.links.size() &&
                          spec.fabrics.size() == spec_.fabrics.size();
  if (!same_nodes) throw std::invalid_argument(where + "the new topology has other nodes, links or domains");
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    const LinkSpec& a = spec.links[i];
    const LinkSpec& b = spec_.links[i];
    if (a.a != b.a || a.b != b.b || a.kind != b.kind) throw std::invalid_argument(where + "link " + std::to_string(i) + " differs");
  }
  for (std::size_t i = 0; i < spec.fabrics.size(); ++i) {
    const FabricSpec& a = spec.fabrics[i];
    const FabricSpec& b = spec_.fabrics[i];
    if (a.kind != b.kind || a.leaf_of != b.leaf_of || a.spines_of != b.spines_of) {
      throw std::invalid_argument(where + "fabric '" + a.kind + "' differs");
    }
  }
  for (int n = 0; n < spec.npus; ++n) engines_[static_cast<std::size_t>(n)]->set_params(npu_params_of(spec, n));
  for (const auto& memory : local_memory_) memory->set_params(spec.npu.local_memory);
  if ((spec.npu.aiv.remote_bandwidth.bytes_per_s != 0) != !aiv_ports_.empty()) {
    throw std::invalid_argument(where + "npu.aiv.remote_bandwidth is given in one profile and not in the other");
  }
  for (const auto& port : aiv_ports_) port->set_params(aiv_port_params(spec.npu));
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    channels_[2 * i]->set_params(spec.links[i].params);
    channels_[2 * i + 1]->set_params(spec.links[i].params);
    spec_.links[i].params = spec.links[i].params;
  }
  // Links down or up again: routes are found anew, in a cache of their own
  // per set of links down (a route handed out stays valid for the platform's life).
  std::vector<char> down(spec.links.size(), 0);
  for (std::size_t i = 0; i < spec.links.size(); ++i) down[i] = spec.links[i].down ? 1 : 0;
  if (down != down_) {
    route_caches_[down_] = RouteCaches{std::move(routes_), std::move(aiv_routes_)};
    RouteCaches& next = route_caches_[down];
    routes_ = std::move(next.routes);
    aiv_routes_ = std::move(next.aiv_routes);
    next = RouteCaches{};
    for (std::size_t i = 0; i < spec.links.size(); ++i) spec_.links[i].down = spec.links[i].down;
    down_ = std::move(down);
    any_down_ = any_link_down(spec_);
  }
  spec_.npu = spec.npu;
  spec_.npu_overrides = spec.npu_overrides;
  spec_.jitter = spec.jitter;
  if (flows_ != nullptr) flows_->reread_channels();
}

int Platform::server_of(int npu) const {
  return hcclsim::server_of(spec_, npu);
}

bool Platform::rdma_between(int a, int b) const { return finder_.rdma_between(a, b); }

Channel* Platform::channel(int a, int b) const {
  const int index = finder_.channel(a, b);
  return index < 0 ? nullptr : channels_[static_cast<std::size_t>(index)].get();
}

const std::vector<Channel*>& Platform::route(int src, int dst) {
  if (src < 0 || src >= spec_.npus || dst < 0 || dst >= spec_.npus) {
    throw std::invalid_argument("route from npu" + std::to_string(src) + " to npu" + std::to_string(dst) +
                                ": topology '" + spec_.name + "' has npus 0.." + std::to_string(spec_.npus - 1));
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
  auto found = routes_.find(key);
  if (found != routes_.end()) return found->second;
  std::vector<Channel*> path;
  if (src == dst) {
    path.push_back(local_memory_.at(static_cast<std::size_t>(src)).get());
  } else {
    std::vector<int> indices = finder_.path(src, dst);
    if (any_down_) indices = path_around_down(src, dst, indices);
    for (const int index : indices) path.push_back(channels_[static_cast<std::size_t>(index)].get());
    if (path.empty()) {
      throw std::invalid_argument("no link path from npu" + std::to_string(src) + " to npu" + std::to_string(dst) +
                                  " in topology '" + spec_.name + "'");
    }
  }
  return routes_.emplace(key, std::move(path)).first->second;
}

const std::vector<Channel*>& Platform::aiv_route(int src, int dst) {
  if (aiv_ports_.empty() || src == dst) return route(src, dst);
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
  auto found = aiv_routes_.find(key);
  if (found != aiv_routes_.end()) return found->second;
  std::vector<Channel*> path{aiv_ports_[2 * static_cast<std::size_t>(src)].get()};
  const std::vector<Channel*>& links = route(src, dst);
  path.insert(path.end(), links.begin(), links.end());
  path.push_back(aiv_ports_[2 * static_cast<std::size_t>(dst) + 1].get());
  return aiv_routes_.emplace(key, std::move(path)).first->second;
}

std::vector<int> Platform::path_around_down(int src, int dst, const std::vector<int>& path) const {
  const auto link_of = [this](int channel) -> const LinkSpec& { return spec_.links[static_cast<std::size_t>(channel / 2)]; };
  const auto from_of = [&](int channel) { return channel % 2 == 0 ? link_of(channel).a : link_of(channel).b; };
  const auto to_of = [&](int channel) { return channel % 2 == 0 ? link_of(channel).b : link_of(channel).a; };
  const auto down = [&](int channel) { return channel >= 0 && link_of(channel).down; };
  int first_down = -1;
  for (std::size_t i = 0; i < path.size() && first_down < 0; ++i) {
    if (down(path[i])) first_down = static_cast<int>(i);
  }
  if (first_down < 0) return path;
  // Through a leaf/spine fabric (NPU -> leaf -> spine -> leaf -> NPU) with
  // only the spine's links down: another spine both leaves reach, picked
  // by a hash of (src, dst) among those left (ECMP over the remaining planes).
  if (path.size() == 4 && !down(path[0]) && !down(path[3])) {
    const int leaf_src = from_of(path[1]);
    const int leaf_dst = to_of(path[2]);
    for (const FabricSpec& fabric : spec_.fabrics) {
      const auto n = static_cast<std::size_t>(leaf_src);
      const auto m = static_cast<std::size_t>(leaf_dst);
      if (n >= fabric.spines_of.size() || m >= fabric.spines_of.size()) continue;
      const std::vector<int>& spines = fabric.spines_of[n];
      if (std::find(spines.begin(), spines.end(), to_of(path[1])) == spines.end()) continue;
      std::vector<std::pair<int, int>> left;  // (up, down) through each spine still reachable
      for (const int spine : spines) {
        const std::vector<int>& other = fabric.spines_of[m];
        if (std::find(other.begin(), other.end(), spine) == other.end()) continue;
        const int up = finder_.channel(leaf_src, spine);
        const int across = finder_.channel(spine, leaf_dst);
        if (up >= 0 && across >= 0 && !down(up) && !down(across)) left.emplace_back(up, across);
      }
      if (left.empty()) break;
      const auto& [up, across] = left[RouteFinder::spine_pick(src, dst, left.size())];
      return {path[0], up, across, path[3]};
    }
  }
  const LinkSpec& broken = link_of(path[static_cast<std::size_t>(first_down)]);
  const bool nic = broken.kind == "roce" && (broken.a < spec_.npus || broken.b < spec_.npus);
  throw OperationFailed("npu" + std::to_string(src) + " cannot reach npu" + std::to_string(dst) + ": " + broken.kind +
                        " link " + node_name(broken.a, spec_.npus) + "<->" + node_name(broken.b, spec_.npus) +
                        " is down and no other path joins them (HCCL does not relay through another NPU, and no "
                        "spine of a fabric is left around it), so HCCL fails the operation" +
                        (nic ? std::string(" (a NIC down: HCCL's failover to the other die's NIC, A3 between "
                                           "supernodes with HCCL_OP_RETRY_ENABLE L2:1, is not modelled)")
                             : std::string()));
}

std::uint64_t Platform::activations() const {
  std::uint64_t total = 0;
  for (const auto& e : engines_) total += e->activations();
  for (const auto& c : local_memory_) total += c->activations();
  for (const auto& c : channels_) total += c->activations();
  for (const auto& c : aiv_ports_) total += c->activations();
  return total + network_->activations();
}

}  // namespace hcclsim
