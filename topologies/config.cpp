#include "topologies/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "base/json_reader.h"
#include "topologies/cluster.h"

namespace hcclsim {

namespace {

ChannelParams read_channel(ObjectReader r) {
  ChannelParams c;
  c.bandwidth = r.required_bandwidth("bandwidth");
  c.latency = r.required_time("latency");
  c.segment_bytes = r.required_size("segment");
  if (c.segment_bytes == 0) r.location_of("segment").fail("a segment must hold at least one byte");
  if (r.has("write_bandwidth")) c.write_bandwidth = r.required_bandwidth("write_bandwidth");
  if (r.has("sdma_write_extra")) c.sdma_write_extra = r.required_time("sdma_write_extra");
  if (r.has("sdma_read_extra")) c.sdma_read_extra = r.required_time("sdma_read_extra");
  if (r.has("sdma_write_rate")) c.sdma_write_rate = r.required_bandwidth("sdma_write_rate");
  if (r.has("sdma_read_rate")) c.sdma_read_rate = r.required_bandwidth("sdma_read_rate");
  if (r.has("transport_rate")) c.transport_rate = r.required_bandwidth("transport_rate");
  r.finish();
  return c;
}

// The "cluster" object of a topology file, as a layout for make_cluster, on
// `product` (its profile's): a product with supernodes counts "supernodes"
// and "servers_per_supernode", one without counts "servers". The caller has
// checked that "kind" is the product's.
ClusterLayout read_cluster(ObjectReader c, const std::string& name, int servers_override, const ProductTraits& product) {
  ClusterLayout layout;
  layout.name = name;
  layout.kind = c.required_string("kind");
  const bool supernodes_counted = product.has_supernodes();
  constexpr std::int64_t kMaxServers = 1 << 16;
  int servers = 0;
  int supernodes = 1;
  int per_supernode = 1;
  if (!supernodes_counted) {
    for (const char* key : {"supernodes", "servers_per_supernode", "ub"}) {
      if (c.has(key)) {
        c.location_of(key).fail("an \"" + layout.kind + "\" cluster has no supernodes and UB switches (its product's "
                                "npu.product.servers_per_supernode is 1)");
      }
    }
    servers = static_cast<int>(c.required_int_in("servers", 1, kMaxServers));
  } else {
    if (c.has("servers")) {
      c.location_of("servers").fail("an \"" + layout.kind + "\" cluster counts \"supernodes\" and \"servers_per_supernode\"");
    }
    supernodes = static_cast<int>(c.required_int_in("supernodes", 1, 4096));
    per_supernode = static_cast<int>(c.int_in_or("servers_per_supernode", 1, 4096, product.servers_per_supernode));
    if (c.has("ub")) {
      ObjectReader ub = c.required_object("ub");
      layout.ub.l2_switches = static_cast<int>(ub.int_in_or("l2_switches", 1, 4096, layout.ub.l2_switches));
      ub.finish();
    }
  }
  if (c.has("roce")) {
    ObjectReader roce = c.required_object("roce");
    RoceFabricOptions& r = layout.roce;
    r.npus_per_leaf = static_cast<int>(roce.int_in_or("npus_per_leaf", 1, 1 << 20, r.npus_per_leaf));
    r.spines = static_cast<int>(roce.int_in_or("spines", 1, 4096, r.spines));
    if (const nlohmann::json* v = roce.optional_value("oversubscription")) {
      if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 1.0 ||
          v->get<double>() > 1e6) {
        roce.location_of("oversubscription")
            .fail("expected a number in [1, 1e6] (1 = non-blocking, 2 = uplinks carry half of what the NICs can "
                  "send)");
      }
      r.oversubscription = v->get<double>();
    }
    roce.finish();
  }
  c.finish();

