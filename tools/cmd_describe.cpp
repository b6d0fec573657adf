// `hcclsim describe`: the SystemC module hierarchy a topology elaborates into
// (each NPU's stream engine and its units, the local memories, the links and
// switch ports by kind), read back from SystemC itself, so what it prints is
// what a run simulates.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <systemc>

#include "models/link/channel.h"
#include "models/link/flow_network.h"
#include "models/wake_clock.h"
#include "models/npu/task_engine.h"
#include "models/npu/units.h"
#include "sim/perf/perf.h"
#include "tools/cli_common.h"
#include "tools/command.h"
#include "topologies/platform.h"

namespace hcclsim {
namespace {

// The product a topology is built of, as its profile's npu.product says:
// "product A3: servers of 16 dies, 2 per chip (SIO between them), each die
// to the server's switch; SDMA domain: the supernode (48 servers); HCCL's
// 910_93 rules".
std::string product_summary(const ProductTraits& t) {
  std::string out = "product " + t.name + ": servers of " + std::to_string(t.devices_per_server) +
                    (t.dies_per_chip > 1 ? " dies, " + std::to_string(t.dies_per_chip) + " per chip (SIO between them)"
                                         : " NPUs");
  out += t.server_switch ? ", each to the server's switch" : ", a full mesh of HCCS links";
  out += t.supernode_sdma ? "; SDMA domain: the supernode (" + std::to_string(t.servers_per_supernode) + " servers)"
                          : "; SDMA domain: the server";
  return out + "; HCCL's " + t.hccl_device_type + " rules";
}

// A module's name with each run of digits as '#': "npu12.sdma" -> "npu#.sdma".
std::string pattern_of(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += name[i];
    }
  }
  return out;
}

std::string rate_text(Bandwidth b) { return format_fixed(b.gbps(), 2) + " GB/s"; }

// What one module is, in a line (its unit counts or its link's rate).
std::string detail_of(const sc_core::sc_object& o) {
  if (const auto* pool = dynamic_cast<const UnitPool*>(&o)) {
    const std::string leaf = o.basename();
    const std::string what = leaf == "sdma" ? "SDMA engines" : leaf == "aic" ? "AI Cube cores" : "AI Vector cores";
    return std::to_string(pool->pool.total()) + " " + what;
  }
  if (dynamic_cast<const NotifyUnit*>(&o) != nullptr) return "notify registers (as many as a workload uses)";
  if (dynamic_cast<const FlagMemory*>(&o) != nullptr) return "flag counters in memory (AIV kernels)";
  if (dynamic_cast<const RdmaQueuePairs*>(&o) != nullptr) return "RDMA queue pairs, one per peer used";
  if (dynamic_cast<const TaskEngine*>(&o) != nullptr) return "an NPU's stream engine: its streams, and the timing kernel that drives its units";
  if (dynamic_cast<const WakeClock*>(&o) != nullptr) return "steps every engine and channel at the times they ask for";
  if (dynamic_cast<const FlowNetwork*>(&o) != nullptr) return "flow model: max-min fair shares of the channels";
  if (const auto* ch = dynamic_cast<const Channel*>(&o)) {
    const ChannelParams& p = ch->params();
    // A link by its kind; an NPU's own channel (local memory, AIV port) by its label.
    std::string d = p.kind == LinkKind::Memory ? ch->label().substr(ch->label().find(' ') + 1) : std::string(link_kind_name(p.kind));
    d += ", " + rate_text(p.bandwidth) + " one way, latency " + format_us(p.latency) + " us";
    if (p.write_bandwidth.bytes_per_s != 0) d += ", writes at most " + rate_text(p.write_bandwidth);
    if (p.sdma_read_rate.bytes_per_s != 0) d += ", one SDMA read task at most " + rate_text(p.sdma_read_rate);
    if (p.sdma_write_rate.bytes_per_s != 0) d += ", one SDMA write task at most " + rate_text(p.sdma_write_rate);
    if (p.transport_rate.bytes_per_s != 0) d += ", one task of HCCL's transport at most " + rate_text(p.transport_rate);
    return d;
  }
  return "";
}

struct Group {
  std::string kind;
  std::string detail;
  std::string first, last;
  int count = 0;
};

