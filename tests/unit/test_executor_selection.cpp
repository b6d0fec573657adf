// HCCL's selection tables (sim/executors/select_a2.cpp, select_a3.cpp;
// docs/executors.md) against the registry: every executor name a pick(...)
// can return is registered, and over a grid of contexts (product, op, size,
// ranks and servers, workflow mode, expansion, deterministic, buffer, dtype,
// HCCL_ALGO) every answer is either a registered executor that builds on
// that context, or a refusal naming an executor hcclsim does not model.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "sim/executors/level1.h"
#include "sim/executors/executor.h"
#include "sim/executors/selection.h"
#include "topologies/config.h"

using namespace hcclsim;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(HCCLSIM_SOURCE_DIR) + "/" + relative);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The string literals of the first argument of every `call(` in `text`
// (pick("A", ...), pick(c ? "A" : "B", ...)): up to the first ", plan" /
// ", flat(" (pick) or ", \"" after the names (unmodelled).
std::set<std::string> names_in_calls(const std::string& text, const std::string& call) {
  std::set<std::string> out;
  const std::regex literal("\"([A-Za-z0-9_]+)[^\"]*\"");
  for (std::size_t at = text.find(call + "("); at != std::string::npos; at = text.find(call + "(", at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_')) continue;
    std::size_t end = std::min(text.find(", plan", at), text.find(", flat(", at));
    if (call == "unmodelled") end = text.find(";", at);
    const std::string args = text.substr(at, end - at);
    for (auto it = std::sregex_iterator(args.begin(), args.end(), literal); it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      // unmodelled's second argument is a rule ("AIV across ..."), not an executor.
      const bool executor_like = name.find("Executor") != std::string::npos || name.rfind("Run", 0) == 0 ||
                                 name.find("Comm") != std::string::npos;
      if (executor_like || call == "pick") {
        out.insert(name);
      }
    }
  }
  return out;
}

std::set<std::string> picked_names() {
  std::set<std::string> names;
  for (const char* file : {"sim/executors/select_a2.cpp", "sim/executors/select_a3.cpp"}) {
    for (const std::string& n : names_in_calls(read_source(file), "pick")) names.insert(n);
  }
  return names;
}

struct Grid {
  HcclRules product;
  Hierarchy hierarchy;
};

}  // namespace

TEST_CASE("every executor the selection picks is registered", "[executors][selection]") {
  const std::set<std::string> names = picked_names();
  // The parse found the tables (a few names of each kind).
  REQUIRE(names.size() > 30);
  CHECK(names.count("AllReduceMeshOpbaseLoopExecutor") == 1);
  CHECK(names.count("AlignedAllGatherDoubleRingFor91093Executor") == 1);
  CHECK(names.count("RunAlltoAllDirectFullmesh") == 1);
  for (const std::string& name : names) {
    INFO("pick(\"" << name << "\") in select_a2.cpp / select_a3.cpp");
    CHECK(find_executor(name) != nullptr);
  }
  // And the names HCCL runs but hcclsim refuses are not registered under that name.
  for (const char* file : {"sim/executors/select_a2.cpp", "sim/executors/select_a3.cpp"}) {
    for (const std::string& name : names_in_calls(read_source(file), "unmodelled")) {
      INFO("unmodelled(\"" << name << "\") in " << file);
      if (names.count(name) == 0) CHECK(find_executor(name) == nullptr);
    }
  }
}