  if (servers_override != -1) {
    const std::string where = "option --servers";
    if (servers_override < 1) throw InputError(where, "expected at least one server");
    if (!supernodes_counted) {
      if (servers_override > kMaxServers) throw InputError(where, "at most " + std::to_string(kMaxServers) + " servers");
      servers = servers_override;
    } else if (servers_override <= per_supernode) {
      supernodes = 1;
      per_supernode = servers_override;
    } else if (servers_override % per_supernode == 0 && servers_override / per_supernode <= 4096) {
      supernodes = servers_override / per_supernode;
    } else {
      throw InputError(where, std::to_string(servers_override) + " servers do not fill whole supernodes of " +
                                  std::to_string(per_supernode) + " servers (or one supernode of at most " +
                                  std::to_string(per_supernode) + ")");
    }
  }
  if (!supernodes_counted) per_supernode = servers;
  layout.servers = product_cluster_layout(product, supernodes, per_supernode).servers;
  return layout;
}

// Whether a profile's "source" text marks its constant as assumed: it
// starts with "assumed" (any case, after blanks), as the shipped profiles
// write it ("assumed: ...", "assumed per hop ...", "assumed, as the A2
// profile"). A source that names a measurement or another model does not.
bool says_assumed(const std::string& source) {
  const std::size_t first = source.find_first_not_of(" \t");
  if (first == std::string::npos) return false;
  static const std::string word = "assumed";
  if (source.size() - first < word.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(source[first + i])) != word[i]) return false;
  }
  return true;
}

// The assumed constants under `node` (the profile's "npu" or "links"
// object, already read and checked), as dotted paths below `prefix`.
void collect_assumed(const nlohmann::json& node, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [key, value] : node.items()) {
    const std::string path = prefix + "." + key;
    if (value.is_object() && value.contains("source")) {
      if (says_assumed(value["source"].get<std::string>())) out.push_back(path);
    } else if (value.is_object()) {
      collect_assumed(value, path, out);
    } else if (std::find(kAssumedWhenPlain.begin(), kAssumedWhenPlain.end(), path) != kAssumedWhenPlain.end()) {
      out.push_back(path);
    }
  }
}

// A calibration record's list of strings (non-empty, of non-empty strings).
std::vector<std::string> string_list(ObjectReader& c, const std::string& key, bool required) {
  std::vector<std::string> list;
  const nlohmann::json* v = required ? &c.required_array(key) : c.optional_value(key);
  if (v == nullptr) return list;
  const JsonLocation where = c.location_of(key);
  if (!v->is_array() || v->empty()) where.fail("expected a non-empty array of strings");
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string() || (*v)[i].get<std::string>().empty()) where.index(i).fail("expected a non-empty string");
    list.push_back((*v)[i].get<std::string>());
  }
  return list;
}

// The profile's "calibration" object: what `hcclsim calibrate` fitted
// together, to which files and rows. Each "fit" path must name a constant of
// this profile that states its bounds; so must every later stage's.
ProfileCalibration read_calibration(const nlohmann::json& doc, ObjectReader c) {
  ProfileCalibration out;
  auto check_fit = [&doc](const std::vector<std::string>& fit, const JsonLocation& where) {
    for (std::size_t i = 0; i < fit.size(); ++i) {
      const nlohmann::json* constant = json_at_path(doc, fit[i]);
      if (constant == nullptr || !constant->is_object() || !constant->contains("bounds")) {
        where.index(i).fail("'" + printable(fit[i]) +
                            "' is not a constant of this profile with \"bounds\" (a fitted constant "
                            "states them: {\"value\", \"bounds\": [low, high], \"source\"})");
      }
    }
  };
  out.fit = string_list(c, "fit", true);
  out.measurements = string_list(c, "measurements", true);
  out.only = string_list(c, "only", false);
  check_fit(out.fit, c.location_of("fit"));
  if (const nlohmann::json* then = c.optional_value("then")) {
    const JsonLocation where = c.location_of("then");
    if (!then->is_array() || then->empty()) where.fail("expected a non-empty array of stages {\"fit\", \"only\"}");
    for (std::size_t k = 0; k < then->size(); ++k) {
      const JsonLocation at = where.index(k);
      if (!(*then)[k].is_object()) at.fail("expected a stage {\"fit\": [...], \"only\": [...]}");
      ObjectReader stage((*then)[k], at);
      CalibrationStage s;
      s.fit = string_list(stage, "fit", true);
      s.only = string_list(stage, "only", false);
      check_fit(s.fit, stage.location_of("fit"));
      stage.finish();
      out.then.push_back(std::move(s));
    }
  }
  c.finish();
  return out;
}

}  // namespace

const std::vector<std::string> kAssumedWhenPlain{"npu.sdma.engines", "npu.local_memory.latency"};

HcclApiLimits hccl_api_defaults(HcclRules rules) {
  HcclApiLimits api;
  if (rules == HcclRules::A3) {
    api.inter_group_sync = api.iterate = api.alltoallv = true;
    api.alltoall_max_ranks = 128;
    api.expanding_engine = "AICPU";
    api.small_count_all_reduce_hd = true;
    api.alltoall_fullmesh_across_servers = true;
  }
  return api;
}


