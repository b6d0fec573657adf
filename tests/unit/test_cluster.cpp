// Clusters built by topologies/cluster: A2 servers joined by a RoCE
// leaf/spine fabric, A3 supernodes (CloudMatrix384) with their UB switches,
// supernodes joined by RoCE; routes through the fabrics (ECMP over spines),
// sharing of an oversubscribed uplink, the presets and the "cluster" object
// of a topology file. One Platform per TEST_CASE (SystemC elaborates once
// per process; catch_discover_tests runs each TEST_CASE in its own process).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "base/error.h"
#include "models/link/channel.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/platform.h"
#include "topologies/routes.h"

using namespace hcclsim;

namespace {

using hcclsim::testing::source_file;
using hcclsim::testing::a2_cluster_layout;
using hcclsim::testing::cloudmatrix_layout;
std::string a2_profile() { return source_file("configs/profiles/a2-910b.json"); }
std::string a3_profile() { return source_file("configs/profiles/a3-910c.json"); }
std::string preset(const std::string& name) { return source_file("configs/topologies/" + name + ".json"); }

std::string switch_name(const TopologySpec& spec, int node) { return "switch" + std::to_string(node - spec.npus); }

std::vector<std::string> labels(const std::vector<Channel*>& path) {
  std::vector<std::string> out;
  for (const Channel* c : path) out.push_back(c->label());
  return out;
}

double gbps(std::uint64_t bytes, Time t) { return static_cast<double>(bytes) / (static_cast<double>(t.ps) / 1e12) / 1e9; }

// A topology file in a fresh temporary directory; the profile path is absolute.
std::string write_topology(const std::string& name, const std::string& cluster_json) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "hcclsim_test_cluster";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / (name + ".json");
  std::ofstream out(file);
  out << "{\"name\": \"" << name << "\", \"profile\": \"" << a2_profile() << "\", \"cluster\": " << cluster_json
      << "}\n";
  return file.string();
}

}  // namespace

TEST_CASE("A2 cluster of 2 servers: 16 NPUs with HCCS inside a server and RoCE between servers", "[cluster][a2]") {
  const HardwareProfile profile = load_profile(a2_profile());
  const TopologySpec spec = make_cluster(a2_cluster_layout(2), profile);
  REQUIRE(spec.npus == 16);
  CHECK(spec.npus_per_server == 8);
  CHECK(spec.npus_per_chip == 1);
  CHECK(spec.switches == 1);  // 16 NICs fit one leaf of 64: no spines
  REQUIRE(spec.server_of.size() == 16);
  REQUIRE(spec.sdma_domain_of.size() == 16);
  for (int n = 0; n < 16; ++n) {
    CHECK(spec.server_of[static_cast<std::size_t>(n)] == n / 8);
    CHECK(spec.sdma_domain_of[static_cast<std::size_t>(n)] == n / 8);
  }
  int hccs = 0;
  int roce = 0;
  for (const LinkSpec& l : spec.links) {
    if (l.kind == "hccs") {
      ++hccs;
      CHECK(l.a / 8 == l.b / 8);
    } else {
      REQUIRE(l.kind == "roce");
      ++roce;
      CHECK(l.b == 16);
    }
  }
  CHECK(hccs == 2 * 28);
  CHECK(roce == 16);

  Platform platform(spec);
  for (int a = 0; a < 16; ++a) {
    for (int b = 0; b < 16; ++b) {
      INFO("npu" << a << " -> npu" << b);
      CHECK(platform.server_of(a) == a / 8);
      CHECK(platform.rdma_between(a, b) == (a / 8 != b / 8));
      if (a == b) continue;
      const std::vector<std::string> path = labels(platform.route(a, b));
      if (a / 8 == b / 8) {
        CHECK(path == std::vector<std::string>{"hccs npu" + std::to_string(a) + "->npu" + std::to_string(b)});
      } else {
        CHECK(path == std::vector<std::string>{"roce npu" + std::to_string(a) + "->switch0",
                                               "roce switch0->npu" + std::to_string(b)});
      }
    }
  }
}

