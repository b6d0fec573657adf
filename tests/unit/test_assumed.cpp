// Which assumed profile constants a row's tasks used (issue 40, item 6): the
// profile reader's rule, the mapping from tasks to constants, and the rows.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "sim/perf/perf.h"
#include "sim/report/row_writer.h"
#include "sim/used_constants.h"
#include "topologies/config.h"

using namespace hcclsim;
using hcclsim::testing::source_file;

namespace {

bool lists(const std::vector<std::string>& paths, const std::string& path) {
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

PerfRequest one_size(CollOp op, int ranks, std::uint64_t size, const TopologySpec& spec) {
  PerfRequest req;
  req.op = op;
  req.ranks = ranks;
  req.sizes = {size};
  req.buffer_bytes = spec.npu.hccl_buffer_bytes;
  return req;
}

// A copy of the A2 profile with `edit` applied, in a temporary file.
std::string edited_a2_profile(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json doc;
  std::ifstream(source_file("configs/profiles/a2-910b.json")) >> doc;
  edit(doc);
  const std::string file = (std::filesystem::temp_directory_path() / "hcclsim-test-assumed-a2.json").string();
  std::ofstream(file) << doc.dump(2);
  return file;
}

}  // namespace

TEST_CASE("the profile reader keeps which constants are assumed, by their source") {
  const HardwareProfile a2 = load_profile(source_file("configs/profiles/a2-910b.json"));
  CHECK(std::is_sorted(a2.assumed.begin(), a2.assumed.end()));
  SECTION("a source starting with 'assumed' marks its constant") {
    for (const char* path : {"npu.stream.task_dispatch", "npu.stream.op_launch", "npu.stream.host_sync",
                             "npu.aiv.flag_write", "npu.aiv.flag_poll",
                             "npu.cores.aiv_bandwidth", "links.roce.latency", "links.hccs.segment"}) {
      INFO(path);
      CHECK(lists(a2.assumed, path));
    }
  }
  SECTION("a measured, fitted or cited constant is not assumed") {
    for (const char* path : {"npu.sdma.copy_bandwidth", "npu.sdma.task_fixed", "npu.one_sided.sdma_issue",
                             "links.hccs.bandwidth", "links.hccs.latency", "npu.notify.wait", "npu.rdma.post",
                             // set by the A2 MoE rows (A2-MoE-1)
                             "npu.aiv.core_bandwidth", "npu.aiv.copy_fixed", "npu.aiv.remote_bandwidth",
                             // set by the A2 pretraining rows (A2-STEP-1)
                             "npu.cores.aic_fp16_rate"}) {
      INFO(path);
      CHECK_FALSE(lists(a2.assumed, path));
    }
  }
  SECTION("plain values: assumed only for the fields whose descriptions say so") {
    CHECK(lists(a2.assumed, "npu.sdma.engines"));
    CHECK(lists(a2.assumed, "npu.local_memory.latency"));
    CHECK_FALSE(lists(a2.assumed, "npu.cores.aic"));
    CHECK_FALSE(lists(a2.assumed, "npu.local_memory.segment"));
    CHECK_FALSE(lists(a2.assumed, "npu.hccl_buffer"));
  }
  SECTION("the topology carries them to the reports") {
    const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
    CHECK(spec.assumed_constants == a2.assumed);
    CHECK(spec.profile_file == a2.file);
  }
}

TEST_CASE("a constant's path names the profile field it comes from") {
  UsedConstants used;
  used.add(Constant::SdmaTaskFixed);
  used.add(LinkKind::Hccs, LinkConstant::WriteBandwidth);
  used.add(LinkKind::Roce, LinkConstant::Latency);
  used.add(LinkKind::Memory, LinkConstant::Bandwidth);
  CHECK(used.paths() == std::vector<std::string>{"links.hccs.write_bandwidth", "links.roce.latency",
                                                 "npu.local_memory.bandwidth", "npu.sdma.task_fixed"});
}

TEST_CASE("a task pays the constants the timing model charges it") {
  const auto paths_of = [](const ChargedTask& t) {
    UsedConstants used;
    add_charged_constants(t, used);
    return used.paths();
  };
  SECTION("an SDMA write over HCCS: fixed cost, engine rate, the link's rates, HCCL's transport rate and latency") {
    ChargedTask t;
    t.kind = ExecKind::Transfer;
    t.moves_bytes = true;
    t.path_kinds = 1u << static_cast<unsigned>(LinkKind::Hccs);
    t.write_capped_kinds = t.path_kinds;
    CHECK(paths_of(t) == std::vector<std::string>{"links.hccs.bandwidth", "links.hccs.latency",
                                                  "links.hccs.transport_rate", "links.hccs.write_bandwidth",
                                                  "npu.sdma.copy_bandwidth", "npu.sdma.engines", "npu.sdma.task_fixed"});
    t.read = true;
    t.write_capped_kinds = 0;
    t.reduce = true;
    CHECK(paths_of(t) == std::vector<std::string>{"links.hccs.bandwidth", "links.hccs.latency",
                                                  "links.hccs.transport_rate", "npu.sdma.engines",
                                                  "npu.sdma.read_fixed", "npu.sdma.reduce_bandwidth"});
  }
  SECTION("an AIV move pays no SDMA transport rate") {
    ChargedTask t;
    t.kind = ExecKind::Transfer;
    t.aiv = true;
    t.cores = 1;
    t.moves_bytes = true;
    t.path_kinds = 1u << static_cast<unsigned>(LinkKind::Hccs);
    const std::vector<std::string> paths = paths_of(t);
    CHECK(std::find(paths.begin(), paths.end(), "links.hccs.transport_rate") == paths.end());
    CHECK(std::find(paths.begin(), paths.end(), "links.hccs.bandwidth") != paths.end());
  }
  SECTION("an RDMA notify: the post, its 4-byte write and the RoCE path") {
    ChargedTask t;
    t.kind = ExecKind::RdmaNotify;
    t.moves_bytes = true;
    t.path_kinds = 1u << static_cast<unsigned>(LinkKind::Roce);
    CHECK(paths_of(t) == std::vector<std::string>{"links.roce.bandwidth", "links.roce.latency", "npu.rdma.notify_write",
                                                  "npu.rdma.post"});
  }
  SECTION("records, waits and flags") {
    ChargedTask t;
    t.kind = ExecKind::NotifyRecord;
    t.remote = true;
    CHECK(paths_of(t) == std::vector<std::string>{"npu.notify.record_remote"});
    t.kind = ExecKind::FlagWait;
    CHECK(paths_of(t) == std::vector<std::string>{"npu.aiv.flag_poll"});
  }
}

TEST_CASE("a perf row of an A2 AllReduce on one server lists the assumed constants its tasks used") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  const PerfRequest req = one_size(CollOp::AllReduce, 8, 1 << 20, platform.spec());
  const std::vector<PerfRow> rows = run_perf(platform, req);
  REQUIRE(rows.size() == 1);
  const std::vector<std::string>& assumed = rows[0].assumed;
  CHECK(std::is_sorted(assumed.begin(), assumed.end()));
  CHECK(lists(assumed, "npu.stream.task_dispatch"));
  CHECK(lists(assumed, "npu.sdma.engines"));
  CHECK_FALSE(lists(assumed, "npu.sdma.copy_bandwidth"));  // measured (A2-3)
  CHECK_FALSE(lists(assumed, "links.roce.latency"));       // one server: no RoCE
  CHECK_FALSE(lists(assumed, "npu.stream.host_sync"));     // no host synchronisation in a collective
  for (const std::string& path : assumed) {
    INFO(path);
    CHECK(lists(platform.spec().assumed_constants, path));
    CHECK(path.rfind("npu.aiv.", 0) != 0);  // HCCL's default expansion moves data with SDMA
  }
  // The estimate of the same row lists the same.
  const std::vector<PerfRow> estimated = estimate_perf(platform.spec(), req);
  REQUIRE(estimated.size() == 1);
  CHECK(estimated[0].assumed == assumed);
  // The JSON row and the table say it; hccl_test's layout does not.
  CHECK(perf_row_json(rows[0])["assumed"] == nlohmann::json(assumed));
  const std::string table = format_rows(rows, RowFormat::Table, "AllReduce", {}, "a2.json");
  CHECK_THAT(table, Catch::Contains("\n# assumed constants used: ") && Catch::Contains("npu.stream.task_dispatch") &&
                        Catch::EndsWith("(their source in a2.json says 'assumed')\n"));
  CHECK_THAT(format_rows(rows, RowFormat::HcclTest), !Catch::Contains("assumed"));
}