namespace {

// npu.product: what the product is made of (models/params.h ProductTraits).
ProductTraits read_product(ObjectReader r) {
  ProductTraits t;
  r.optional_string("source");
  t.name = printable(r.required_string("name"));
  if (t.name.empty() || t.name.find_first_of(" /\\") != std::string::npos) {
    r.location_of("name").fail("expected the product's name, e.g. \"A3\" (no spaces or slashes: a topology's cluster "
                               "kind is it in lower case)");
  }
  // The HCCL device type whose rules the product follows; the two shipped
  // products may leave it out (A2: 910B, A3: 910_93).
  if (r.has("hccl_device_type")) {
    t.hccl_device_type = r.required_choice("hccl_device_type", {"910B", "910_93"});
  } else if (t.name == "A2" || t.name == "A3") {
    t.hccl_device_type = t.name == "A2" ? "910B" : "910_93";
  } else {
    r.location_of("name").fail("product '" + t.name + "' needs \"hccl_device_type\": \"910B\" or \"910_93\", the HCCL "
                               "device type whose executor selection it follows (the rule sets hcclsim has)");
  }
  t.devices_per_server = static_cast<int>(r.required_int_in("devices_per_server", 1, 1024));
  t.dies_per_chip = static_cast<int>(r.required_int_in("dies_per_chip", 1, 2));
  if (t.devices_per_server % t.dies_per_chip != 0) {
    r.location_of("devices_per_server").fail("expected whole chips: a multiple of dies_per_chip");
  }
  t.server_switch = r.required_choice("server_interconnect", {"mesh", "switch"}) == "switch";
  t.supernode_sdma = r.required_choice("sdma_domain", {"server", "supernode"}) == "supernode";
  t.servers_per_supernode = static_cast<int>(r.required_int_in("servers_per_supernode", 1, 4096));
  if (t.supernode_sdma != t.has_supernodes()) {
    r.location_of("sdma_domain").fail("a product with supernodes (servers_per_supernode above 1) has one SDMA domain "
                                      "per supernode, one without has one per server");
  }
  const nlohmann::json& versions = r.required_array("rank_table_versions");
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const JsonLocation at = r.location_of("rank_table_versions").index(i);
    if (!versions[i].is_string() || (versions[i] != "1.0" && versions[i] != "1.2")) {
      at.fail("expected \"1.0\" or \"1.2\" (the rank table versions hcclsim reads)");
    }
    t.rank_table_versions.push_back(versions[i].get<std::string>());
  }
  if (t.rank_table_versions.empty()) r.location_of("rank_table_versions").fail("expected at least one version");
  t.rank_table_doc = printable(r.required_string("rank_table_doc"));
  r.finish();
  return t;
}

}  // namespace

HardwareProfile load_profile(const std::string& file) { return read_profile(load_json_file(file), file); }

