// Import of HCCL rank tables (formats and sources in rank_table.h).
//
// Rules and where they come from. "docs" is hicann/hccl
// docs/{zh,en}/user_guide/cluster_info_config/rank_table_config_{a2,a3}.md;
// "parser" is HCCL's reader of versions 1.0 and 1.2, hcomm
// src/framework/common/src/topo/topoinfo_ranktableConcise.cc, with the base
// class topoinfo_ranktableParser.cc and the checks of src/framework/common/src/config.cc.
//   - every value is a JSON string, numbers included ("rank_id": "0"); the
//     parser refuses other JSON types ("property value ... is not string") and
//     converts numbers as base-10 unsigned integers;
//   - status: "completed" or "initializing" (docs); the parser polls the file
//     until it reads "completed" and gives up after 30 minutes;
//   - version: "1.0" and "1.2" go to the same parser ("1.1" is the
//     heterogeneous format, no version the older 910 one). The A2 doc says
//     "1.0"; the A3 doc uses "1.2" for superpod mode and "1.0" for typical
//     (AI-server) networking;
//   - server_count: mandatory in 1.0, optional in 1.2 (docs); when present it
//     must equal the size of server_list (parser: "serverList size neq server num");
//   - server_id: non-empty, at most 64 characters, globally unique (docs, parser);
//   - device: a non-empty list (parser); device_id in [0, devices of the
//     server - 1] (docs), unique inside its server (config.cc CheckDeviceId);
//   - rank_id: globally unique, in [0, number of devices - 1] (docs), so the
//     ids are 0..N-1 without gaps (config.cc CheckRankListInfo after sorting);
//     "cross-server rank_id interleaving is not supported": server 1 {0,1,2,3}
//     and server 2 {4,5,6,7} is right, {0,1,2,7} and {3,4,5,6} is wrong (docs,
//     rank_id row) -- each server's ids form one contiguous block;
//   - device_ip: IPv4 or IPv6, globally unique (docs; the parser also splits
//     a comma-separated list); mandatory with several servers (A2 and A3 AI-
//     server mode) or several superpods (A3 superpod mode) (docs);
//   - device_port, host_port, backup_device_port: in [1, 65535] (docs; the
//     parser refuses 0 as reserved); host_port unique inside a server (docs);
//   - 1.2 only: super_device_id per device, backup_device_ip and
//     backup_device_port (docs). super_pod_list is optional ("if not
//     configured, AI server mode is used", docs); when present: non-empty,
//     super_pod_id non-empty and unique, each listed server_id in server_list
//     (parser GetSingleSuperPodSever), every server in a superpod and every
//     device with a super_device_id unique inside its superpod (parser
//     CheckSuperPodInfo), and the servers of one superpod listed together in
//     server_list (docs, note after the 1.2 table).
#include "topologies/rank_table.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/json_reader.h"

namespace hcclsim {
namespace {

using json = nlohmann::json;

// HCCL keeps rank ids, device ids and super device ids in 32-bit unsigned
// integers; 0xFFFFFFFF marks an unset super_device_id.
constexpr std::int64_t kMaxU32 = 0xFFFFFFFFLL;
constexpr std::size_t kMaxServerIdLength = 64;
constexpr std::int64_t kMaxPort = 65535;

struct Device {
  JsonLocation where;  // the device object
  int device_id = 0;
  std::int64_t rank_id = 0;
  std::optional<std::int64_t> super_device_id;
  bool has_device_ip = false;
};

struct Server {
  JsonLocation where;  // the server object
  std::string id;
  std::vector<Device> devices;
  int pod = -1;  // index into super_pod_list; -1: none
};

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

// A number written as a JSON string of decimal digits, such as "0" or "16".
std::int64_t decimal(const std::string& text, const JsonLocation& loc, std::int64_t max) {
  if (text.empty()) loc.fail("empty string; expected a decimal number such as \"0\"");
  std::int64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      loc.fail(in_quotes(text) + " is not a decimal number; expected digits only, such as \"0\"");
    }
    value = value * 10 + (c - '0');
    if (value > max) loc.fail(in_quotes(text) + " is too large (at most " + std::to_string(max) + ")");
  }
  return value;
}

std::int64_t required_decimal(ObjectReader& r, const std::string& key, std::int64_t max) {
  return decimal(r.required_string(key), r.location_of(key), max);
}

