// Unit tests for topologies/rank_table: importing HCCL rank tables (version
// 1.0 for A2 and A3 AI-server mode, 1.2 for A3 superpod mode) into a
// ClusterLayout and the rank_id -> simulator rank mapping.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/rank_table.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

using hcclsim::testing::source_file;

// The shipped product a rank table is read for ("a2", "a3"): its profile's npu.product.
const ProductTraits& product(const std::string& kind) {
  return hcclsim::testing::shipped_profile(kind == "a3" ? HcclRules::A3 : HcclRules::A2).npu.traits;
}
std::string example(const std::string& name) { return source_file("configs/ranktables/" + name); }
std::string bad_table(const std::string& name) { return source_file("tests/ranktables/" + name); }

// The InputError thrown by `f`, or fails the test.
template <typename F>
InputError input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  return InputError("", "");
}

std::vector<int> identity(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

std::vector<std::string> server_ids(const ClusterLayout& layout) {
  std::vector<std::string> ids;
  for (const ServerLayout& s : layout.servers) ids.push_back(s.id);
  return ids;
}
std::vector<int> devices_per_server(const ClusterLayout& layout) {
  std::vector<int> n;
  for (const ServerLayout& s : layout.servers) n.push_back(s.devices);
  return n;
}
std::vector<int> superpods(const ClusterLayout& layout) {
  std::vector<int> p;
  for (const ServerLayout& s : layout.servers) p.push_back(s.superpod);
  return p;
}

struct Refusal {
  const char* file;   // in tests/ranktables
  const char* kind;
  const char* path;   // JSON path of the fault
  const char* reason; // part of the message
};

// Each table is refused with an InputError naming the file, the path and the reason.
void check_refusals(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    INFO("table " << c.file << " (" << c.kind << ")");
    const std::string file = bad_table(c.file);
    const InputError e = input_error_of([&] { load_rank_table(file, product(c.kind)); });
    CHECK(e.where() == file + " at " + c.path);
    CHECK_THAT(e.message(), Contains(c.reason));
    CHECK_THAT(e.what(), Contains(file));
  }
}

// A 1.0 table of two servers with the given device objects (JSON text).
std::string two_server_table(const std::string& devices0, const std::string& devices1) {
  return R"({"status": "completed", "version": "1.0", "server_count": "2", "server_list": [
      {"server_id": "node_a", "device": [)" + devices0 + R"(]},
      {"server_id": "node_b", "device": [)" + devices1 + R"(]}]})";
}

}  // namespace

// ------------------------------------------------------- documented examples

TEST_CASE("The documented A2 rank table imports as two servers of two NPUs", "[rank_table][a2]") {
  // hicann/hccl docs/zh/user_guide/cluster_info_config/rank_table_config_a2.md
  const RankTable t = load_rank_table(example("a2_doc_example.json"), product("a2"));
  CHECK(t.version == "1.0");
  CHECK(t.layout.name == "a2_doc_example");
  CHECK(t.layout.kind == "a2");
  CHECK(server_ids(t.layout) == std::vector<std::string>{"node_0", "node_1"});
  CHECK(devices_per_server(t.layout) == std::vector<int>{2, 2});
  CHECK(superpods(t.layout) == std::vector<int>{0, 0});
  CHECK(t.sim_rank_of_rank_id == identity(4));
  CHECK(t.superpod_ids.empty());
}

TEST_CASE("The documented A3 superpod rank table imports with its two superpods", "[rank_table][a3]") {
  // rank_table_config_a3.md, SuperPoD mode: 2 superpods x 2 servers x 4 dies.
  const RankTable t = load_rank_table(example("a3_doc_superpod_example.json"), product("a3"));
  CHECK(t.version == "1.2");
  CHECK(t.layout.kind == "a3");
  CHECK(server_ids(t.layout) == std::vector<std::string>{"node_0", "node_1", "node_2", "node_3"});
  CHECK(devices_per_server(t.layout) == std::vector<int>{4, 4, 4, 4});
  CHECK(superpods(t.layout) == std::vector<int>{0, 0, 1, 1});
  CHECK(t.superpod_ids == std::vector<std::string>{"0", "1"});
  CHECK(t.sim_rank_of_rank_id == identity(16));
}