HardwareProfile read_profile(const nlohmann::json& doc, const std::string& file) {
  ObjectReader root(doc, JsonLocation{file});
  HardwareProfile profile;
  profile.file = file;
  profile.name = printable(root.required_string("name"));  // names are printed: no control characters
  root.optional_string("description");
  if (root.has("calibration")) profile.calibration = read_calibration(doc, root.required_object("calibration"));
  {
    ObjectReader npu = root.required_object("npu");
    NpuParams& p = profile.npu;
    p.model = printable(npu.required_string("model"));   // the chip's name, as reports print it ("910B")
    if (p.model.empty()) npu.location_of("model").fail("expected the NPU's name, e.g. \"910B\"");
    p.traits = read_product(npu.required_object("product"));
    p.hccl_rules = p.traits.hccl_device_type == "910B" ? HcclRules::A2 : HcclRules::A3;
    {
      // HCCL's API limits: the product's documented ones (docs/sources.md §2)
      // unless the profile states them (npu.hccl_api).
      HcclApiLimits& api = p.hccl_api;
      api = hccl_api_defaults(p.hccl_rules);
      if (npu.has("hccl_api")) {
        ObjectReader h = npu.required_object("hccl_api");
        h.optional_string("source");
        api.threads_per_comm = static_cast<int>(h.int_in_or("threads_per_comm", 1, 1024, api.threads_per_comm));
        api.notifies_per_comm = static_cast<int>(h.int_in_or("notifies_per_comm", 1, 4096, api.notifies_per_comm));
        api.messages_per_domain = static_cast<int>(h.int_in_or("messages_per_domain", 1, 4096, api.messages_per_domain));
        api.inter_group_sync = h.bool_or("inter_group_sync", api.inter_group_sync);
        api.iterate = h.bool_or("iterate", api.iterate);
        api.alltoallv = h.bool_or("alltoallv", api.alltoallv);
        api.alltoall_max_ranks = static_cast<int>(h.int_in_or("alltoall_max_ranks", 0, 1 << 20, api.alltoall_max_ranks));
        if (h.has("expanding_engine")) api.expanding_engine = h.required_choice("expanding_engine", {"HOST", "AICPU"});
        if (h.has("small_count_all_reduce")) {
          api.small_count_all_reduce_hd = h.required_choice("small_count_all_reduce", {"reduce_bcast", "hd_optim"}) == "hd_optim";
        }
        api.alltoall_fullmesh_across_servers = h.bool_or("alltoall_fullmesh_across_servers", api.alltoall_fullmesh_across_servers);
        h.finish();
      }
      // HCCL's selection thresholds: every key but "source" is a size the
      // product's selection rules ask for by name (docs/executors.md).
      const nlohmann::json& raw = npu.required_value("hccl_selection");
      ObjectReader sizes = npu.required_object("hccl_selection");
      sizes.optional_string("source");
      for (const auto& item : raw.items()) {
        if (item.key() != "source") api.selection_sizes[item.key()] = sizes.required_size(item.key());
      }
      sizes.finish();
      // The rank counts the same rules compare a communicator's size with.
      if (npu.has("hccl_selection_ranks")) {
        const nlohmann::json& raw_ranks = npu.required_value("hccl_selection_ranks");
        ObjectReader counts = npu.required_object("hccl_selection_ranks");
        counts.optional_string("source");
        for (const auto& item : raw_ranks.items()) {
          if (item.key() != "source") api.selection_ranks[item.key()] = static_cast<int>(counts.required_int_in(item.key(), 1, 1 << 20));
        }
        counts.finish();
      }
      api.selection_file = file;
    }
    {
      ObjectReader cores = npu.required_object("cores");
      p.cores.aic = static_cast<int>(cores.required_int_in("aic", 0, 1024));
      p.cores.aiv = static_cast<int>(cores.required_int_in("aiv", 0, 1024));
      p.cores.aic_flops_per_s = cores.required_flops("aic_fp16_rate");
      p.cores.aic_attention_flops_per_s =
          cores.has("aic_attention_rate") ? cores.required_flops("aic_attention_rate") : p.cores.aic_flops_per_s;
      if (cores.has("aic_gemm_block_fixed")) p.cores.aic_gemm_block_fixed = cores.required_time("aic_gemm_block_fixed");
      if (cores.has("aic_attention_block_fixed")) {
        p.cores.aic_attention_block_fixed = cores.required_time("aic_attention_block_fixed");
      }
      p.cores.aiv_bandwidth = cores.required_bandwidth("aiv_bandwidth");
      cores.finish();
    }
    if (npu.has("memory")) {
      ObjectReader memory = npu.required_object("memory");
      p.memory.hbm_bandwidth = memory.bandwidth_or("hbm_bandwidth", Bandwidth{});
      p.memory.hbm_capacity = memory.size_or("hbm_capacity", 0);
      memory.finish();
    }
    {
      ObjectReader sdma = npu.required_object("sdma");
      p.sdma.engines = static_cast<int>(sdma.required_int_in("engines", 1, 1024));
      p.sdma.task_fixed = sdma.required_time("task_fixed");
      p.sdma.read_fixed = sdma.required_time("read_fixed");
      p.sdma.copy_bandwidth = sdma.required_bandwidth("copy_bandwidth");
      p.sdma.reduce_bandwidth = sdma.required_bandwidth("reduce_bandwidth");
      sdma.finish();
    }
    {
      ObjectReader notify = npu.required_object("notify");
      p.notify.record_local = notify.required_time("record_local");
      p.notify.record_remote = notify.required_time("record_remote");
      p.notify.wait = notify.required_time("wait");
      notify.finish();
    }
    {
      ObjectReader stream = npu.required_object("stream");
      p.stream.task_dispatch = stream.required_time("task_dispatch");
      p.stream.op_launch = stream.required_time("op_launch");
      p.stream.host_sync = stream.required_time("host_sync");
      stream.finish();
    }
    {
      ObjectReader one_sided = npu.required_object("one_sided");
      p.one_sided.direct_issue = one_sided.required_time("direct_issue");
      p.one_sided.sdma_issue = one_sided.required_time("sdma_issue");
      p.one_sided.rdma_issue = one_sided.required_time("rdma_issue");
      p.one_sided.rdma_doorbell = one_sided.required_time("rdma_doorbell");
      one_sided.finish();
    }
    {
      ObjectReader rdma = npu.required_object("rdma");
      p.rdma.post = rdma.required_time("post");
      p.rdma.notify_bytes = rdma.required_size("notify_write");
      rdma.finish();
    }
    {
      ObjectReader aiv = npu.required_object("aiv");
      p.aiv.core_bandwidth = aiv.required_bandwidth("core_bandwidth");
      if (p.aiv.core_bandwidth.bytes_per_s == 0) aiv.location_of("core_bandwidth").fail("expected a rate above zero");
      p.aiv.copy_fixed = aiv.required_time("copy_fixed");
      p.aiv.flag_write = aiv.required_time("flag_write");
      p.aiv.flag_poll = aiv.required_time("flag_poll");
      if (aiv.has("remote_bandwidth")) {
        p.aiv.remote_bandwidth = aiv.required_bandwidth("remote_bandwidth");
        if (p.aiv.remote_bandwidth.bytes_per_s == 0) aiv.location_of("remote_bandwidth").fail("expected a rate above zero (leave it out for no limit)");
      }
      aiv.finish();
    }
    p.local_memory = read_channel(npu.required_object("local_memory"));
    p.hccl_buffer_bytes = npu.required_size("hccl_buffer");
    if (p.hccl_buffer_bytes == 0) npu.location_of("hccl_buffer").fail("the HCCL buffer cannot be empty");
    if (npu.has("moe")) {
      ObjectReader moe = npu.required_object("moe");
      moe.required_string("source");
      p.moe_layered_kernels = moe.bool_or("layered_kernels_across_servers", false);
      moe.finish();
    }
    npu.finish();
  }
  {
    ObjectReader links = root.required_object("links");
    for (const std::string& kind : link_kind_names()) {
      if (links.has(kind)) profile.links[kind] = read_channel(links.required_object(kind));
    }
    links.finish();
  }
  root.finish();
  collect_assumed(doc["npu"], "npu", profile.assumed);
  collect_assumed(doc["links"], "links", profile.assumed);
  std::sort(profile.assumed.begin(), profile.assumed.end());
  return profile;
}