std::optional<std::int64_t> optional_decimal(ObjectReader& r, const std::string& key, std::int64_t max) {
  const std::optional<std::string> text = r.optional_string(key);
  if (!text) return std::nullopt;
  return decimal(*text, r.location_of(key), max);
}

std::optional<std::int64_t> optional_port(ObjectReader& r, const std::string& key) {
  const std::optional<std::int64_t> port = optional_decimal(r, key, kMaxPort);
  if (port && *port == 0) r.location_of(key).fail("port 0 is reserved; expected a port in [1, 65535]");
  return port;
}

bool is_ip_address(const std::string& s) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, s.c_str(), buffer) == 1 || inet_pton(AF_INET6, s.c_str(), buffer) == 1;
}

// One address, or several separated by commas (HCCL splits device_ip and
// backup_device_ip on ','). Each must be IPv4 or IPv6.
std::vector<std::string> ip_addresses(const std::string& text, const JsonLocation& loc, bool list_allowed) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list_allowed ? text.find(',', start) : std::string::npos;
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const std::string& ip : out) {
    if (!is_ip_address(ip)) {
      loc.fail(in_quotes(ip) + " is not an IPv4 or IPv6 address");
    }
  }
  return out;
}

// Keys that only version 1.2 documents. Looked up in the JSON value, not
// through the reader, so that the reader's list of expected keys (shown for
// unknown keys) stays that of version 1.0.
void refuse_superpod_key(const json& value, const ObjectReader& r, const std::string& key) {
  if (value.contains(key)) {
    r.location_of(key).fail("'" + key + "' belongs to version 1.2 (A3 superpod mode) rank tables; this table is version 1.0");
  }
}

std::string read_version(ObjectReader& top, const ProductTraits& product) {
  const JsonLocation loc = top.location_of("version");
  std::string expected = "expected";
  for (std::size_t i = 0; i < product.rank_table_versions.size(); ++i) {
    expected += (i == 0 ? " " : " or ") + in_quotes(product.rank_table_versions[i]);
  }
  if (!top.has("version")) {
    loc.fail("missing required key 'version'; " + expected +
             " (a table without a version is the older Atlas 910 format, which is not read here)");
  }
  const std::string version = top.required_string("version");
  if (version == "1.1") {
    loc.fail("version \"1.1\" is HCCL's heterogeneous cluster format, which is not read here; " + expected);
  }
  if (version != "1.0" && version != "1.2") {
    loc.fail("version " + in_quotes(version) + " is not supported; " + expected);
  }
  // HCCL hands 1.2 to the same parser on any device and, outside superpod
  // mode, ignores the superpod fields; the A2 doc only describes 1.0.
  const auto& allowed = product.rank_table_versions;
  if (std::find(allowed.begin(), allowed.end(), version) == allowed.end()) {
    loc.fail("version " + in_quotes(version) + (version == "1.2" ? " is the Atlas A3 superpod format" : "") +
             "; an Atlas " + product.name + " rank table has version " + expected.substr(9) + " (" + product.rank_table_doc + ")");
  }
  return version;
}

class Importer {
 public:
  Importer(const std::string& file, const ProductTraits& product) : file_(file), product_(product) {}

  RankTable run(const json& doc) {
    const JsonLocation root{file_};
    ObjectReader top(doc, root);
    table_.version = read_version(top, product_);
    superpod_format_ = table_.version == "1.2";

    const std::string status = top.required_choice("status", {"completed", "initializing"});
    if (status != "completed") {
      top.location_of("status").fail(
          "status is \"initializing\": the rank table is not ready; HCCL waits for \"completed\" "
          "(polling the file for up to 30 minutes) and then fails");
    }

    std::optional<std::int64_t> server_count;
    if (superpod_format_) {
      server_count = optional_decimal(top, "server_count", kMaxU32);
    } else {
      if (!top.has("server_count")) {
        top.location_of("server_count")
            .fail("missing required key 'server_count'; version 1.0 tables give the number of servers "
                  "(rank_table_config_a2.md, rank_table_config_a3.md)");
      }
      server_count = required_decimal(top, "server_count", kMaxU32);
    }
    const json& server_list = top.required_array("server_list");
    const json* pods = nullptr;
    if (superpod_format_) {
      pods = top.optional_value("super_pod_list");
    } else {
      refuse_superpod_key(doc, top, "super_pod_list");
    }
    top.finish();

    const JsonLocation list_loc = root.key("server_list");
    if (server_list.empty()) list_loc.fail("server_list is empty; a rank table lists at least one server");
    if (server_count && static_cast<std::size_t>(*server_count) != server_list.size()) {
      root.key("server_count")
          .fail("server_count is " + std::to_string(*server_count) + " but server_list has " +
                std::to_string(server_list.size()) + " servers; HCCL requires them to match");
    }
    for (std::size_t i = 0; i < server_list.size(); ++i) read_server(server_list[i], list_loc.index(i));

    if (pods != nullptr) {
      read_superpods(*pods, root.key("super_pod_list"));
    }
    build_superpods();
    check_device_ips();
    if (product_.dies_per_chip > 1) check_whole_chips();
    check_rank_ids();
    build_layout();
    return std::move(table_);
  }

