// Calibration: the profiles against the measured rows they were fitted to,
// all read from configs/calibration/measurements.json (the one file that
// `hcclsim validate`, this test and the profiles' citations share).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include "base/error.h"
#include "base/json_reader.h"
#include "sim/report/validate.h"
#include "sim/step/step.h"
#include "topologies/config.h"

using namespace hcclsim;

namespace {

using hcclsim::testing::source_file;

// Every "measured": [ids] array anywhere in a JSON document.
void collect_ids(const nlohmann::json& v, std::vector<std::string>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "measured" && it.value().is_array()) {
        for (const auto& id : it.value()) out.push_back(id.get<std::string>());
      } else {
        collect_ids(it.value(), out);
      }
    }
  } else if (v.is_array()) {
    for (const auto& x : v) collect_ids(x, out);
  }
}

}  // namespace

TEST_CASE("every measurement a profile cites resolves in the project's measurement file", "[calibration]") {
  const std::vector<MeasuredPoint> points = load_measurements(source_file("configs/calibration/measurements.json"));
  std::set<std::string> ids;
  for (const MeasuredPoint& p : points) ids.insert(p.id);
  for (const char* profile : {"configs/profiles/a2-910b.json", "configs/profiles/a3-910c.json"}) {
    std::vector<std::string> cited;
    collect_ids(load_json_file(source_file(profile)), cited);
    INFO(profile);
    CHECK(cited.size() >= 10);
    for (const std::string& id : cited) {
      INFO("cited id " << id);
      CHECK(ids.count(id) == 1);
    }
  }
}

TEST_CASE("the point-to-point rows hold their stated tolerance on the profiles", "[calibration]") {
  std::vector<MeasuredPoint> points;
  for (const MeasuredPoint& p : load_measurements(source_file("configs/calibration/measurements.json"))) {
    if (p.op.rfind("p2p_", 0) == 0) points.push_back(p);
  }
  REQUIRE(points.size() >= 60);
  int checked = 0;
  for (const ValidationResult& r : run_validation(points)) {
    INFO(r.point->id << ": measured " << r.point->value << ", simulated " << r.simulated << " (" << r.error_pct << "%)");
    if (r.point->tolerance_pct) {
      CHECK(r.status == (r.point->known_gap.empty() ? "ok" : "gap"));
      ++checked;
    }
  }
  CHECK(checked >= 40);
}

TEST_CASE("a group's mean without known gaps leaves out exactly the gap rows", "[calibration]") {
  std::vector<MeasuredPoint> points(4);
  for (std::size_t i = 0; i < points.size(); ++i) points[i].group = i < 3 ? "g" : "only gaps";
  points[1].known_gap = "a mechanism not modelled";
  points[3].known_gap = "another";
  std::vector<ValidationResult> results(4);
  const double errors[] = {-2.0, 60.0, 4.0, 10.0};
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i].point = &points[i];
    results[i].error_pct = errors[i];
  }
  const std::vector<GroupSummary> groups = summarize(results);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].points == 3);
  CHECK(groups[0].known_gaps == 1);
  CHECK(groups[0].mean_abs_error_pct == Approx(22.0));
  REQUIRE(groups[0].mean_abs_error_without_gaps_pct);
  CHECK(*groups[0].mean_abs_error_without_gaps_pct == Approx(3.0));
  CHECK(groups[1].known_gaps == 1);
  CHECK_FALSE(groups[1].mean_abs_error_without_gaps_pct);   // no row left to average
  const std::string table = validation_table(results, groups);
  CHECK(table.find("without gaps") != std::string::npos);
}

namespace {

// A measurement file of one step point on one A2 server (tiny-llama), with
// `options` and `metric` as given.
std::string write_step_point(const std::string& name, const std::string& options, const std::string& metric) {
  const std::string path = "/tmp/hcclsim_test_step_point_" + std::to_string(::getpid()) + "_" + name + ".json";
  std::ofstream(path, std::ios::binary)
      << "{\"points\": [{\"id\": \"S/1\", \"group\": \"S\", \"topology\": \"" << source_file("configs/topologies/a2-server.json")
      << "\", \"op\": \"step\", \"metric\": \"" << metric << "\", \"value\": 1000, \"options\": " << options
      << ", \"source\": \"test\"}]}";
  return path;
}

std::string model_option() { return "\"model\": \"" + source_file("configs/models/tiny-llama.json") + "\""; }

}  // namespace

