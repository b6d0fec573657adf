// Chakra execution traces (sim/step/chakra, plan_chakra, export_chakra): the
// wire format read and written, an ASTRA-sim example read as ASTRA-sim reads
// it, a step's round trip through Chakra, and malformed traces refused.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "sim/perf/perf.h"
#include "sim/step/chakra.h"
#include "sim/step/step.h"
#include "tests/unit/fixtures.h"
#include "topologies/config.h"

using namespace hcclsim;
using hcclsim::testing::source_file;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TopologySpec a2_server() { return load_topology(source_file("configs/topologies/a2-server.json")); }

ChakraNode comp(std::uint64_t id, std::uint64_t us, std::vector<std::uint64_t> deps = {}) {
  ChakraNode n;
  n.id = id;
  n.name = "comp" + std::to_string(id);
  n.type = static_cast<int>(ChakraNodeType::Comp);
  n.duration_micros = us;
  n.data_deps = std::move(deps);
  return n;
}

ChakraNode coll(std::uint64_t id, ChakraCollective type, std::int64_t bytes, std::vector<std::uint64_t> deps = {}) {
  ChakraNode n;
  n.id = id;
  n.name = "coll" + std::to_string(id);
  n.type = static_cast<int>(ChakraNodeType::CommColl);
  n.ints["comm_type"] = static_cast<int>(type);
  n.ints["comm_size"] = bytes;
  n.data_deps = std::move(deps);
  return n;
}

}  // namespace

TEST_CASE("chakra: an ASTRA-sim example trace reads as its one AllReduce of 1 MiB", "[chakra]") {
  const std::string file = source_file("tests/data/chakra/astra-sim-all_reduce-8npus-1MB/all_reduce.1.et");
  const ChakraTrace t = decode_chakra(bytes_of(file), file);
  CHECK(t.version == "0.0.4");
  REQUIRE(t.nodes.size() == 1);
  CHECK(t.nodes[0].name == "all_reduce_8npus_1MB");
  CHECK(t.nodes[0].type == static_cast<int>(ChakraNodeType::CommColl));
  CHECK(t.nodes[0].ints.at("comm_type") == static_cast<int>(ChakraCollective::AllReduce));
  CHECK(t.nodes[0].ints.at("comm_size") == 1048576);
  CHECK(t.nodes[0].ints.at("is_cpu_op") == 0);
}

TEST_CASE("chakra: a trace written and read back is the same trace", "[chakra]") {
  ChakraTrace t;
  t.version = "0.0.4";
  t.nodes.push_back(comp(3, 12));
  ChakraNode c = coll(7, ChakraCollective::AllGather, 1 << 20, {3});
  c.ctrl_deps = {3};
  c.strings["pg_name"] = "2";
  c.ints["comm_tag"] = -5;   // a negative int64 takes ten bytes on the wire
  t.nodes.push_back(c);
  const ChakraTrace back = decode_chakra(encode_chakra(t), "mem");
  REQUIRE(back.nodes.size() == 2);
  CHECK(back.nodes[0].id == 3);
  CHECK(back.nodes[0].duration_micros == 12);
  CHECK(back.nodes[1].data_deps == std::vector<std::uint64_t>{3});
  CHECK(back.nodes[1].ctrl_deps == std::vector<std::uint64_t>{3});
  CHECK(back.nodes[1].ints.at("comm_tag") == -5);
  CHECK(back.nodes[1].ints.at("comm_size") == (1 << 20));
  CHECK(back.nodes[1].strings.at("pg_name") == "2");
}

TEST_CASE("chakra: a truncated trace is refused naming the file and node", "[chakra]") {
  ChakraTrace t;
  t.nodes.push_back(comp(1, 5));
  std::string bytes = encode_chakra(t);
  bytes.pop_back();
  CHECK_THROWS_WITH(decode_chakra(bytes, "x.0.et"), Catch::Contains("x.0.et") && Catch::Contains("node 0"));
  CHECK_THROWS_AS(decode_chakra("", "x.0.et"), InputError);
}