TEST_CASE("The documented A3 AI-server rank table makes each server a superpod of its own", "[rank_table][a3]") {
  // rank_table_config_a3.md, typical networking: version 1.0 on A3.
  const RankTable t = load_rank_table(example("a3_doc_ai_server_example.json"), product("a3"));
  CHECK(t.version == "1.0");
  CHECK(devices_per_server(t.layout) == std::vector<int>{2, 2});
  CHECK(superpods(t.layout) == std::vector<int>{0, 1});
  CHECK(t.superpod_ids == std::vector<std::string>{"node_0", "node_1"});
  CHECK(t.sim_rank_of_rank_id == identity(4));
}

TEST_CASE("The project's own rank tables import", "[rank_table]") {
  const RankTable a2 = load_rank_table(example("a2_4servers_32npus.json"), product("a2"));
  CHECK(devices_per_server(a2.layout) == std::vector<int>{8, 8, 8, 8});
  CHECK(a2.sim_rank_of_rank_id == identity(32));

  const RankTable one_pod = load_rank_table(example("a3_1superpod_2servers_32dies.json"), product("a3"));
  CHECK(devices_per_server(one_pod.layout) == std::vector<int>{16, 16});
  CHECK(superpods(one_pod.layout) == std::vector<int>{0, 0});
  CHECK(one_pod.superpod_ids == std::vector<std::string>{"pod0"});

  const RankTable two_pods = load_rank_table(example("a3_2superpods_4servers_64dies.json"), product("a3"));
  CHECK(devices_per_server(two_pods.layout) == std::vector<int>{16, 16, 16, 16});
  CHECK(superpods(two_pods.layout) == std::vector<int>{0, 0, 1, 1});
  CHECK(two_pods.sim_rank_of_rank_id == identity(64));
}

// ------------------------------------------------------------ rank mapping

TEST_CASE("Simulator ranks follow server_list order and device_id order", "[rank_table][mapping]") {
  // node_a holds ranks 2 and 3 (device 1 is rank 2, device 0 rank 3), node_b
  // ranks 0 and 1: blocks out of server_list order are allowed (the docs
  // only forbid interleaving).
  const std::string text =
      two_server_table(R"({"device_id": "1", "device_ip": "10.0.0.2", "rank_id": "2"},
                          {"device_id": "0", "device_ip": "10.0.0.1", "rank_id": "3"})",
                       R"({"device_id": "0", "device_ip": "10.0.1.1", "rank_id": "0"},
                          {"device_id": "1", "device_ip": "10.0.1.2", "rank_id": "1"})");
  const RankTable t = rank_table_from_text(text, "mem.json", product("a2"));
  CHECK(server_ids(t.layout) == std::vector<std::string>{"node_a", "node_b"});
  // sim 0 = node_a device 0 (rank 3), sim 1 = node_a device 1 (rank 2), sim 2 and 3 = node_b.
  CHECK(t.sim_rank_of_rank_id == std::vector<int>{2, 3, 1, 0});
}

TEST_CASE("Servers may list a subset of their devices", "[rank_table][mapping]") {
  // A2 server using NPUs 4..7 only; A3 server using chips 1 and 3 (dies 2 3 6 7).
  const std::string a2 = R"({"status": "completed", "version": "1.0", "server_count": "1", "server_list": [
      {"server_id": "s", "device": [{"device_id": "7", "rank_id": "3"}, {"device_id": "4", "rank_id": "0"},
                                    {"device_id": "5", "rank_id": "1"}, {"device_id": "6", "rank_id": "2"}]}]})";
  const RankTable t2 = rank_table_from_text(a2, "a2.json", product("a2"));
  CHECK(devices_per_server(t2.layout) == std::vector<int>{4});
  CHECK(t2.sim_rank_of_rank_id == identity(4));

  const std::string a3 = R"({"status": "completed", "version": "1.2", "server_list": [
      {"server_id": "s", "device": [{"device_id": "2", "rank_id": "0"}, {"device_id": "3", "rank_id": "1"},
                                    {"device_id": "6", "rank_id": "2"}, {"device_id": "7", "rank_id": "3"}]}]})";
  const RankTable t3 = rank_table_from_text(a3, "a3.json", product("a3"));
  CHECK(devices_per_server(t3.layout) == std::vector<int>{4});
  CHECK(t3.sim_rank_of_rank_id == identity(4));
}

