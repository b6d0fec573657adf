// hcclsim recommend (sim/report/recommend.h): the candidates per topology,
// the gain formula, ties keeping HCCL's default, the per-process choice
// summed over sizes, and on the A2 server a best that is never slower than
// the default and that perf reproduces when given the recommended setting.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/report/recommend.h"
#include "topologies/config.h"

#include "estimate_requests.h"
#include "fixtures.h"

using namespace hcclsim;

namespace {
// The API records of the two shipped profiles as far as recommend reads them.
const HcclApiLimits kA2Api{};   // expanding_engine HOST
HcclApiLimits a3_api() {
  HcclApiLimits api;
  api.expanding_engine = "AICPU";
  return api;
}
}  // namespace
using namespace hcclsim::testing;

namespace {

constexpr std::uint64_t MiB = 1024 * 1024;

RecommendRunner estimate_runner(const TopologySpec& spec) {
  return [&spec](const PerfRequest& req, bool) { return estimate_perf(spec, req); };
}

// An op whose candidates (of `candidates`) took `times[c]` at each size.
RecommendOp synthetic_op(CollOp op, const std::vector<std::uint64_t>& sizes,
                         const std::vector<std::vector<std::optional<Time>>>& times) {
  RecommendOp r;
  r.op = op;
  r.model = "estimate";
  r.sizes = sizes;
  r.times = times;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    RecommendRow row;
    row.op = coll_op_name(op);
    row.data_size = sizes[s];
    row.ranks = 8;
    row.by_default.time = *times[0][s];
    row.by_default.is_default = true;
    row.best = row.by_default;
    r.rows.push_back(row);
  }
  return r;
}

}  // namespace

TEST_CASE("recommend: the gain is default over best minus one in percent", "[recommend]") {
  CHECK(gain_pct(Time{150}, Time{100}) == Approx(50.0));
  CHECK(gain_pct(Time{100}, Time{100}) == 0.0);
  CHECK(gain_pct(Time{100}, Time{400}) == Approx(-75.0));
  CHECK(gain_pct(Time{100}, Time{0}) == 0.0);  // no division by zero
}

TEST_CASE("recommend: the candidates follow the levels and the product", "[recommend]") {
  const Hierarchy server{8, 1, 1};
  const std::vector<RecommendCandidate> a2 = recommend_candidates(server, kA2Api);
  REQUIRE(a2.size() == 3 * 2);  // level0 NA | fullmesh | ring x host | aiv
  CHECK(a2[0].is_default);
  CHECK(a2[0].algo == "level0:NA");
  CHECK(a2[0].expansion == Expansion::Host);
  CHECK(!a2[0].request.level0);
  for (std::size_t i = 1; i < a2.size(); ++i) CHECK(!a2[i].is_default);
  for (const RecommendCandidate& c : a2) CHECK(c.algo.find("level1") == std::string::npos);

  const Hierarchy cluster{8, 4, 1};
  const std::vector<RecommendCandidate> a2c = recommend_candidates(cluster, kA2Api);
  CHECK(a2c.size() == 3 * 7 * 2);
  CHECK(a2c[0].algo == "level0:NA;level1:NA");
  bool pipeline = false;
  for (const RecommendCandidate& c : a2c) pipeline = pipeline || c.request.pipeline;
  CHECK(pipeline);

  const Hierarchy supernodes{16, 2, 2};
  const std::vector<RecommendCandidate> a3 = recommend_candidates(supernodes, a3_api());
  CHECK(a3.size() == 3 * 7 * 6 * 2);
  CHECK(a3[0].is_default);
  CHECK(a3[0].expansion == Expansion::AiCpu);
  CHECK(a3[0].algo == "level0:NA;level1:NA;level2:NA");
  CHECK(expansion_env_value(Expansion::AiCpu) == "AI_CPU");
}

TEST_CASE("recommend: on the A2 server the best is never slower than the default", "[recommend]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
  const std::vector<RecommendCandidate> candidates = recommend_candidates(hierarchy_of(spec, spec.npus), spec.npu.hccl_api);
  const std::vector<std::uint64_t> sizes = perf_sizes(1 * MiB, 64 * MiB, 4);
  for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::AlltoAll,
                          CollOp::Broadcast, CollOp::Reduce}) {
    INFO(coll_op_name(op));
    const PerfRequest base = request_on(spec, op, {});
    const RecommendOp result = recommend_op(spec, base, sizes, candidates, RecommendModel::Auto, estimate_runner(spec));
    CHECK(result.model == "estimate");
    REQUIRE(result.rows.size() == sizes.size());
    for (const RecommendRow& row : result.rows) {
      INFO(row.data_size);
      CHECK(row.best.time.ps <= row.by_default.time.ps);
      CHECK(row.gain >= 0.0);
      CHECK(row.gain == Approx(gain_pct(row.by_default.time, row.best.time)));
      CHECK(row.by_default.is_default);
      CHECK(row.evaluated >= 1);
      CHECK(row.evaluated + row.skipped == candidates.size());
      // The default is perf without --algo and --expansion.
      PerfRequest plain = base;
      plain.sizes = {row.data_size};
      CHECK(estimate_perf(spec, plain).at(0).time.ps == row.by_default.time.ps);
      // The recommended setting, run as perf --algo --expansion, gives the predicted time.
      PerfRequest chosen = plain;
      chosen.algo = candidates[row.best.candidate].request;
      chosen.expansion = candidates[row.best.candidate].expansion;
      const PerfRow rerun = estimate_perf(spec, chosen).at(0);
      CHECK(rerun.time.ps == row.best.time.ps);
      CHECK(rerun.executor == row.best.executor);
      if (row.best.time.ps == row.by_default.time.ps) CHECK(row.best.is_default);
    }
  }
}