TEST_CASE("over a grid of contexts the selection names a registered executor that builds, or refuses an unmodelled one",
          "[executors][selection]") {
  std::vector<Grid> grids;
  for (const int per : {2, 4, 8}) grids.push_back({HcclRules::A2, Hierarchy{per, 1, 1}});
  grids.push_back({HcclRules::A2, Hierarchy{8, 2, 1}});
  for (const int per : {4, 16}) grids.push_back({HcclRules::A3, Hierarchy{per, 1, 1}});
  grids.push_back({HcclRules::A3, Hierarchy{16, 2, 1}});
  grids.push_back({HcclRules::A3, Hierarchy{16, 3, 1}});  // ranks not a power of two
  grids.push_back({HcclRules::A3, Hierarchy{16, 2, 2}});
  grids.push_back({HcclRules::A3, Hierarchy{16, 1, 3}});

  const std::vector<std::uint64_t> sizes = {2 * KiB, 40 * KiB, 100 * KiB, 200 * KiB, 300 * KiB, 600 * KiB,
                                            900 * KiB, 3 * MiB, 20 * MiB, 300 * MiB};
  std::map<std::string, int> chosen;
  std::set<std::string> refused;
  std::set<std::string> built;  // (executor, context) keys already built once
  int contexts = 0;
  for (const Grid& g : grids) {
    const int ranks = g.hierarchy.ranks();
    std::vector<AlgoRequest> algos(1);
    if (g.product == HcclRules::A2) {
      algos.push_back(AlgoRequest{});
      algos.back().level0 = Level0Algo::Ring;
      if (g.hierarchy.servers() > 1) {
        algos.push_back(AlgoRequest{});
        algos.back().pipeline = true;
      }
    } else {
      algos.push_back(AlgoRequest{});
      algos.back().level0 = Level0Algo::Ring;
    }
    for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::Broadcast,
                            CollOp::Reduce, CollOp::AlltoAll}) {
      for (const bool alltoallv : {false, true}) {
        if (alltoallv && op != CollOp::AlltoAll) continue;
        for (const std::uint64_t size : sizes) {
          for (const WorkflowMode mode : {WorkflowMode::OpBase, WorkflowMode::Graph}) {
            for (const Expansion expansion : {Expansion::Host, Expansion::AiCpu, Expansion::Aiv}) {
              for (const bool deterministic : {false, true}) {
                for (const std::uint64_t buffer : {1 * MiB, 200 * MiB}) {
                  for (const DataType dtype : {DataType::Fp32, DataType::Int64}) {
                    for (const AlgoRequest& algo : algos) {
                      CollectiveSpec spec;
                      spec.op = op;
                      spec.ranks = ranks;
                      spec.dtype = dtype;
                      spec.count = size / data_type_size(dtype);
                      spec.buffer_bytes = buffer;
                      ExecContext ctx;
                      ctx.hccl_rules = g.product;
                      ctx.hccl = testing::shipped_hccl_api(g.product);
                      ctx.mode = mode;
                      ctx.expansion = expansion;
                      ctx.deterministic = deterministic;
                      ctx.hierarchy = g.hierarchy;
                      ctx.inter_server_bandwidth = Bandwidth{25'000'000'000};
                      ctx.aiv_cores = 48;
                      ctx.algo = algo;
                      ++contexts;
                      ExecutorChoice choice;
                      try {
                        choice = select_executor(spec, ctx);
                      } catch (const std::invalid_argument& e) {
                        const std::string what = e.what();
                        // Either an unmodelled executor, or an HCCL_ALGO this product has no such form of.
                        const bool unmodelled = what.find("does not model that executor") != std::string::npos;
                        const bool bad_algo = algo.level0.has_value() || algo.pipeline;
                        if (!unmodelled && !bad_algo) FAIL_CHECK(what);
                        if (unmodelled) refused.insert(what.substr(10, what.find(' ', 10) - 10));
                        continue;
                      }
                      ++chosen[choice.executor];
                      const Executor* e = find_executor(choice.executor);
                      // (Messages built only on failure: the grid is large.)
                      auto where = [&] {
                        return choice.executor + " for " + coll_op_name(op) + " " + std::to_string(size) + " B on " +
                               std::to_string(ranks) + " ranks (" + choice.rule + ")";
                      };
                      if (e == nullptr) FAIL("not registered: " << where());
                      // Its support predicate accepts what the selection gave it.
                      const std::string why = e->refuses(spec, ctx);
                      if (!why.empty()) FAIL_CHECK(where() << " refuses: " << why);
                      // And it builds, once per executor and shape of context, on a small spec
                      // (a count within the buffer: no long loops).
                      // (The executor's name fixes the expansion; builds differ by ranks,
                      // servers, the level algorithms and the product.)
                      const std::string key = choice.executor + "/" + std::to_string(ranks) + "/" +
                                              std::to_string(g.hierarchy.servers()) + "/" +
                                              level0_algo_name(choice.plan.level0) +
                                              (choice.plan.pipeline ? "/pipe" : "") +
                                              "/" + level1_algo_name(choice.plan.level1) + "/" +
                                              level1_algo_name(choice.plan.level2) + (alltoallv ? "/v" : "");
                      if (built.insert(key).second) {
                        CollectiveSpec small = spec;
                        small.count = std::min<std::uint64_t>(spec.count, 4 * KiB / data_type_size(dtype));
                        small.count = std::max<std::uint64_t>(small.count, static_cast<std::uint64_t>(ranks));
                        if (alltoallv) {
                          small.alltoallv_counts.assign(static_cast<std::size_t>(ranks),
                                                        std::vector<std::uint64_t>(static_cast<std::size_t>(ranks), 0));
                          for (int r = 0; r < ranks; ++r)
                            for (int j = 0; j < ranks; ++j) {
                              small.alltoallv_counts[r][j] = 1 + static_cast<std::uint64_t>((r + j) % 3);
                            }
                        }
                        if (e->refuses(small, ctx).empty()) {
                          INFO(where());
                          TaskGraph graph;
                          CHECK_NOTHROW(graph = build_executor(small, ctx, choice));
                          CHECK(!graph.tasks().empty());
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  // The grid reaches every executor a pick(...) names.
  std::ostringstream seen;
  for (const auto& [name, n] : chosen) seen << name << " x" << n << "\n";
  for (const std::string& r : refused) seen << "refused: " << r << "\n";
  INFO(contexts << " contexts; chosen:\n" << seen.str());
  CHECK(!refused.empty());
  for (const std::string& name : picked_names()) {
    INFO("never chosen: " << name);
    CHECK(chosen.count(name) == 1);
  }
}

// ---- HCCL's per-product builds of an executor, as profile data ----

TEST_CASE("the small-count AllReduce's template and the AlltoAll full mesh's reach come from the profile, not the product",
          "[executors][selection][profile]") {
  ExecContext ctx;
  ctx.hccl_rules = HcclRules::A2;  // the same product both ways: only the profile's traits differ
  ctx.hierarchy = Hierarchy{8, 1, 1};
  CollectiveSpec all_reduce;
  all_reduce.op = CollOp::AllReduce;
  all_reduce.ranks = 8;
  all_reduce.dtype = DataType::Fp32;
  all_reduce.count = 16 * MiB / 4;  // beyond the buffer: one shot cannot take it
  all_reduce.buffer_bytes = MiB;
  const Executor* small_count = find_executor("AllReduceMeshSmallCountExecutor");
  REQUIRE(small_count != nullptr);
  CHECK_FALSE(small_count->refuses(all_reduce, ctx).empty());
  ctx.hccl.small_count_all_reduce_hd = true;  // HD_OPTIM loops like a level-1 form
  CHECK(small_count->refuses(all_reduce, ctx).empty());

  ctx.hierarchy = Hierarchy{8, 2, 1};
  CollectiveSpec alltoall;
  alltoall.op = CollOp::AlltoAll;
  alltoall.ranks = 16;
  alltoall.dtype = DataType::Fp32;
  alltoall.count = 1024;
  alltoall.buffer_bytes = 200 * MiB;
  const Executor* fullmesh = find_executor("RunAlltoAllDirectFullmesh");
  REQUIRE(fullmesh != nullptr);
  CHECK_FALSE(fullmesh->refuses(alltoall, ctx).empty());
  ctx.hccl.alltoall_fullmesh_across_servers = true;
  CHECK(fullmesh->refuses(alltoall, ctx).empty());
}

TEST_CASE("the shipped profiles state their product's executor builds, and a bad one is named by its JSON path",
          "[executors][profile]") {
  const HardwareProfile a2 = load_profile(testing::source_file("configs/profiles/a2-910b.json"));
  const HardwareProfile a3 = load_profile(testing::source_file("configs/profiles/a3-910c.json"));
  CHECK_FALSE(a2.npu.hccl_api.small_count_all_reduce_hd);
  CHECK_FALSE(a2.npu.hccl_api.alltoall_fullmesh_across_servers);
  CHECK(a3.npu.hccl_api.small_count_all_reduce_hd);
  CHECK(a3.npu.hccl_api.alltoall_fullmesh_across_servers);
  // Left out, the product's defaults apply (the reader's one place that knows them).
  CHECK(hccl_api_defaults(HcclRules::A3).small_count_all_reduce_hd);
  CHECK_FALSE(hccl_api_defaults(HcclRules::A2).small_count_all_reduce_hd);
  std::ifstream in(testing::source_file("configs/profiles/a2-910b.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["npu"]["hccl_api"]["small_count_all_reduce"] = "ring";
  CHECK_THROWS_WITH(read_profile(doc, "p.json"),
                    Catch::Contains("p.json") && Catch::Contains("$.npu.hccl_api.small_count_all_reduce"));
}

// ---- HCCL's selection thresholds, as profile data ----

TEST_CASE("a selection threshold comes from the profile: moving it moves the executor's boundary and the rule's words",
          "[executors][selection][profile]") {
  std::ifstream in(testing::source_file("configs/profiles/a2-910b.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  CollectiveSpec spec;
  spec.op = CollOp::AllReduce;
  spec.ranks = 8;
  spec.dtype = DataType::Fp32;
  spec.count = 384 * KiB / 4;  // between the shipped 256 KiB and the 512 KiB tried below
  spec.buffer_bytes = 200 * MiB;
  ExecContext ctx;
  ctx.hccl_rules = HcclRules::A2;
  ctx.hierarchy = Hierarchy{8, 1, 1};
  ctx.hccl = read_profile(doc, "a2.json").npu.hccl_api;
  const ExecutorChoice shipped = select_executor(spec, ctx);
  CHECK(shipped.executor == "AllReduceMeshOpbaseLoopExecutor");
  CHECK(shipped.rule == "op-base, one server, > 256 KiB");

  doc["npu"]["hccl_selection"]["small_count_opbase"] = "512KiB";
  ctx.hccl = read_profile(doc, "a2.json").npu.hccl_api;
  const ExecutorChoice moved = select_executor(spec, ctx);
  CHECK(moved.executor == "AllReduceMeshSmallCountExecutor");
  CHECK(moved.rule == "op-base, one server, <= 512 KiB (HCCL_SMALL_COUNT_256_KB)");
  spec.count = 512 * KiB / 4 + 1;  // one element past it
  CHECK(select_executor(spec, ctx).executor == "AllReduceMeshOpbaseLoopExecutor");
}

TEST_CASE("a profile without a threshold its product's rules need, or with a threshold that is not a size, is refused by name",
          "[executors][selection][profile]") {
  std::ifstream in(testing::source_file("configs/profiles/a3-910c.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  nlohmann::json bad = doc;
  bad["npu"]["hccl_selection"]["mid_count_pods"] = "lots";
  CHECK_THROWS_WITH(read_profile(bad, "p.json"), Catch::Contains("p.json") && Catch::Contains("$.npu.hccl_selection.mid_count_pods"));
  bad = doc;
  bad["npu"].erase("hccl_selection");
  CHECK_THROWS_WITH(read_profile(bad, "p.json"), Catch::Contains("p.json") && Catch::Contains("hccl_selection"));

  doc["npu"]["hccl_selection"].erase("small_count_per_rank");
  ExecContext ctx;
  ctx.hccl_rules = HcclRules::A3;
  ctx.hierarchy = Hierarchy{16, 1, 1};
  ctx.hccl = read_profile(doc, "a3.json").npu.hccl_api;
  CollectiveSpec spec;
  spec.op = CollOp::AllGather;  // a rule that does not use the missing size still finds it missing
  spec.ranks = 16;
  spec.dtype = DataType::Fp32;
  spec.count = 1024;
  spec.buffer_bytes = 200 * MiB;
  CHECK_THROWS_WITH(select_executor(spec, ctx), Catch::Contains("a3.json at $.npu.hccl_selection") && Catch::Contains("'small_count_per_rank'"));
}

TEST_CASE("every selection threshold a shipped profile holds is listed in docs/executors.md with its value",
          "[executors][selection][profile][docs]") {
  std::ifstream doc_in(testing::source_file("docs/executors.md"));
  std::stringstream doc;
  doc << doc_in.rdbuf();
  const std::string text = doc.str();
  // The tables' rows: | `name` | 910B | 910C | where |; a profile's value stands in its product's column.
  auto cell_of = [&](const std::string& name, int column) {
    const std::size_t row = text.find("| `" + name + "` |");
    REQUIRE(row != std::string::npos);
    std::stringstream line(text.substr(row, text.find('\n', row) - row));
    std::string cell;
    for (int i = 0; i <= column; ++i) std::getline(line, cell, '|');
    return cell;
  };
  for (const auto& [file, column] : {std::pair{"configs/profiles/a2-910b.json", 2}, std::pair{"configs/profiles/a3-910c.json", 3}}) {
    const HcclApiLimits api = load_profile(testing::source_file(file)).npu.hccl_api;
    REQUIRE(api.selection_sizes.size() >= 15);
    for (const auto& [name, bytes] : api.selection_sizes) {
      INFO(file << ": " << name);
      CHECK(cell_of(name, column) == " " + selection::size_words(bytes) + " ");  // the words the rules quote it in
    }
    REQUIRE(!api.selection_ranks.empty());
    for (const auto& [name, ranks] : api.selection_ranks) {
      INFO(file << ": " << name);
      CHECK(cell_of(name, column) == " " + std::to_string(ranks) + " ");
    }
  }
}