TEST_CASE("A version 1.2 table without super_pod_list is in AI-server mode", "[rank_table][a3]") {
  // rank_table_config_a3.md: super_pod_list and super_device_id are optional;
  // without them AI-server mode is used. server_count is optional in 1.2.
  const std::string text = R"({"status": "completed", "version": "1.2", "server_list": [
      {"server_id": "x", "device": [{"device_id": "0", "device_ip": "10.0.0.1", "rank_id": "0"},
                                    {"device_id": "1", "device_ip": "10.0.0.2", "rank_id": "1"}]},
      {"server_id": "y", "device": [{"device_id": "0", "device_ip": "10.0.1.1", "rank_id": "2"},
                                    {"device_id": "1", "device_ip": "10.0.1.2", "super_device_id": "9", "rank_id": "3"}]}]})";
  const RankTable t = rank_table_from_text(text, "mem.json", product("a3"));
  CHECK(superpods(t.layout) == std::vector<int>{0, 1});
  CHECK(t.superpod_ids == std::vector<std::string>{"x", "y"});
}

TEST_CASE("A single-server table needs no device_ip", "[rank_table][a2]") {
  const std::string text = R"({"status": "completed", "version": "1.0", "server_count": "1", "server_list": [
      {"server_id": "solo", "host_ip": "172.16.0.1", "device": [
        {"device_id": "0", "rank_id": "0", "host_port": "16666"}, {"device_id": "1", "rank_id": "1", "host_port": "16667"}]}]})";
  const RankTable t = rank_table_from_text(text, "solo.json", product("a2"));
  CHECK(devices_per_server(t.layout) == std::vector<int>{2});
}

TEST_CASE("Superpods are numbered in server_list order", "[rank_table][a3]") {
  // super_pod_list names pod "late" first, but its servers come second in server_list.
  const std::string text = R"({"status": "completed", "version": "1.2", "server_list": [
      {"server_id": "a", "device": [{"device_id": "0", "super_device_id": "0", "device_ip": "10.0.0.1", "rank_id": "0"},
                                    {"device_id": "1", "super_device_id": "1", "device_ip": "10.0.0.2", "rank_id": "1"}]},
      {"server_id": "b", "device": [{"device_id": "0", "super_device_id": "0", "device_ip": "10.0.1.1", "rank_id": "2"},
                                    {"device_id": "1", "super_device_id": "1", "device_ip": "10.0.1.2", "rank_id": "3"}]}],
    "super_pod_list": [{"super_pod_id": "late", "server_list": [{"server_id": "b"}]},
                       {"super_pod_id": "early", "server_list": [{"server_id": "a"}]}]})";
  const RankTable t = rank_table_from_text(text, "mem.json", product("a3"));
  CHECK(superpods(t.layout) == std::vector<int>{0, 1});
  CHECK(t.superpod_ids == std::vector<std::string>{"early", "late"});
}

// ----------------------------------------------------------------- refusals

TEST_CASE("Rank tables with a bad version or status or server count are refused", "[rank_table][refuse]") {
  check_refusals({
      {"version_unknown.json", "a2", "$.version", "version \"2.0\" is not supported"},
      {"version_missing.json", "a2", "$.version", "missing required key 'version'"},
      {"status_initializing.json", "a2", "$.status", "status is \"initializing\""},
      {"status_unknown.json", "a2", "$.status", "expected one of: completed, initializing"},
      {"server_count_mismatch.json", "a2", "$.server_count", "server_count is 3 but server_list has 2 servers"},
      {"server_count_missing.json", "a2", "$.server_count", "missing required key 'server_count'"},
      {"server_list_empty.json", "a2", "$.server_list", "server_list is empty"},
  });
}

TEST_CASE("An A2 rank table must be version 1.0", "[rank_table][refuse]") {
  const std::string file = example("a3_doc_superpod_example.json");
  const InputError e = input_error_of([&] { load_rank_table(file, product("a2")); });
  CHECK(e.where() == file + " at $.version");
  CHECK_THAT(e.message(), Contains("an Atlas A2 rank table has version \"1.0\""));
}