TEST_CASE("a cluster is laid out from its profile's product record, not the product's name", "[cluster]") {
  // The A2 record with servers of 4 NPUs in die pairs through a switch:
  // every server gets SIO pairs and a switch port per die, no HCCS mesh.
  std::ifstream in(a2_profile());
  nlohmann::json doc = nlohmann::json::parse(in);
  nlohmann::json& product = doc["npu"]["product"];
  product["devices_per_server"] = 4;
  product["dies_per_chip"] = 2;
  product["server_interconnect"] = "switch";
  doc["links"]["sio"] = doc["links"]["hccs"];
  const HardwareProfile edited = read_profile(doc, "edited.json");
  const TopologySpec spec = make_cluster(product_cluster_layout(edited.npu.traits, 1, 2), edited);
  CHECK(spec.npus == 8);
  CHECK(spec.npus_per_chip == 2);
  std::map<std::string, int> kinds;
  for (const LinkSpec& link : spec.links) ++kinds[link.kind];
  CHECK(kinds["sio"] == 4);     // 2 servers x 2 pairs
  CHECK(kinds["hccs"] == 8);    // a port per die to its server's switch
  CHECK(kinds["roce"] == 8);    // a NIC per die (one leaf: no spines)
  // A record that contradicts itself is refused where it is written.
  product["sdma_domain"] = "supernode";
  CHECK_THROWS_WITH(read_profile(doc, "edited.json"), Catch::Contains("edited.json at $.npu.product.sdma_domain"));
  product["sdma_domain"] = "server";
  product["devices_per_server"] = 5;
  CHECK_THROWS_WITH(read_profile(doc, "edited.json"), Catch::Contains("$.npu.product.devices_per_server") &&
                                                          Catch::Contains("whole chips"));
}