TEST_CASE("a step point is the step's estimate, in tokens per NPU per second or its time", "[calibration]") {
  const std::string options = "{" + model_option() + ", \"layout\": \"tp=2,pp=2,dp=2\", \"batch\": \"global=8,micro=1,seq=512\"}";
  StepRequest req;
  req.model = read_model_config(source_file("configs/models/tiny-llama.json"));
  req.layout = parse_layout("tp=2,pp=2,dp=2");
  req.batch = parse_batch("global=8,micro=1,seq=512");
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-server.json"));
  const double step_us = run_step_estimate(*plan_step(spec, req)).step_time_us;
  REQUIRE(step_us > 0);

  const std::string rate_file = write_step_point("rate", options, "tokens_per_npu_s");
  const std::vector<MeasuredPoint> rate_points = load_measurements(rate_file);
  const ValidationResult rate = run_validation(rate_points).front();
  // 8 sequences of 512 tokens over 8 NPUs in step_us.
  CHECK(rate.simulated == Approx(8.0 * 512.0 / (step_us * 1e-6) / 8.0).epsilon(1e-12));
  CHECK(rate.error_pct == Approx(100.0 * (rate.simulated - 1000) / 1000).epsilon(1e-12));
  // Written back, the point reads the same (no dtype or size of its own).
  const std::string again = "/tmp/hcclsim_test_step_point_" + std::to_string(::getpid()) + "_again.json";
  std::ofstream(again, std::ios::binary) << measurements_json(rate_points, "test");
  CHECK(load_measurements(again).front().options == rate_points.front().options);

  const std::string time_file = write_step_point("time", options, "time_us");
  CHECK(run_validation(load_measurements(time_file)).front().simulated == Approx(step_us).epsilon(1e-12));
  for (const std::string& f : {rate_file, time_file, again}) std::remove(f.c_str());
}

TEST_CASE("a step point's bad options are refused naming the point's JSON path", "[calibration]") {
  struct Case {
    std::string options, metric, expect;
  };
  const std::vector<Case> cases = {
      {"{" + model_option() + ", \"batch\": \"global=8,micro=1,seq=512\"}", "tokens_per_npu_s", "options.layout"},
      {"{" + model_option() + ", \"layout\": \"tp=2,pq=2\", \"batch\": \"global=8,micro=1,seq=512\"}", "tokens_per_npu_s",
       "$.points[0].options.layout"},
      {"{" + model_option() + ", \"layout\": \"tp=2\", \"batch\": \"global=8,seq=8\", \"phase\": \"warmup\"}", "time_us",
       "$.points[0].options.phase"},
      {"{\"model\": \"no/such/model.json\", \"layout\": \"tp=2\", \"batch\": \"global=8,seq=8\"}", "time_us",
       "$.points[0].options.model"},
      {"{" + model_option() + ", \"layout\": \"tp=2\", \"batch\": \"global=8,seq=8\", \"zero\": 3}", "time_us",
       "$.points[0].options.zero"},
      {"{" + model_option() + ", \"layout\": \"tp=2\", \"batch\": \"global=8,seq=8\"}", "algbw_GBps", "$.points[0].metric"},
  };
  // A point refused when it runs is named by the option at fault, in its file.
  auto refused_when_run = [&](const std::string& name, const std::string& options, const std::string& key,
                              const std::string& text) {
    const std::string file = write_step_point(name, "{" + model_option() + ", " + options + "}", "time_us");
    try {
      run_validation(load_measurements(file));
      FAIL("point " << name << " was accepted");
    } catch (const InputError& e) {
      CHECK(e.where() == file + " at $.points[0].options." + key + " (point S/1)");
      CHECK_THAT(e.message(), Catch::Contains(text));
    }
    std::remove(file.c_str());
  };
  // A layout larger than the point's topology.
  refused_when_run("too_many", "\"layout\": \"tp=64\", \"batch\": \"global=8,seq=8\"", "layout", "64 ranks");
  // A layer list that does not fit the layout: --num-layer-list is options.num_layer_list.
  refused_when_run("list", "\"layout\": \"tp=1\", \"batch\": \"global=8,seq=8\", \"num_layer_list\": \"1,1\"",
                   "num_layer_list", "the layout has pp 1");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string file = write_step_point("bad" + std::to_string(i), cases[i].options, cases[i].metric);
    try {
      load_measurements(file);
      FAIL("case " << i << " was accepted");
    } catch (const InputError& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(cases[i].expect));
    }
    std::remove(file.c_str());
  }
}