TEST_CASE("Rank tables with bad servers or devices are refused", "[rank_table][refuse]") {
  check_refusals({
      {"duplicate_server_id.json", "a2", "$.server_list[1].server_id",
       "server_id \"node_0\" is also used by $.server_list[0]"},
      {"server_id_too_long.json", "a2", "$.server_list[1].server_id", "at most 64"},
      {"device_list_empty.json", "a2", "$.server_list[1].device", "device list is empty"},
      {"duplicate_device_id.json", "a2", "$.server_list[0].device[1].device_id",
       "device_id 0 is also used at $.server_list[0].device[0].device_id"},
      {"a2_device_id_out_of_range.json", "a2", "$.server_list[1].device[1].device_id", "device_id 0 to 7"},
      {"a3_device_id_out_of_range.json", "a3", "$.server_list[3].device[1].device_id", "device_id 0 to 15"},
      {"unknown_device_key.json", "a2", "$.server_list[0].device[0].devcie_port",
       "unknown key 'devcie_port'; expected one of: device_id, device_ip, device_port, host_port, rank_id"},
      {"super_device_id_in_v10.json", "a2", "$.server_list[0].device[0].super_device_id", "belongs to version 1.2"},
      {"device_ip_missing.json", "a2", "$.server_list[1].device[0].device_ip", "missing device_ip"},
      {"device_ip_duplicate.json", "a2", "$.server_list[1].device[0].device_ip",
       "device_ip 192.168.1.8 is also used at $.server_list[0].device[0].device_ip"},
      {"device_ip_invalid.json", "a2", "$.server_list[0].device[1].device_ip",
       "\"192.168.1.300\" is not an IPv4 or IPv6 address"},
      {"device_port_too_large.json", "a2", "$.server_list[0].device[0].device_port", "too large (at most 65535)"},
      {"device_port_zero.json", "a2", "$.server_list[0].device[0].device_port", "port 0 is reserved"},
      {"host_port_duplicate.json", "a2", "$.server_list[0].device[1].host_port",
       "host_port 16666 is also used at $.server_list[0].device[0].host_port"},
  });
}

TEST_CASE("Rank tables with bad rank ids are refused", "[rank_table][refuse]") {
  check_refusals({
      {"duplicate_rank_id.json", "a2", "$.server_list[1].device[1].rank_id",
       "rank_id 2 is also used at $.server_list[1].device[0].rank_id"},
      {"rank_id_gap.json", "a2", "$.server_list[1].device[1].rank_id",
       "rank ids run from 0 to 3 without gaps (missing: 3)"},
      {"rank_ids_from_one.json", "a2", "$.server_list[1].device[1].rank_id", "(missing: 0)"},
      // The documented counter-example: server 1 {0,1,2,7}, server 2 {3,4,5,6}.
      {"rank_ids_interleaved.json", "a2", "$.server_list[0].device",
       "the rank ids of server \"node_0\" are {0, 1, 2, 7}, not one contiguous block (rank 3 is on server \"node_1\")"},
      {"rank_id_json_number.json", "a2", "$.server_list[0].device[1].rank_id", "expected a string, got number 1"},
      {"device_id_not_decimal.json", "a2", "$.server_list[0].device[1].device_id", "\"0x1\" is not a decimal number"},
  });
}

TEST_CASE("Rank tables with bad superpods are refused", "[rank_table][refuse][a3]") {
  check_refusals({
      {"a3_server_in_two_superpods.json", "a3", "$.super_pod_list[1].server_list[0].server_id",
       "server \"node_1\" is already listed at $.super_pod_list[0].server_list[1].server_id (super pod \"0\")"},
      {"a3_server_in_no_superpod.json", "a3", "$.server_list[3]", "server \"node_3\" is in no super pod"},
      {"a3_duplicate_super_device_id.json", "a3", "$.server_list[1].device[1].super_device_id",
       "super_device_id 0 is also used at $.server_list[0].device[0].super_device_id in super pod \"0\""},
      {"a3_missing_super_device_id.json", "a3", "$.server_list[2].device[0].super_device_id",
       "missing super_device_id"},
      // The documented load failure: version 1.2 with an empty super_device_id.
      {"a3_empty_super_device_id.json", "a3", "$.server_list[2].device[0].super_device_id", "empty string"},
      {"a3_superpod_unknown_server.json", "a3", "$.super_pod_list[1].server_list[1].server_id",
       "server_id \"node_9\" is not in server_list"},
      {"a3_duplicate_super_pod_id.json", "a3", "$.super_pod_list[1].super_pod_id",
       "super_pod_id \"0\" is also used at $.super_pod_list[0].super_pod_id"},
      {"a3_super_pod_list_empty.json", "a3", "$.super_pod_list", "super_pod_list is empty"},
      {"a3_superpods_interleaved.json", "a3", "$.server_list[2]",
       "server \"node_2\" of super pod \"0\" is separated from the other servers of its super pod"},
      {"a3_super_pod_list_in_v10.json", "a3", "$.super_pod_list", "belongs to version 1.2"},
      {"a3_device_ip_missing.json", "a3", "$.server_list[3].device[1].device_ip",
       "with more than one super pod every device needs device_ip"},
      {"a3_half_chip.json", "a3", "$.server_list[1].device[0].device_id",
       "device_id 0 is listed without device_id 1, the other die of its chip"},
  });
}