TEST_CASE("a third product is a profile: its own name, the HCCL device type whose rules it follows", "[cluster]") {
  // The A3 record renamed A3X: a topology of kind "a3x" is built from it and
  // HCCL's 910_93 rules choose its executors, as for the A3 it copies.
  std::ifstream in(source_file("configs/profiles/a3-910c.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  nlohmann::json& product = doc["npu"]["product"];
  product["name"] = "A3X";
  const HardwareProfile a3x = read_profile(doc, "a3x.json");
  CHECK(a3x.npu.traits.cluster_kind() == "a3x");
  CHECK(a3x.npu.hccl_rules == HcclRules::A3);
  const HardwareProfile a3 = load_profile(source_file("configs/profiles/a3-910c.json"));
  const TopologySpec x = make_cluster(product_cluster_layout(a3x.npu.traits, 1, 1), a3x);
  const TopologySpec y = make_cluster(product_cluster_layout(a3.npu.traits, 1, 1), a3);
  CHECK(x.npus == y.npus);
  PerfRequest req;
  req.op = CollOp::AllReduce;
  req.ranks = 16;
  for (const std::uint64_t size : {std::uint64_t{1} << 16, std::uint64_t{1} << 26}) {
    CHECK(perf_choice(x, req, size).executor == perf_choice(y, req, size).executor);
  }
  // A name hcclsim has no rules for must say whose rules it follows ...
  product.erase("hccl_device_type");
  CHECK_THROWS_WITH(read_profile(doc, "a3x.json"), Catch::Contains("a3x.json at $.npu.product.name") &&
                                                      Catch::Contains("hccl_device_type"));
  // ... and name one hcclsim has.
  product["hccl_device_type"] = "910C";
  CHECK_THROWS_WITH(read_profile(doc, "a3x.json"), Catch::Contains("$.npu.product.hccl_device_type") &&
                                                      Catch::Contains("910_93"));
  // A topology of another kind than its profile's product is refused at its kind.
  product["hccl_device_type"] = "910_93";
  // A directory of this test's own, which it removes.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hcclsim_third_product_" + std::to_string(::getpid()));
  REQUIRE(std::filesystem::create_directory(dir));
  { std::ofstream(dir / "a3x.json") << doc.dump(); }
  { std::ofstream(dir / "topo.json") << R"({"name": "t", "profile": "a3x.json", "cluster": {"kind": "a3", "supernodes": 1, "servers_per_supernode": 2}})"; }
  CHECK_THROWS_WITH(load_topology((dir / "topo.json").string()), Catch::Contains("$.cluster.kind") &&
                                                                 Catch::Contains("product A3X"));
  { std::ofstream(dir / "topo.json") << R"({"name": "t", "profile": "a3x.json", "cluster": {"kind": "a3x", "supernodes": 1, "servers_per_supernode": 2}})"; }
  CHECK(load_topology((dir / "topo.json").string()).npus == 32);
  std::filesystem::remove_all(dir);
}

TEST_CASE("A2 cluster with a leaf per server: a route between servers is NIC - leaf - spine - leaf - NIC",
          "[cluster][a2]") {
  const TopologySpec spec = make_cluster(a2_cluster_layout(2, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
  REQUIRE(spec.npus == 16);
  CHECK(spec.switches == 2 + 4);
  const int leaf0 = 16;
  const int leaf1 = 17;
  REQUIRE(spec.fabrics.size() == 1);
  const FabricSpec& roce = spec.fabrics[0];
  CHECK(roce.kind == "roce");
  CHECK(roce.leaf_of[3] == leaf0);
  CHECK(roce.leaf_of[11] == leaf1);
  CHECK(roce.spines_of[leaf0] == std::vector<int>{18, 19, 20, 21});

  Platform platform(spec);
  // Uplinks: 8 NICs x 23.7 GB/s / (4 spines x 1).
  const Bandwidth nic = platform.channel(0, leaf0)->params().bandwidth;
  CHECK(platform.channel(leaf0, 18)->params().bandwidth.bytes_per_s == nic.bytes_per_s * 8 / 4);

  const std::vector<Channel*>& path = platform.route(3, 11);
  REQUIRE(path.size() == 4);
  const std::string spine = path[1]->label().substr(path[1]->label().find("->") + 2);
  CHECK(path[0]->label() == "roce npu3->switch0");
  CHECK(path[1]->label() == "roce switch0->" + spine);
  CHECK(path[2]->label() == "roce " + spine + "->switch1");
  CHECK(path[3]->label() == "roce switch1->npu11");
  CHECK(labels(platform.route(3, 5)) == std::vector<std::string>{"hccs npu3->npu5"});
  CHECK(&platform.route(3, 11) == &path);  // cached
}

TEST_CASE("ECMP spreads pairs over the spines and keeps each pair on one spine", "[cluster][a2]") {
  // 4 servers, a leaf per server, 4 spines.
  const TopologySpec spec = make_cluster(a2_cluster_layout(4, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
  Platform platform(spec);
  std::map<std::string, int> pairs_per_spine;
  int pairs = 0;
  for (int a = 0; a < spec.npus; ++a) {
    for (int b = 0; b < spec.npus; ++b) {
      if (a / 8 == b / 8) continue;
      const std::vector<Channel*>& path = platform.route(a, b);
      REQUIRE(path.size() == 4);
      ++pairs_per_spine[path[1]->label().substr(path[1]->label().find("->") + 2)];
      ++pairs;
      // The same pair always takes the same channels; the reverse pair is a pair of its own.
      CHECK(platform.route(a, b) == path);
    }
  }
  CHECK(pairs_per_spine.size() == 4);
  for (const auto& [spine, n] : pairs_per_spine) {
    INFO(spine << " carries " << n << " of " << pairs << " pairs");
    CHECK(n > pairs / 8);  // a fair share is pairs / 4
    CHECK(n < pairs / 2);
  }
  // A fixed function of (src, dst), the same in every run and build: these
  // choices are pinned (a change of the hash changes every cluster result
  // and must be made on purpose).
  CHECK(platform.route(0, 8)[1]->label() == "roce switch0->switch6");
  CHECK(platform.route(0, 9)[1]->label() == "roce switch0->switch4");
  CHECK(platform.route(2, 25)[1]->label() == "roce switch0->switch5");
  CHECK(platform.route(0, 16)[1]->label() == "roce switch0->switch7");
}

TEST_CASE("leaves with the same spines route as the per-pair lookup of the spines both reach", "[cluster][a2]") {
  // RouteFinder takes a pair of leaves with one list of spines, each linked
  // both ways to all of them, through their k-th channels, and any other
  // pair through the spines of the source leaf, in order, that both reach.
  // A spine listed for every leaf but linked to none sends every pair the
  // second way; the routes must not change.
  const TopologySpec regular = make_cluster(a2_cluster_layout(4, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
  TopologySpec listed = regular;
  const int unlinked = listed.npus + listed.switches;  // a node no link reaches
  ++listed.switches;
  for (std::vector<int>& spines : listed.fabrics[0].spines_of) {
    if (!spines.empty()) spines.insert(spines.begin() + 2, unlinked);
  }
  listed.fabrics[0].spines_of.resize(static_cast<std::size_t>(unlinked) + 1);
  const RouteFinder fast(regular);
  const RouteFinder looked_up(listed);
  std::set<int> spines_taken;
  for (int a = 0; a < regular.npus; ++a) {
    for (int b = 0; b < regular.npus; ++b) {
      if (a / 8 == b / 8) continue;
      const std::vector<int> path = fast.path(a, b);
      REQUIRE(path.size() == 4);
      CHECK(looked_up.path(a, b) == path);
      spines_taken.insert(regular.links[static_cast<std::size_t>(path[1]) / 2].b);
    }
  }
  CHECK(spines_taken.size() == 4);
}

TEST_CASE("routing many pairs at once gives each pair's append_path, in order", "[cluster]") {
  // append_paths takes the common route through a fabric in a loop of its
  // own and hands every other pair to append_path; the channels and each
  // path's end must be append_path's pair by pair. Fresh finders, so that
  // the lookups the loop fills on first use are made inside it.
  auto same_as_pair_by_pair = [](const TopologySpec& spec, const std::vector<std::pair<int, int>>& pairs) {
    const RouteFinder one_by_one(spec);
    std::vector<int> expected;
    std::vector<std::size_t> expected_ends{0};
    for (const auto& [a, b] : pairs) {
      one_by_one.append_path(a, b, expected);
      expected_ends.push_back(expected.size());
    }
    const RouteFinder at_once(spec);
    std::vector<int> channels{-7};  // (appended after what is there)
    std::vector<std::size_t> ends{1};
    at_once.append_paths(pairs.size(), [&](std::size_t i) { return pairs[i]; }, ends, channels);
    REQUIRE(channels.size() == expected.size() + 1);
    CHECK(channels.front() == -7);
    CHECK(std::equal(expected.begin(), expected.end(), channels.begin() + 1));
    REQUIRE(ends.size() == expected_ends.size());
    for (std::size_t i = 0; i < ends.size(); ++i) CHECK(ends[i] == expected_ends[i] + 1);
    return expected;
  };
  // Every pair at distances inside a server, under one leaf, across leaves and (A3) supernodes.
  auto rotations = [](int npus, const std::vector<int>& distances) {
    std::vector<std::pair<int, int>> pairs;
    for (const int x : distances) {
      for (int r = 0; r < npus; ++r) pairs.push_back({r, (r + x) % npus});
    }
    return pairs;
  };
  SECTION("A2 servers: HCCS inside a server, the RoCE leaves and spines between") {
    const TopologySpec spec = make_cluster(a2_cluster_layout(4, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
    same_as_pair_by_pair(spec, rotations(spec.npus, {1, 5, 8, 13, 24}));
    // A spine linked to no leaf: every pair between leaves goes through the spines both reach (spines_path).
    TopologySpec listed = spec;
    const int unlinked = listed.npus + listed.switches;
    ++listed.switches;
    for (std::vector<int>& spines : listed.fabrics[0].spines_of) {
      if (!spines.empty()) spines.insert(spines.begin() + 2, unlinked);
    }
    listed.fabrics[0].spines_of.resize(static_cast<std::size_t>(unlinked) + 1);
    same_as_pair_by_pair(listed, rotations(listed.npus, {3, 8, 17}));
  }
  SECTION("four CloudMatrix384 supernodes: UB inside one, RoCE between") {
    const TopologySpec spec = load_topology(preset("cloudmatrix384x4"));
    same_as_pair_by_pair(spec, rotations(spec.npus, {1, 16, 100, 768, 1500}));
  }
  SECTION("no fabric: paths of many hops found by the search, more than the room made up front") {
    TopologySpec line = make_cluster(a2_cluster_layout(1, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
    // Four switches in a line (nodes 8..11), NPU k on switch 8 + k % 4.
    line.links.clear();
    line.fabrics.clear();
    line.switches = 4;
    for (int sw = 8; sw < 11; ++sw) line.links.push_back(LinkSpec{sw, sw + 1, "hccs", {}});
    for (int k = 0; k < 8; ++k) line.links.push_back(LinkSpec{k, 8 + k % 4, "hccs", {}});
    const std::vector<int> channels = same_as_pair_by_pair(line, {{0, 3}, {4, 0}, {3, 0}, {1, 2}});
    CHECK(channels.size() == 5 + 2 + 5 + 3);
  }
}

TEST_CASE("the leaf/spine table routes a permutation's pairs as append_path does between their first and last hops",
          "[cluster]") {
  // RouteFinder::LeafSpineRoutes holds one fabric's routes in flat arrays,
  // for the estimate's pairwise steps: each pair's hops must be append_path's
  // without its first and last (the NPUs' links to their leaves), and the
  // table must refuse what append_path routes otherwise, or an NPU sending
  // or receiving twice.
  struct Pair {
    int from, to;
  };
  auto rotation = [](int npus, int shift) {
    std::vector<Pair> pairs;
    for (int r = 0; r < npus; ++r) pairs.push_back({r, (r + shift) % npus});
    return pairs;
  };
  // The table's hops and ends for `pairs`, or nothing when it refuses them.
  auto table_routes = [](const RouteFinder& finder, const std::vector<Pair>& pairs, int& kind) {
    std::vector<int> hops(2 * pairs.size(), -9);
    std::vector<std::size_t> ends(pairs.size(), 0);
    const std::ptrdiff_t n =
        finder.leaf_spine_routes().middles_of_permutation(pairs.data(), pairs.size(), ends.data(), hops.data(), kind);
    if (n < 0) return std::optional<std::pair<std::vector<int>, std::vector<std::size_t>>>{};
    hops.resize(static_cast<std::size_t>(n));
    return std::optional{std::make_pair(hops, ends)};
  };
  auto as_append_path = [](const RouteFinder& finder, const std::vector<Pair>& pairs) {
    std::vector<int> hops;
    std::vector<std::size_t> ends;
    for (const Pair& p : pairs) {
      const std::vector<int> path = finder.path(p.from, p.to);
      REQUIRE((path.size() == 2 || path.size() == 4));
      hops.insert(hops.end(), path.begin() + 1, path.end() - 1);
      ends.push_back(hops.size());
    }
    return std::make_pair(hops, ends);
  };
  SECTION("A2 servers: every shift that leaves the server, the same hops; inside a server, refused") {
    const TopologySpec spec = make_cluster(a2_cluster_layout(8, RoceFabricOptions{16, 4, 1.0}), load_profile(a2_profile()));
    const RouteFinder finder(spec);
    REQUIRE(finder.leaf_spine_routes().has(1));
    CHECK_FALSE(finder.leaf_spine_routes().has(0));  // (no fabric for SDMA traffic)
    std::set<int> spines_taken;
    for (int shift = 8; shift <= spec.npus - 8; ++shift) {
      const std::vector<Pair> pairs = rotation(spec.npus, shift);
      int kind = -1;
      const auto routed = table_routes(finder, pairs, kind);
      REQUIRE(routed.has_value());
      CHECK(kind == 1);
      const auto expected = as_append_path(finder, pairs);
      CHECK(routed->first == expected.first);
      CHECK(routed->second == expected.second);
      for (std::size_t h = 0; h < routed->first.size(); h += 2) {
        spines_taken.insert(spec.links[static_cast<std::size_t>(routed->first[h]) / 2].b);
      }
    }
    CHECK(spines_taken.size() == 4);
    int kind = -1;
    for (const int shift : {1, 7, spec.npus - 1}) CHECK_FALSE(table_routes(finder, rotation(spec.npus, shift), kind));
    std::vector<Pair> twice = rotation(spec.npus, 8);
    twice[3].to = twice[2].to;  // (NPU twice[2].to receives twice)
    CHECK_FALSE(table_routes(finder, twice, kind));
    twice = rotation(spec.npus, 8);
    twice[5].from = twice[4].from;
    twice[5].to = (twice[5].from + 20) % spec.npus;
    CHECK_FALSE(table_routes(finder, twice, kind));
  }
  SECTION("a spine listed for every leaf but linked to none: no table") {
    TopologySpec listed = make_cluster(a2_cluster_layout(4, RoceFabricOptions{8, 4, 1.0}), load_profile(a2_profile()));
    const int unlinked = listed.npus + listed.switches;
    ++listed.switches;
    for (std::vector<int>& spines : listed.fabrics[0].spines_of) {
      if (!spines.empty()) spines.insert(spines.begin() + 2, unlinked);
    }
    listed.fabrics[0].spines_of.resize(static_cast<std::size_t>(unlinked) + 1);
    const RouteFinder finder(listed);
    CHECK_FALSE(finder.leaf_spine_routes().has(1));
    int kind = -1;
    CHECK_FALSE(table_routes(finder, rotation(listed.npus, 8), kind));
  }
}

TEST_CASE("two servers sending through one 2:1 oversubscribed leaf uplink each get half of it", "[cluster][a2]") {
  // Four one-NPU servers, two NICs per leaf, one spine, oversubscription 2:
  // each leaf's single uplink carries 2 x NIC / 2 = one NIC's rate.
  ClusterLayout layout;
  layout.name = "uplink";
  layout.kind = "a2";
  for (int s = 0; s < 4; ++s) layout.servers.push_back(ServerLayout{"s" + std::to_string(s), 1, 0});
  layout.roce = RoceFabricOptions{2, 1, 2.0};
  const TopologySpec spec = make_cluster(layout, load_profile(a2_profile()));
  REQUIRE(spec.npus == 4);
  REQUIRE(spec.switches == 3);  // leaves 4, 5; spine 6
  Platform platform(spec);
  const Bandwidth nic = platform.channel(0, 4)->params().bandwidth;
  const Bandwidth uplink = platform.channel(4, 6)->params().bandwidth;
  CHECK(uplink.bytes_per_s == nic.bytes_per_s);
  REQUIRE(labels(platform.route(0, 2)) ==
          std::vector<std::string>{"roce npu0->switch0", "roce switch0->switch2", "roce switch2->switch1",
                                   "roce switch1->npu2"});
  Scheduler sched(platform);

  // Each flow ends with a notify to its receiver, timed to the wait's end:
  // the notify lands only after the data (in order on the link / queue pair).
  constexpr std::uint64_t kBytes = 8ULL << 20;
  auto run_flows = [&](const std::vector<std::pair<int, int>>& flows) {
    TaskGraph g;
    std::vector<std::pair<TaskId, TaskId>> ends;
    int notify = 0;
    for (const auto& [src, dst] : flows) {
      const ThreadId send = g.add_thread(src, "send");
      const TaskId copy = g.copy(send, {src, BufferKind::Input, 0}, {dst, BufferKind::Output, 0}, kBytes);
      g.record(send, dst, notify, "done");
      const TaskId wait = g.wait(g.add_thread(dst, "recv"), notify, "done");
      ends.push_back({copy, wait});
      ++notify;
    }
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    std::vector<Time> times;
    for (const auto& [copy, wait] : ends) times.push_back(r.timings[wait].end - r.timings[copy].start);
    return times;
  };

  const Time alone = run_flows({{0, 2}})[0];
  const std::vector<Time> shared = run_flows({{0, 2}, {1, 3}});     // both up leaf 0's uplink
  const std::vector<Time> opposite = run_flows({{0, 2}, {3, 1}});   // one up each leaf's uplink
  const double alone_gbps = gbps(kBytes, alone);
  const double shared0 = gbps(kBytes, shared[0]);
  const double shared1 = gbps(kBytes, shared[1]);
  INFO("alone " << alone_gbps << " GB/s; sharing the uplink " << shared0 << " and " << shared1 << " GB/s; opposite "
                << gbps(kBytes, opposite[0]) << " and " << gbps(kBytes, opposite[1]) << " GB/s; uplink "
                << uplink.gbps() << " GB/s");
  CHECK(alone_gbps == Approx(nic.gbps()).epsilon(0.03));
  CHECK(shared0 == Approx(uplink.gbps() / 2).epsilon(0.03));
  CHECK(shared1 == Approx(uplink.gbps() / 2).epsilon(0.03));
  CHECK(gbps(kBytes, opposite[0]) == Approx(alone_gbps).epsilon(0.001));
  CHECK(gbps(kBytes, opposite[1]) == Approx(alone_gbps).epsilon(0.001));
}

TEST_CASE("CloudMatrix384: 768 dies and a route across servers goes die - L1 - L2 - L1 - die", "[cluster][a3]") {
  const TopologySpec spec = load_topology(preset("cloudmatrix384"));
  REQUIRE(spec.npus == 768);
  CHECK(spec.npus_per_chip == 2);
  CHECK(spec.npus_per_server == 16);
  CHECK(spec.switches == 48 + 7 + 12 + 8);  // L1 per server, L2, RoCE leaves and spines
  CHECK(spec.server_of[767] == 47);
  CHECK(spec.sdma_domain_of[767] == 0);
  Platform platform(spec);
  CHECK_FALSE(platform.rdma_between(0, 767));
  CHECK(platform.same_chip(0, 1));
  CHECK_FALSE(platform.same_chip(1, 2));

  CHECK(labels(platform.route(0, 1)) == std::vector<std::string>{"sio npu0->npu1"});
  CHECK(labels(platform.route(0, 2)) == std::vector<std::string>{"hccs npu0->switch0", "hccs switch0->npu2"});
  const std::vector<Channel*>& across = platform.route(0, 16);
  REQUIRE(across.size() == 4);
  const std::string l2 = across[1]->label().substr(across[1]->label().find("->") + 2);
  const int l2_node = std::stoi(l2.substr(6)) + spec.npus;
  CHECK(l2_node >= 768 + 48);
  CHECK(l2_node < 768 + 48 + 7);
  CHECK(across[0]->label() == "hccs npu0->switch0");
  CHECK(across[1]->label() == "ub switch0->" + l2);
  CHECK(across[2]->label() == "ub " + l2 + "->switch1");
  CHECK(across[3]->label() == "hccs switch1->npu16");
  // One die's flow is limited by its own port, not by the L1-L2 link.
  CHECK(across[1]->params().bandwidth.bytes_per_s >= across[0]->params().bandwidth.bytes_per_s);
  const std::vector<Channel*>& far = platform.route(5, 700);
  REQUIRE(far.size() == 4);
  CHECK(far[0]->label() == "hccs npu5->switch0");
  CHECK(far[3]->label() == "hccs " + switch_name(spec, 768 + 700 / 16) + "->npu700");

  // calibration.md A3-3: across servers < 3% less bandwidth, < 1 us more latency.
  Scheduler sched(platform);
  auto write = [&](int src, int dst, std::uint64_t bytes) {
    TaskGraph g;
    const TaskId c = g.copy(g.add_thread(src, "Plane0"), {src, BufferKind::Input, 0}, {dst, BufferKind::Output, 0}, bytes);
    const RunResult r = sched.run(g);
    REQUIRE(r.failure.empty());
    return r.timings[c].end - r.timings[c].start;
  };
  for (const std::uint64_t bytes : {std::uint64_t{16384}, std::uint64_t{2097152}}) {
    const Time inside = write(0, 2, bytes);
    const Time between = write(0, 16, bytes);
    INFO(bytes << " B: inside a server " << inside.us() << " us, across servers " << between.us() << " us");
    CHECK(between > inside);
    CHECK(between.us() - inside.us() < 1.0);
    if (bytes == 2097152) CHECK(gbps(bytes, between) > 0.97 * gbps(bytes, inside));
  }
}

TEST_CASE("CloudMatrix384 x4: dies of different supernodes meet over RoCE and route lookups stay cheap",
          "[cluster][a3]") {
  const TopologySpec spec = load_topology(preset("cloudmatrix384x4"));
  REQUIRE(spec.npus == 4 * 768);
  CHECK(spec.switches == 4 * (48 + 7) + 48 + 8);
  CHECK(spec.sdma_domain_of[768] == 1);
  CHECK(spec.server_of[768] == 48);
  Platform platform(spec);
  CHECK(platform.rdma_between(0, 768));
  CHECK_FALSE(platform.rdma_between(0, 767));

  const std::vector<Channel*>& path = platform.route(0, 768);
  REQUIRE(path.size() == 4);
  for (const Channel* c : path) CHECK(c->label().rfind("roce ", 0) == 0);
  CHECK(path[0]->label() == "roce npu0->" + switch_name(spec, spec.fabrics[1].leaf_of[0]));
  CHECK(path[3]->label() == "roce " + switch_name(spec, spec.fabrics[1].leaf_of[768]) + "->npu768");
  // Inside a supernode, still UB.
  CHECK(platform.route(0, 767)[1]->label().rfind("ub ", 0) == 0);

  // Ring neighbours and NHR partners (distance 2^k both ways) of every rank.
  const auto start = std::chrono::steady_clock::now();
  std::set<std::pair<int, int>> pairs;
  const int n = spec.npus;
  for (int r = 0; r < n; ++r) {
    for (int d = 1; d < n; d *= 2) {
      pairs.insert({r, (r + d) % n});
      pairs.insert({r, (r - d + n) % n});
    }
  }
  std::size_t hops = 0;
  for (const auto& [a, b] : pairs) hops += platform.route(a, b).size();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(pairs.size() << " pairs looked up in " << seconds << " s");
  CHECK(hops >= pairs.size());
  CHECK(seconds < 2.0);
}

TEST_CASE("the cluster presets load and --servers changes their size", "[cluster][config]") {
  const TopologySpec a2 = load_topology(preset("a2-cluster"));
  CHECK(a2.npus == 128);
  CHECK(a2.switches == 2 + 8);
  CHECK(a2.npu.model == "910B");
  const TopologySpec over = load_topology(preset("a2-cluster-oversubscribed"));
  CHECK(over.npus == 128);
  // Oversubscribed uplinks carry half as much.
  auto uplink = [](const TopologySpec& s) {
    for (const LinkSpec& l : s.links) {
      if (l.kind == "roce" && l.a >= s.npus && l.b >= s.npus) return l.params.bandwidth.bytes_per_s;
    }
    return std::uint64_t{0};
  };
  REQUIRE(uplink(a2) > 0);
  CHECK(uplink(over) * 2 == Approx(uplink(a2)).epsilon(1e-9));
  CHECK(load_topology(preset("cloudmatrix384")).npus == 768);
  CHECK(load_topology(preset("cloudmatrix384x4")).npus == 3072);

  CHECK(load_topology(preset("a2-cluster"), std::nullopt, 2).npus == 16);
  CHECK(load_topology(preset("a2-cluster"), std::nullopt, 1024).npus == 8192);
  CHECK(load_topology(preset("cloudmatrix384"), std::nullopt, 2).npus == 32);
  const TopologySpec two_supernodes = load_topology(preset("cloudmatrix384x4"), std::nullopt, 96);
  CHECK(two_supernodes.npus == 2 * 768);
  CHECK(two_supernodes.sdma_domain_of.back() == 1);
  CHECK_THROWS_WITH(load_topology(preset("cloudmatrix384x4"), std::nullopt, 50),
                    Catch::Contains("option --servers") && Catch::Contains("supernodes of 48"));
  CHECK_THROWS_WITH(load_topology(preset("a2-server"), std::nullopt, 2),
                    Catch::Contains("option --servers") && Catch::Contains("\"cluster\""));
  CHECK_THROWS_AS(load_topology(preset("a2-cluster"), std::nullopt, 0), InputError);
  // A3 with an A2 profile: refused as the wrong product, before its missing SIO and UB links matter.
  CHECK_THROWS_WITH(load_topology(preset("cloudmatrix384"), a2_profile()),
                    Catch::Contains("option --profile") && Catch::Contains("910B") && Catch::Contains("A3 cluster"));
}

TEST_CASE("a bad cluster object is refused with the file and the JSON path", "[cluster][config]") {
  const std::string typo = write_topology("typo", R"({"kind": "a2", "servers": 2, "roce": {"spine": 4}})");
  CHECK_THROWS_WITH(load_topology(typo), Catch::Contains(typo) && Catch::Contains("$.cluster.roce") &&
                                             Catch::Contains("'spine'") && Catch::Contains("npus_per_leaf") &&
                                             Catch::Contains("oversubscription"));
  CHECK_THROWS_AS(load_topology(typo), InputError);

  const std::string under = write_topology("under", R"({"kind": "a2", "servers": 2, "roce": {"oversubscription": 0.5}})");
  CHECK_THROWS_WITH(load_topology(under), Catch::Contains("$.cluster.roce.oversubscription"));
  const std::string no_servers = write_topology("no_servers", R"({"kind": "a2"})");
  CHECK_THROWS_WITH(load_topology(no_servers), Catch::Contains("$.cluster.servers"));
  const std::string a2_ub = write_topology("a2_ub", R"({"kind": "a2", "servers": 2, "ub": {"l2_switches": 2}})");
  CHECK_THROWS_WITH(load_topology(a2_ub), Catch::Contains("$.cluster.ub"));
  const std::string bad_kind = write_topology("bad_kind", R"({"kind": "a5", "servers": 2})");
  CHECK_THROWS_WITH(load_topology(bad_kind), Catch::Contains("$.cluster.kind"));
  const std::string zero = write_topology("zero", R"({"kind": "a2", "servers": 0})");
  CHECK_THROWS_WITH(load_topology(zero), Catch::Contains("$.cluster.servers"));
  const std::string cluster_and_links =
      write_topology("cluster_and_links", R"({"kind": "a2", "servers": 2}, "npus": 16)");
  CHECK_THROWS_WITH(load_topology(cluster_and_links), Catch::Contains("'npus'"));
}

TEST_CASE("make_cluster refuses impossible layouts with a reason", "[cluster]") {
  const HardwareProfile a2 = load_profile(a2_profile());
  const HardwareProfile a3 = load_profile(a3_profile());
  CHECK_THROWS_WITH(make_cluster(a2_cluster_layout(0), a2), Catch::Contains("at least one server"));
  ClusterLayout odd = cloudmatrix_layout(1, 2);
  odd.servers[1].devices = 15;
  CHECK_THROWS_AS(make_cluster(odd, a3), std::invalid_argument);
  CHECK_THROWS_WITH(make_cluster(odd, a3), Catch::Contains("server 1") && Catch::Contains("15 dies"));
  ClusterLayout empty_server = a2_cluster_layout(2);
  empty_server.servers[0].devices = 0;
  CHECK_THROWS_WITH(make_cluster(empty_server, a2), Catch::Contains("no devices"));
  CHECK_THROWS_WITH(make_cluster(a2_cluster_layout(2, RoceFabricOptions{0, 8, 1.0}), a2),
                    Catch::Contains("npus_per_leaf"));
  CHECK_THROWS_WITH(make_cluster(a2_cluster_layout(2, RoceFabricOptions{8, 0, 1.0}), a2), Catch::Contains("spines"));
  CHECK_THROWS_WITH(make_cluster(a2_cluster_layout(2, RoceFabricOptions{8, 2, 0.5}), a2),
                    Catch::Contains("oversubscription"));
  CHECK_THROWS_WITH(make_cluster(cloudmatrix_layout(1, 2, {}, UbFabricOptions{0}), a3), Catch::Contains("l2_switches"));
  HardwareProfile no_roce = a2;
  no_roce.links.erase("roce");
  CHECK_THROWS_WITH(make_cluster(a2_cluster_layout(2), no_roce), Catch::Contains("\"roce\""));
  ClusterLayout kind = a2_cluster_layout(1);
  kind.kind = "a5";
  CHECK_THROWS_WITH(make_cluster(kind, a2), Catch::Contains("kind 'a5' is not its profile's product, \"a2\""));
  // A layout of the other product's kind is refused the same way.
  CHECK_THROWS_WITH(make_cluster(cloudmatrix_layout(1, 2), a2), Catch::Contains("kind 'a3' is not its profile's product"));
}

// Not run by default (hidden tag): the route lookup cost of an 8,192-NPU A2
// cluster, all ring and NHR pairs. `hcclsim_tests "[.bench]" -s` prints it.
TEST_CASE("route lookups of 8192 NPUs", "[.bench][cluster]") {
  const auto t0 = std::chrono::steady_clock::now();
  Platform platform(make_cluster(a2_cluster_layout(1024), load_profile(a2_profile())));
  const auto t1 = std::chrono::steady_clock::now();
  const int n = platform.npus();
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < n; ++r) {
    for (int d = 1; d < n; d *= 2) {
      pairs.insert({r, (r + d) % n});
      pairs.insert({r, (r - d + n) % n});
    }
  }
  const auto t2 = std::chrono::steady_clock::now();
  std::size_t hops = 0;
  for (const auto& [a, b] : pairs) hops += platform.route(a, b).size();
  const auto t3 = std::chrono::steady_clock::now();
  for (const auto& [a, b] : pairs) hops += platform.route(a, b).size();
  const auto t4 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  WARN("8192 NPUs: platform built in " << secs(t0, t1) << " s (" << platform.channels().size() << " channels); "
                                       << pairs.size() << " ring/NHR pairs: first lookup " << secs(t2, t3)
                                       << " s, cached " << secs(t3, t4) << " s; " << hops << " hops");
  CHECK(secs(t2, t3) < 2.0);
}