 private:
  int max_devices() const { return product_.devices_per_server; }

  void read_server(const json& value, const JsonLocation& loc) {
    ObjectReader r(value, loc);
    Server server;
    server.where = loc;
    server.id = r.required_string("server_id");
    const JsonLocation id_loc = r.location_of("server_id");
    if (server.id.empty()) id_loc.fail("server_id is empty");
    if (server.id.size() > kMaxServerIdLength) {
      id_loc.fail("server_id is " + std::to_string(server.id.size()) + " characters long; at most " +
                  std::to_string(kMaxServerIdLength) + " are allowed");
    }
    const auto [known, inserted] = server_index_.emplace(server.id, servers_.size());
    if (!inserted) {
      id_loc.fail("server_id " + in_quotes(server.id) + " is also used by " + servers_[known->second].where.path +
                  "; server ids must be globally unique");
    }
    if (const std::optional<std::string> host_ip = r.optional_string("host_ip")) {
      ip_addresses(*host_ip, r.location_of("host_ip"), false);
    }
    const json& devices = r.required_array("device");
    r.finish();

    const JsonLocation devices_loc = r.location_of("device");
    if (devices.empty()) devices_loc.fail("the device list is empty; a server has at least one device");
    std::map<int, std::string> device_id_at;        // device_id -> path
    std::map<std::int64_t, std::string> host_port_at;  // host_port -> path
    for (std::size_t j = 0; j < devices.size(); ++j) {
      server.devices.push_back(read_device(devices[j], devices_loc.index(j), device_id_at, host_port_at));
    }
    servers_.push_back(std::move(server));
  }

  Device read_device(const json& value, const JsonLocation& loc, std::map<int, std::string>& device_id_at,
                     std::map<std::int64_t, std::string>& host_port_at) {
    ObjectReader r(value, loc);
    Device dev;
    dev.where = loc;

    const std::int64_t device_id = required_decimal(r, "device_id", kMaxU32);
    const JsonLocation device_id_loc = r.location_of("device_id");
    if (device_id >= max_devices()) {
      device_id_loc.fail(
          "device_id " + std::to_string(device_id) + " is out of range: " +
          "an Atlas " + product_.name + " server has " + devices_text() + ", device_id 0 to " +
          std::to_string(max_devices() - 1) + " (" + product_.rank_table_doc + ": [0, number of devices - 1])");
    }
    dev.device_id = static_cast<int>(device_id);
    dev.rank_id = required_decimal(r, "rank_id", kMaxU32);
    const JsonLocation rank_id_loc = r.location_of("rank_id");

    if (const std::optional<std::string> ip = r.optional_string("device_ip"); ip && !ip->empty()) {
      const JsonLocation ip_loc = r.location_of("device_ip");
      for (const std::string& address : ip_addresses(*ip, ip_loc, true)) {
        const auto [it, inserted] = device_ip_at_.emplace(address, ip_loc.path);
        if (!inserted) {
          ip_loc.fail("device_ip " + address + " is also used at " + it->second +
                      "; device IPs must be globally unique");
        }
      }
      dev.has_device_ip = true;
    }
    optional_port(r, "device_port");
    if (const std::optional<std::int64_t> host_port = optional_port(r, "host_port")) {
      const auto [it, inserted] = host_port_at.emplace(*host_port, r.location_of("host_port").path);
      if (!inserted) {
        r.location_of("host_port")
            .fail("host_port " + std::to_string(*host_port) + " is also used at " + it->second +
                  "; the devices of a server need distinct host ports");
      }
    }
    if (superpod_format_) {
      // 0xFFFFFFFF is HCCL's "not set" marker, so the largest id is one less.
      dev.super_device_id = optional_decimal(r, "super_device_id", kMaxU32 - 1);
      if (const std::optional<std::string> backup = r.optional_string("backup_device_ip"); backup && !backup->empty()) {
        ip_addresses(*backup, r.location_of("backup_device_ip"), true);
      }
      optional_port(r, "backup_device_port");
    } else {
      refuse_superpod_key(value, r, "super_device_id");
      refuse_superpod_key(value, r, "backup_device_ip");
      refuse_superpod_key(value, r, "backup_device_port");
    }
    r.finish();

    const auto [dup_device, new_device] = device_id_at.emplace(dev.device_id, device_id_loc.path);
    if (!new_device) {
      device_id_loc.fail("device_id " + std::to_string(dev.device_id) + " is also used at " + dup_device->second +
                         "; the device ids of a server must be unique");
    }
    const auto [dup_rank, new_rank] = rank_id_at_.emplace(dev.rank_id, rank_id_loc.path);
    if (!new_rank) {
      rank_id_loc.fail("rank_id " + std::to_string(dev.rank_id) + " is also used at " + dup_rank->second +
                       "; rank ids must be globally unique");
    }
    return dev;
  }

