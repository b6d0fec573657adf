// Calibration: the profiles against the measured rows they were fitted to,
// all read from configs/calibration/measurements.json (the one file that
// `hcclsim validate`, this test and the profiles' citations share).
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <functional>
#include <set>
#include <string>

#include "base/json_reader.h"
#include "sim/report/validate.h"

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