TEST_CASE("an AIV run lists the npu.aiv assumed constants but a host-expansion run does not") {
  Platform platform(load_topology(source_file("configs/topologies/a2-server.json")));
  PerfRequest req = one_size(CollOp::AllReduce, 8, 128 * 1024, platform.spec());
  req.expansion = Expansion::Aiv;
  const std::vector<PerfRow> aiv = run_perf(platform, req);
  REQUIRE(aiv.size() == 1);
  INFO(aiv[0].executor);
  for (const char* path : {"npu.aiv.flag_write", "npu.aiv.flag_poll"}) {
    INFO(path);
    CHECK(lists(aiv[0].assumed, path));
  }
  // The A2 MoE rows set these on A2 (A2-MoE-1): used, but no longer assumed.
  for (const char* path : {"npu.aiv.copy_fixed", "npu.aiv.core_bandwidth"}) {
    INFO(path);
    CHECK_FALSE(lists(aiv[0].assumed, path));
  }
  CHECK_FALSE(lists(aiv[0].assumed, "npu.sdma.engines"));  // no SDMA task
  req.expansion = Expansion::Host;
  const std::vector<PerfRow> host = run_perf(platform, req);
  REQUIRE(host.size() == 1);
  for (const std::string& path : host[0].assumed) {
    INFO(path);
    CHECK(path.rfind("npu.aiv.", 0) != 0);
  }
}