  void read_superpods(const json& pods, const JsonLocation& loc) {
    if (!pods.is_array()) loc.fail("expected an array of super pods, got " + std::string(pods.type_name()));
    if (pods.empty()) {
      loc.fail("super_pod_list is empty; list the super pods, or leave the key out for AI-server mode");
    }
    std::map<std::string, std::string> pod_id_at;  // super_pod_id -> path
    std::vector<std::string> listed_at(servers_.size());  // per server: where super_pod_list names it
    for (std::size_t p = 0; p < pods.size(); ++p) {
      const JsonLocation pod_loc = loc.index(p);
      ObjectReader r(pods[p], pod_loc);
      const std::string id = r.required_string("super_pod_id");
      const JsonLocation id_loc = r.location_of("super_pod_id");
      if (id.empty()) id_loc.fail("super_pod_id is empty");
      const auto [dup, inserted] = pod_id_at.emplace(id, id_loc.path);
      if (!inserted) {
        id_loc.fail("super_pod_id " + in_quotes(id) + " is also used at " + dup->second +
                    "; super pod ids must be globally unique");
      }
      pod_ids_.push_back(id);
      const json& members = r.required_array("server_list");
      r.finish();
      const JsonLocation members_loc = r.location_of("server_list");
      if (members.empty()) members_loc.fail("super pod " + in_quotes(id) + " lists no servers");
      for (std::size_t m = 0; m < members.size(); ++m) {
        const JsonLocation member_loc = members_loc.index(m);
        ObjectReader member(members[m], member_loc);
        const std::string server_id = member.required_string("server_id");
        member.finish();
        const JsonLocation sid_loc = member_loc.key("server_id");
        const auto it = server_index_.find(server_id);
        if (it == server_index_.end()) {
          sid_loc.fail("server_id " + in_quotes(server_id) + " is not in server_list");
        }
        Server& server = servers_[it->second];
        if (server.pod >= 0) {
          sid_loc.fail("server " + in_quotes(server_id) + " is already listed at " + listed_at[it->second] +
                       " (super pod " + in_quotes(pod_ids_[static_cast<std::size_t>(server.pod)]) +
                       "); a server belongs to exactly one super pod and is listed once");
        }
        server.pod = static_cast<int>(p);
        listed_at[it->second] = sid_loc.path;
      }
    }

    std::map<std::pair<int, std::int64_t>, std::string> super_device_at;  // (pod, super_device_id) -> path
    for (const Server& server : servers_) {
      if (server.pod < 0) {
        server.where.fail("server " + in_quotes(server.id) +
                          " is in no super pod; with super_pod_list every server of server_list must be listed "
                          "in one super pod");
      }
      for (const Device& dev : server.devices) {
        const JsonLocation sdid_loc = dev.where.key("super_device_id");
        if (!dev.super_device_id) {
          sdid_loc.fail("missing super_device_id; with super_pod_list every device needs its id in the super pod "
                        "(npu-smi info -t spod-info, field SDID)");
        }
        const auto [dup, inserted] = super_device_at.emplace(std::make_pair(server.pod, *dev.super_device_id), sdid_loc.path);
        if (!inserted) {
          sdid_loc.fail("super_device_id " + std::to_string(*dev.super_device_id) + " is also used at " + dup->second +
                        " in super pod " + in_quotes(pod_ids_[static_cast<std::size_t>(server.pod)]) +
                        "; super device ids must be unique inside a super pod");
        }
      }
    }

    // The servers of a superpod come one after another in server_list.
    std::set<int> finished;
    for (std::size_t i = 1; i < servers_.size(); ++i) {
      const int previous = servers_[i - 1].pod;
      if (servers_[i].pod == previous) continue;
      finished.insert(previous);
      if (finished.count(servers_[i].pod) != 0) {
        servers_[i].where.fail("server " + in_quotes(servers_[i].id) + " of super pod " +
                               in_quotes(pod_ids_[static_cast<std::size_t>(servers_[i].pod)]) +
                               " is separated from the other servers of its super pod; list the servers of a "
                               "super pod together in server_list (rank_table_config_a3.md)");
      }
    }
  }