std::string topology_profile_file(const std::string& topology_file) {
  const nlohmann::json doc = load_json_file(topology_file);
  ObjectReader root(doc, JsonLocation{topology_file});
  const std::string profile_ref = root.required_string("profile");
  return (std::filesystem::path(topology_file).parent_path() / profile_ref).lexically_normal().string();
}

TopologySpec load_topology(const std::string& file, const std::optional<std::string>& profile_override,
                           int servers_override) {
  const std::string profile_file = profile_override ? *profile_override : topology_profile_file(file);
  return load_topology_with(file, load_profile(profile_file), servers_override,
                       profile_override ? std::optional<std::string>("option --profile") : std::nullopt);
}

TopologySpec load_topology_with(const std::string& file, const HardwareProfile& profile, int servers_override,
                           const std::optional<std::string>& blame) {
  const nlohmann::json doc = load_json_file(file);
  ObjectReader root(doc, JsonLocation{file});
  TopologySpec spec;
  spec.name = printable(root.required_string("name"));  // names are printed: no control characters
  root.optional_string("description");
  root.required_string("profile");
  const std::string& profile_file = profile.file;
  if (root.has("cluster")) {
    // A cluster is built of its kind's product: another product's profile
    // would build hardware that does not exist (and run its algorithms).
    const ProductTraits& product = profile.npu.traits;
    // (Its product's name in lower case, npu.product.name.)
    const std::string kind = printable(root.required_object("cluster").required_string("kind"));
    if (kind != product.cluster_kind()) {
      // Blamed on the profile when --profile gave it, else on the topology's kind.
      std::string upper = kind;   // the product a cluster of this kind is built of
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      const std::string why = "topology " + file + " is an " + upper + " cluster (kind '" + kind + "'), but profile " +
                              profile_file + " describes a " + profile.npu.model + " NPU of product " + product.name +
                              "; use a profile whose npu.product.name is " + upper + " (configs/profiles/)";
      if (blame) throw InputError(*blame, why);
      root.required_object("cluster").location_of("kind").fail(why);
    }
    const ClusterLayout layout = read_cluster(root.required_object("cluster"), spec.name, servers_override, product);
    root.finish();
    try {
      return make_cluster(layout, profile);
    } catch (const std::invalid_argument& e) {
      root.location_of("cluster").fail(e.what());
    }
  }
  if (servers_override != -1) {
    throw InputError("option --servers", "topology " + file +
                                             " lists its NPUs and links; only a topology with a \"cluster\" object "
                                             "can change its number of servers");
  }
  spec.npu = profile.npu;
  spec.assumed_constants = profile.assumed;
  spec.profile_file = profile.file;
  spec.npus = static_cast<int>(root.required_int_in("npus", 1, 1 << 20));
  spec.npus_per_server = static_cast<int>(root.int_in_or("npus_per_server", 1, 1 << 20, spec.npus));
  if (spec.npus_per_server > spec.npus) {
    root.location_of("npus_per_server")
        .fail("npus_per_server " + std::to_string(spec.npus_per_server) + " is more than the topology's " +
              std::to_string(spec.npus) + " NPUs");
  }
  spec.npus_per_chip = static_cast<int>(root.int_in_or("npus_per_chip", 1, 2, 1));
  // Several dies per chip (SIO between them) are the product's (npu.product.dies_per_chip).
  if (spec.npus_per_chip > 1 && spec.npus_per_chip != spec.npu.traits.dies_per_chip) {
    throw InputError(blame.value_or(file),
                     "topology " + file + " has " + std::to_string(spec.npus_per_chip) + " NPUs (dies) per chip, but profile " +
                         profile_file + " describes a " + spec.npu.model + " NPU (product " + spec.npu.traits.name +
                         ") of " + std::to_string(spec.npu.traits.dies_per_chip) + " per chip");
  }
  spec.switches = static_cast<int>(root.int_in_or("switches", 0, 1 << 20, 0));
  const int nodes = spec.npus + spec.switches;

  const nlohmann::json& links = root.required_array("links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    const JsonLocation loc = root.location_of("links").index(i);
    ObjectReader link(links[i], loc);
    const std::string kind = link.required_choice("kind", link_kind_names());
    const auto params = profile.links.find(kind);
    if (params == profile.links.end()) {
      link.location_of("kind").fail("link kind '" + kind + "' is not described in profile " + profile_file);
    }
    auto read_nodes = [&](const std::string& key) {
      std::vector<int> out;
      const nlohmann::json& arr = link.required_array(key);
      for (std::size_t k = 0; k < arr.size(); ++k) {
        const JsonLocation nloc = link.location_of(key).index(k);
        if (!arr[k].is_number_integer() || arr[k].get<std::int64_t>() < 0 || arr[k].get<std::int64_t>() >= nodes) {
          nloc.fail("expected a node index in [0, " + std::to_string(nodes - 1) + "]");
        }
        out.push_back(arr[k].get<int>());
      }
      return out;
    };
    std::vector<std::pair<int, int>> pairs;
    if (link.has("between")) {
      const std::vector<int> ends = read_nodes("between");
      if (ends.size() != 2 || ends[0] == ends[1]) {
        link.location_of("between").fail("expected two different node indices");
      }
      pairs.push_back({ends[0], ends[1]});
    } else if (link.has("full_mesh")) {
      const std::vector<int> members = read_nodes("full_mesh");
      for (std::size_t a = 0; a < members.size(); ++a) {
        for (std::size_t b = a + 1; b < members.size(); ++b) pairs.push_back({members[a], members[b]});
      }
    } else {
      loc.fail("a link needs \"between\": [a, b] or \"full_mesh\": [nodes...]");
    }
    link.finish();
    for (const auto& [a, b] : pairs) spec.links.push_back(LinkSpec{a, b, kind, params->second});
  }
  std::set<std::pair<int, int>> seen;
  for (const LinkSpec& l : spec.links) {
    if (!seen.insert({std::min(l.a, l.b), std::max(l.a, l.b)}).second) {
      root.location_of("links").fail("nodes " + std::to_string(l.a) + " and " + std::to_string(l.b) +
                                     " are linked twice");
    }
  }
  root.finish();
  return spec;
}

}  // namespace hcclsim