TEST_CASE("recommend: a tie keeps HCCL's default", "[recommend]") {
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
  const std::vector<RecommendCandidate> candidates = recommend_candidates(hierarchy_of(spec, spec.npus), spec.npu.hccl_api);
  // Every executor takes the same time: nothing is strictly faster.
  const RecommendRunner same = [](const PerfRequest& req, bool) {
    std::vector<PerfRow> rows(req.sizes.size());
    for (PerfRow& r : rows) r.time = Time::from_us(100);
    return rows;
  };
  const RecommendOp result = recommend_op(spec, request_on(spec, CollOp::AllGather, {}), {MiB, 4 * MiB}, candidates,
                                          RecommendModel::Estimate, same);
  REQUIRE(result.rows.size() == 2);
  for (const RecommendRow& row : result.rows) {
    CHECK(row.best.is_default);
    CHECK(row.best.candidate == 0);
    CHECK(row.gain == 0.0);
  }
}

TEST_CASE("recommend: the per-process setting minimises the time summed over the sizes", "[recommend]") {
  const std::vector<RecommendCandidate> candidates = recommend_candidates(Hierarchy{8, 1, 1}, kA2Api);
  // 0 default (NA, host), 1 NA aiv, 2 fullmesh host, 3 fullmesh aiv, 4 ring host, 5 ring aiv
  REQUIRE(candidates[4].algo == "level0:ring");
  REQUIRE(candidates[4].expansion == Expansion::Host);
  const std::optional<Time> none;
  auto t = [](std::uint64_t us) { return std::optional<Time>(Time::from_us(us)); };

  // Ring wins the first size, loses the sum: the default stays.
  std::vector<RecommendOp> ops{synthetic_op(CollOp::AllReduce, {MiB, 2 * MiB},
                                            {{t(10), t(10)}, {t(30), t(30)}, {t(10), t(10)}, {none, none},
                                             {t(5), t(20)}, {none, none}})};
  ProcessSetting s = choose_process_setting(ops, candidates, kA2Api);
  CHECK(s.expansion == Expansion::Host);
  CHECK(s.expansion_is_default);
  CHECK(s.ops.at(0).candidate == 0);
  CHECK(s.ops.at(0).total == Time::from_us(20));
  std::ostringstream env;
  write_recommend_env(env, "8 ranks", ops, candidates, kA2Api);
  CHECK(env.str().find("\nexport ") == std::string::npos);
  CHECK(env.str().find("already best") != std::string::npos);

  // Ring ahead in the sum: exported in HCCL_ALGO's per-op form.
  ops[0].times[4] = {t(5), t(14)};
  s = choose_process_setting(ops, candidates, kA2Api);
  CHECK(s.ops.at(0).candidate == 4);
  CHECK(s.ops.at(0).total == Time::from_us(19));
  env.str("");
  write_recommend_env(env, "8 ranks", ops, candidates, kA2Api);
  CHECK(env.str().find("export HCCL_ALGO=\"allreduce=level0:ring\"") != std::string::npos);
  CHECK(env.str().find("export HCCL_OP_EXPANSION_MODE") == std::string::npos);

  // A candidate refused at one size cannot be the setting of the whole range.
  ops[0].times[4] = {t(1), none};
  s = choose_process_setting(ops, candidates, kA2Api);
  CHECK(s.ops.at(0).candidate == 0);

  // AIV ahead over the sum of both ops: one mode for the process.
  ops.push_back(synthetic_op(CollOp::AllGather, {MiB, 2 * MiB},
                             {{t(10), t(10)}, {t(2), t(2)}, {none, none}, {none, none}, {none, none}, {none, none}}));
  ops[0].times[1] = {t(11), t(11)};  // AllReduce loses 2 us with AIV, AllGather gains 16
  s = choose_process_setting(ops, candidates, kA2Api);
  CHECK(s.expansion == Expansion::Aiv);
  CHECK(s.expansion_total == Time::from_us(26));
  CHECK(s.default_total == Time::from_us(40));
  env.str("");
  write_recommend_env(env, "8 ranks", ops, candidates, kA2Api);
  CHECK(env.str().find("export HCCL_OP_EXPANSION_MODE=AIV") != std::string::npos);
  CHECK(env.str().find("export HCCL_ALGO") == std::string::npos);
}

TEST_CASE("recommend: the JSON rows carry the default and the best", "[recommend]") {
  const std::vector<std::vector<std::optional<Time>>> times{{Time::from_us(10)}};
  std::vector<RecommendOp> ops{synthetic_op(CollOp::Broadcast, {MiB}, times)};
  ops[0].rows[0].best.time = Time::from_us(8);
  ops[0].rows[0].best.algo = "level0:ring";
  ops[0].rows[0].gain = 25.0;
  const nlohmann::json j = recommend_json(ops);
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 1);
  for (const char* key : {"op", "data_size", "ranks", "model", "default", "best", "gain_pct"}) {
    CHECK(j[0].contains(key));
  }
  for (const char* side : {"default", "best"}) {
    for (const char* key : {"executor", "algo", "expansion", "time_us"}) CHECK(j[0][side].contains(key));
  }
  CHECK(j[0]["op"] == "broadcast");
  CHECK(j[0]["best"]["time_us"].get<double>() == Approx(8.0));
  CHECK(j[0]["gain_pct"].get<double>() == Approx(25.0));
}