  // Layout superpods: a product without them (A2) has one; A3 superpod mode
  // numbers the table's superpods in server_list order; A3 AI-server mode
  // makes each server one.
  void build_superpods() {
    if (!product_.has_supernodes()) {
      for (Server& server : servers_) server.pod = 0;
      return;
    }
    if (pod_ids_.empty()) {
      for (std::size_t i = 0; i < servers_.size(); ++i) {
        servers_[i].pod = static_cast<int>(i);
        table_.superpod_ids.push_back(servers_[i].id);
      }
      return;
    }
    std::map<int, int> layout_index;  // index in super_pod_list -> layout superpod
    for (Server& server : servers_) {
      const auto [it, inserted] = layout_index.emplace(server.pod, static_cast<int>(layout_index.size()));
      if (inserted) table_.superpod_ids.push_back(pod_ids_[static_cast<std::size_t>(server.pod)]);
      server.pod = it->second;
    }
  }

  // Several servers (A2, A3 AI-server mode) or superpods (A3 superpod mode)
  // talk over the devices' RoCE NICs, which need their addresses.
  void check_device_ips() const {
    std::string reason;
    const std::string doc = " (" + product_.rank_table_doc + ")";
    if (!product_.has_supernodes() && servers_.size() > 1) {
      reason = "with more than one server every device needs device_ip" + doc;
    } else if (product_.has_supernodes() && pod_ids_.empty() && servers_.size() > 1) {
      reason = "in AI-server mode with more than one server every device needs device_ip" + doc;
    } else if (product_.has_supernodes() && table_.superpod_ids.size() > 1) {
      reason = "with more than one super pod every device needs device_ip" + doc;
    } else {
      return;
    }
    for (const Server& server : servers_) {
      for (const Device& dev : server.devices) {
        if (!dev.has_device_ip) dev.where.key("device_ip").fail("missing device_ip; " + reason);
      }
    }
  }

  // The simulator's A3 server pairs local dies 2k and 2k+1 into one chip
  // (SIO); a table naming one die of a chip without the other cannot be laid
  // out that way. HCCL itself accepts such a table.
  void check_whole_chips() const {
    for (const Server& server : servers_) {
      std::set<int> ids;
      for (const Device& dev : server.devices) ids.insert(dev.device_id);
      for (const Device& dev : server.devices) {
        const int sibling = dev.device_id ^ 1;
        if (ids.count(sibling) == 0) {
          dev.where.key("device_id")
              .fail("device_id " + std::to_string(dev.device_id) + " is listed without device_id " +
                    std::to_string(sibling) + ", the other die of its chip; the simulator models whole A3 chips "
                    "(dies 2k and 2k+1 joined by SIO), so list both dies of every chip a server uses");
        }
      }
    }
  }