TEST_CASE("chakra: compute nodes follow their dependencies and a collective waits for every member", "[chakra]") {
  // Rank 0 computes 10 us then AllReduces; rank 1 computes 30 us first: the
  // AllReduce starts at 30 us on both and takes what perf says it takes.
  const TopologySpec spec = a2_server();
  ChakraWorkload w;
  w.dir = "mem";
  w.ranks.resize(2);
  w.ranks[0].nodes = {comp(1, 10), coll(2, ChakraCollective::AllReduce, 1 << 20, {1}), comp(3, 5, {2})};
  w.ranks[1].nodes = {comp(1, 30), coll(2, ChakraCollective::AllReduce, 1 << 20, {1})};
  const StepResult r = run_step_estimate(*plan_chakra(spec, w));
  PerfRequest pr;
  pr.op = CollOp::AllReduce;
  pr.ranks = 2;
  pr.dtype = DataType::Bf16;
  pr.check = false;
  pr.buffer_bytes = spec.npu.hccl_buffer_bytes;
  pr.sizes = {1 << 20};
  const double ar_us = static_cast<double>(estimate_perf(spec, pr).front().time.ps) / 1e6;
  CHECK(r.step_time_us == Approx(30 + ar_us + 5).epsilon(1e-9));
}

TEST_CASE("chakra: collectives out of order across ranks are refused by node", "[chakra]") {
  const TopologySpec spec = a2_server();
  ChakraWorkload w;
  w.dir = "mem";
  w.ranks.resize(2);
  w.ranks[0].file = "a.0.et";
  w.ranks[1].file = "a.1.et";
  w.ranks[0].nodes = {coll(1, ChakraCollective::AllReduce, 4096)};
  w.ranks[1].nodes = {coll(1, ChakraCollective::AllGather, 4096)};
  CHECK_THROWS_WITH(plan_chakra(spec, w), Catch::Contains("does not match") && Catch::Contains("comm_type"));
  w.ranks[1].nodes = {comp(1, 1, {9})};
  CHECK_THROWS_WITH(plan_chakra(spec, w), Catch::Contains("a.1.et") && Catch::Contains("node id 9"));
  w.ranks[1].nodes = {};
  CHECK_THROWS_WITH(plan_chakra(spec, w), Catch::Contains("a.0.et") && Catch::Contains("ranks 1"));
  // A comm_size of 2^50 bytes would loop millions of times over the HCCL buffer.
  w.ranks[0].nodes = {coll(1, ChakraCollective::AllReduce, std::int64_t{1} << 50)};
  w.ranks[1].nodes = {coll(1, ChakraCollective::AllReduce, std::int64_t{1} << 50)};
  CHECK_THROWS_WITH(plan_chakra(spec, w), Catch::Contains("a.0.et") && Catch::Contains("comm_size 1125899906842624"));
}

TEST_CASE("chakra: a step exported and run again as Chakra traces keeps its step time", "[chakra]") {
  // Whole-microsecond compute so that the export (durations in us) is exact.
  const TopologySpec spec = a2_server();
  StepRequest req;
  req.model = read_model_config(source_file("configs/models/tiny-llama.json"));
  req.layout = parse_layout("tp=2,pp=2,dp=2");
  req.batch = parse_batch("global=8,micro=1,seq=512");
  req.compute.add("*", "*", 10.0);
  const auto plan = plan_step(spec, req);
  const StepResult direct = run_step_estimate(*plan);
  ChakraWorkload w = export_chakra(*plan);
  w.dir = "mem";
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {   // through the wire format
    w.ranks[r] = decode_chakra(encode_chakra(w.ranks[r]), "step." + std::to_string(r) + ".et");
  }
  const StepResult again = run_step_estimate(*plan_chakra(spec, w));
  CHECK(again.step_time_us == Approx(direct.step_time_us).epsilon(1e-12));
  CHECK(again.compute_us == Approx(direct.compute_us).epsilon(1e-12));
}

TEST_CASE("chakra: a collective of a one-rank group takes no time in either back end", "[chakra]") {
  const TopologySpec spec = a2_server();
  ChakraWorkload w;
  w.dir = "mem";
  w.groups = {{"7", {0}}, {"8", {1}}};
  w.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    ChakraNode c = coll(2, ChakraCollective::AllReduce, 4096, {1});
    c.strings["pg_name"] = r == 0 ? "7" : "8";
    w.ranks[static_cast<std::size_t>(r)].nodes = {comp(1, 10), c, comp(3, 4, {2})};
  }
  const auto plan = plan_chakra(spec, w);
  const StepResult est = run_step_estimate(*plan);
  CHECK(est.step_time_us == Approx(14.0).epsilon(1e-12));
  CHECK(est.groups.empty());
  Platform platform(spec);
  const StepResult det = run_step_detailed(platform, *plan);
  CHECK(det.groups.empty());
  CHECK(det.compute_us == Approx(14.0).epsilon(1e-12));
}