class DescribeCommand : public Command {
 public:
  std::string name() const override { return "describe"; }
  std::string summary() const override {
    return "the SystemC module hierarchy a topology elaborates into: each NPU's stream engine and units (notify "
           "registers, flags, SDMA engines, AIC / AIV cores, RDMA queue pairs), local memories, links by kind";
  }
  void declare(CommandOptions& app) override {
    topology_.declare(app);
    app.add_option("--format", format_, "table (default) | json")->type_name("F");
    memory_limit_.declare(app);
  }
  int run(CommandContext& ctx) override {
    if (format_ != "table" && format_ != "json") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected table or json");
    }
    std::string described;
    const TopologySpec spec = topology_.load(&described);
    Footprint f;   // elaborating the platform alone: no tasks
    f.bytes = static_cast<std::uint64_t>(spec.npus) * kPlatformBytesPerNpu;
    const std::string why = footprint_problem(f, "the platform of " + described, memory_limit_.bytes());
    if (!why.empty()) throw InputError("option --servers", why.substr(0, why.find(". Use")) + ". Use fewer --servers");
    platform_kept_until_exit(spec);
    // Modules grouped by their name's pattern (npu#, npu#.sdma, hccs_npu#__npu#), in first-seen order.
    std::vector<std::string> order;
    std::map<std::string, Group> groups;
    std::vector<const sc_core::sc_object*> todo;
    for (const sc_core::sc_object* o : sc_core::sc_get_top_level_objects()) todo.push_back(o);
    for (std::size_t i = 0; i < todo.size(); ++i) {
      const sc_core::sc_object* o = todo[i];
      const std::string name = o->name();
      const std::string key = pattern_of(name);
      auto [it, added] = groups.emplace(key, Group{o->kind(), detail_of(*o), name, name, 0});
      if (added) order.push_back(key);
      it->second.last = name;
      ++it->second.count;
      for (const sc_core::sc_object* child : o->get_child_objects()) todo.push_back(child);
    }
    std::stable_sort(order.begin(), order.end());   // children after their parent's pattern
    if (format_ == "json") {
      nlohmann::json modules = nlohmann::json::array();
      for (const std::string& key : order) {
        const Group& g = groups[key];
        modules.push_back({{"pattern", key}, {"kind", g.kind}, {"count", g.count}, {"first", g.first}, {"last", g.last},
                           {"detail", g.detail}});
      }
      const ProductTraits& t = spec.npu.traits;
      const nlohmann::json product{{"name", t.name},
                                   {"hccl_device_type", t.hccl_device_type},
                                   {"devices_per_server", t.devices_per_server},
                                   {"dies_per_chip", t.dies_per_chip},
                                   {"server_interconnect", t.server_switch ? "switch" : "mesh"},
                                   {"sdma_domain", t.supernode_sdma ? "supernode" : "server"},
                                   {"servers_per_supernode", t.servers_per_supernode}};
      *ctx.out << nlohmann::json{{"topology", spec.name}, {"npus", spec.npus}, {"profile", spec.profile_file},
                                 {"product", product}, {"modules", modules}}
                      .dump(2)
               << "\n";
      return 0;
    }
    *ctx.out << "# " << described << ": " << spec.npus << " NPUs (" << spec.npu.model << "), profile "
             << spec.profile_file << "; SystemC modules by name pattern (# = a number)\n";
    *ctx.out << "# " << product_summary(spec.npu.traits) << "\n";
    char line[512];
    for (const std::string& key : order) {
      const Group& g = groups[key];
      const std::size_t depth = static_cast<std::size_t>(std::count(key.begin(), key.end(), '.'));
      const std::string names = g.count == 1 ? g.first : g.first + " .. " + g.last;
      std::snprintf(line, sizeof line, "%*s%-44s %6d x %-24s %s\n", static_cast<int>(2 * depth), "", names.c_str(), g.count,
                    g.kind.c_str(), g.detail.c_str());
      *ctx.out << line;
    }
    return 0;
  }

 private:
  TopologyOptions topology_;
  std::string format_ = "table";
  MemoryLimit memory_limit_;
};

}  // namespace

std::unique_ptr<Command> make_describe_command() { return std::make_unique<DescribeCommand>(); }

}  // namespace hcclsim