TEST_CASE("an estimate too large to build its graph lists what its executor can pay, a superset") {
  // Two A2 servers: the graph-derived list, then the bound the estimate gives
  // when the graph would be too large to build (forced here by a limit of 0).
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-cluster.json"), std::nullopt, 2);
  PerfRequest req = one_size(CollOp::AllReduce, 16, 1 << 30, spec);
  const std::vector<std::string> built = estimate_perf(spec, req).front().assumed;
  req.assumed_graph_max_tasks = 0;
  const std::vector<std::string> bound = estimate_perf(spec, req).front().assumed;
  CHECK(std::is_sorted(bound.begin(), bound.end()));
  for (const std::string& path : built) {
    INFO(path);
    CHECK(lists(bound, path));
  }
  CHECK(lists(bound, "links.roce.latency"));
  // Never the step's, the MoE kernels' or the AIV cores' (an SDMA executor).
  for (const std::string& path : bound) {
    INFO(path);
    CHECK(path.rfind("npu.memory.", 0) != 0);
    CHECK(path.rfind("npu.aiv.", 0) != 0);
    CHECK(path.rfind("npu.one_sided.", 0) != 0);
    CHECK(path != "npu.stream.host_sync");
    CHECK(lists(spec.assumed_constants, path));
  }
  CHECK(bound.size() < spec.assumed_constants.size());
}

TEST_CASE("a constant whose source becomes a measurement leaves the list") {
  const std::string measured = edited_a2_profile([](nlohmann::json& doc) {
    doc["npu"]["stream"]["task_dispatch"]["source"] = "measurement X-1: the gap between two tasks of one stream";
  });
  const HardwareProfile profile = load_profile(measured);
  CHECK_FALSE(lists(profile.assumed, "npu.stream.task_dispatch"));
  CHECK(lists(profile.assumed, "npu.stream.host_sync"));

  Platform platform(load_topology(source_file("configs/topologies/a2-server.json"), measured));
  const std::vector<PerfRow> rows = run_perf(platform, one_size(CollOp::AllReduce, 8, 1 << 20, platform.spec()));
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(lists(rows[0].assumed, "npu.stream.task_dispatch"));
  CHECK(lists(rows[0].assumed, "npu.sdma.engines"));
  std::filesystem::remove(measured);
}