  void check_rank_ids() const {
    std::size_t total = 0;
    for (const Server& server : servers_) total += server.devices.size();
    const auto n = static_cast<std::int64_t>(total);

    // Unique (checked while reading) and below N: exactly 0..N-1.
    for (const Server& server : servers_) {
      for (const Device& dev : server.devices) {
        if (dev.rank_id < n) continue;
        std::string missing;
        int shown = 0;
        for (std::int64_t r = 0; r < n && shown < 8; ++r) {
          if (rank_id_at_.count(r) != 0) continue;
          missing += (shown == 0 ? "" : ", ") + std::to_string(r);
          ++shown;
        }
        dev.where.key("rank_id").fail("rank_id " + std::to_string(dev.rank_id) + " is out of range: the table has " +
                                      std::to_string(n) + " devices, so rank ids run from 0 to " +
                                      std::to_string(n - 1) + " without gaps (missing: " + missing + ")");
      }
    }

    // "Cross-server rank_id interleaving is not supported" (docs, rank_id):
    // the ranks of each server form one contiguous block.
    std::vector<int> server_of_rank(total);
    for (std::size_t s = 0; s < servers_.size(); ++s) {
      for (const Device& dev : servers_[s].devices) server_of_rank[static_cast<std::size_t>(dev.rank_id)] = static_cast<int>(s);
    }
    for (std::size_t s = 0; s < servers_.size(); ++s) {
      const Server& server = servers_[s];
      std::vector<std::int64_t> ranks;
      for (const Device& dev : server.devices) ranks.push_back(dev.rank_id);
      std::sort(ranks.begin(), ranks.end());
      if (ranks.back() - ranks.front() + 1 == static_cast<std::int64_t>(ranks.size())) continue;
      std::int64_t intruder = ranks.front();
      while (server_of_rank[static_cast<std::size_t>(intruder)] == static_cast<int>(s)) ++intruder;
      std::string list;
      for (const std::int64_t r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
      server.where.key("device").fail(
          "the rank ids of server " + in_quotes(server.id) + " are {" + list + "}, not one contiguous block (rank " +
          std::to_string(intruder) + " is on server " +
          in_quotes(servers_[static_cast<std::size_t>(server_of_rank[static_cast<std::size_t>(intruder)])].id) +
          "); HCCL does not support rank ids interleaved across servers");
    }
  }

  void build_layout() {
    ClusterLayout& layout = table_.layout;
    layout.name = std::filesystem::path(file_).stem().string();
    layout.kind = product_.cluster_kind();
    std::size_t total = 0;
    for (const Server& server : servers_) total += server.devices.size();
    table_.sim_rank_of_rank_id.assign(total, -1);
    int base = 0;
    for (const Server& server : servers_) {
      ServerLayout out;
      out.id = server.id;
      out.devices = static_cast<int>(server.devices.size());
      out.superpod = server.pod;
      layout.servers.push_back(out);
      std::vector<const Device*> by_device_id;
      for (const Device& dev : server.devices) by_device_id.push_back(&dev);
      std::sort(by_device_id.begin(), by_device_id.end(),
                [](const Device* a, const Device* b) { return a->device_id < b->device_id; });
      for (std::size_t k = 0; k < by_device_id.size(); ++k) {
        table_.sim_rank_of_rank_id[static_cast<std::size_t>(by_device_id[k]->rank_id)] = base + static_cast<int>(k);
      }
      base += out.devices;
    }
  }

  std::string file_;
  ProductTraits product_;
  // "8 NPUs"; with dies: "16 dies (8 NPUs x 2)".
  std::string devices_text() const {
    const int d = product_.devices_per_server;
    if (product_.dies_per_chip == 1) return std::to_string(d) + " NPUs";
    return std::to_string(d) + " dies (" + std::to_string(d / product_.dies_per_chip) + " NPUs x " +
           std::to_string(product_.dies_per_chip) + ")";
  }
  bool superpod_format_ = false;
  RankTable table_;
  std::vector<Server> servers_;
  std::map<std::string, std::size_t> server_index_;     // server_id -> index in servers_
  std::map<std::int64_t, std::string> rank_id_at_;      // rank_id -> path
  std::map<std::string, std::string> device_ip_at_;     // device IP -> path
  std::vector<std::string> pod_ids_;                    // super_pod_list order
};

}  // namespace

RankTable load_rank_table(const std::string& file, const ProductTraits& product) {
  return Importer(file, product).run(load_json_file(file));
}

RankTable rank_table_from_text(const std::string& text, const std::string& file, const ProductTraits& product) {
  return Importer(file, product).run(parse_json_text(text, file));
}

}  // namespace hcclsim