TEST_CASE("A server listed twice in one superpod is refused", "[rank_table][refuse][a3]") {
  const std::string text = R"({"status": "completed", "version": "1.2", "server_list": [
      {"server_id": "a", "device": [{"device_id": "0", "super_device_id": "0", "rank_id": "0"},
                                    {"device_id": "1", "super_device_id": "1", "rank_id": "1"}]}],
    "super_pod_list": [{"super_pod_id": "p", "server_list": [{"server_id": "a"}, {"server_id": "a"}]}]})";
  const InputError e = input_error_of([&] { rank_table_from_text(text, "mem.json", product("a3")); });
  CHECK(e.where() == "mem.json at $.super_pod_list[0].server_list[1].server_id");
  CHECK_THAT(e.message(), Contains("already listed at $.super_pod_list[0].server_list[0].server_id (super pod \"p\")"));
}

TEST_CASE("Numbers in a rank table are strings of decimal digits", "[rank_table][refuse]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("+1")", "is not a decimal number"}, {R"(" 1")", "is not a decimal number"},
      {R"("1.0")", "is not a decimal number"}, {R"("-1")", "is not a decimal number"},
      {R"("")", "empty string"},                {R"("99999999999")", "too large"},
      {"1", "expected a string, got number 1"}, {"null", "expected a string, got null"},
  };
  for (const auto& [value, reason] : cases) {
    INFO("device_id " << value);
    const std::string text = two_server_table(R"({"device_id": "0", "device_ip": "10.0.0.1", "rank_id": "0"},
                                                 {"device_id": )" + value + R"(, "device_ip": "10.0.0.2", "rank_id": "1"})",
                                              R"({"device_id": "0", "device_ip": "10.0.1.1", "rank_id": "2"})");
    const InputError e = input_error_of([&] { rank_table_from_text(text, "mem.json", product("a2")); });
    CHECK(e.where() == "mem.json at $.server_list[0].device[1].device_id");
    CHECK_THAT(e.message(), Contains(reason));
  }
}

TEST_CASE("A missing file is refused", "[rank_table][refuse]") {
  const std::string missing = bad_table("no_such_table.json");
  const InputError file = input_error_of([&] { load_rank_table(missing, product("a2")); });
  CHECK(file.where() == missing);
  CHECK_THAT(file.message(), Contains("cannot open file"));
}

// ------------------------------------------------------------ with clusters

TEST_CASE("An imported rank table builds a cluster topology", "[rank_table][cluster]") {
  const RankTable a2 = load_rank_table(example("a2_4servers_32npus.json"), product("a2"));
  const TopologySpec a2_spec = make_cluster(a2.layout, load_profile(source_file("configs/profiles/a2-910b.json")));
  CHECK(a2_spec.npus == 32);
  REQUIRE(a2_spec.server_of.size() == 32);
  CHECK(a2_spec.server_of[7] == 0);
  CHECK(a2_spec.server_of[8] == 1);

  const RankTable a3 = load_rank_table(example("a3_2superpods_4servers_64dies.json"), product("a3"));
  const TopologySpec a3_spec = make_cluster(a3.layout, load_profile(source_file("configs/profiles/a3-910c.json")));
  CHECK(a3_spec.npus == 64);
  CHECK(a3_spec.npus_per_chip == 2);
  REQUIRE(a3_spec.sdma_domain_of.size() == 64);
  // Superpods are the SDMA domains: ranks 0..31 in the first, 32..63 in the second.
  CHECK(a3_spec.sdma_domain_of[31] == 0);
  CHECK(a3_spec.sdma_domain_of[32] == 1);
}
