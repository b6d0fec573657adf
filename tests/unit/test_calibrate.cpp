// hcclsim calibrate (sim/calibrate): the bounded least squares alone, the
// profile's bounds, and fits on the simulator: constants recovered from rows
// simulated with other values, bounds held, constants no row depends on
// refused, and the shipped profiles re-created from their own record.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/calibrate/fit.h"
#include "sim/calibrate/least_squares.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "sim/report/validate.h"
#include "base/units.h"
#include "topologies/config.h"

using namespace hcclsim;
using hcclsim::testing::source_file;
using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

// A directory of its own for a test's files, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "hcclsim-calibrate-XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_json(const std::string& file, const json& doc) { std::ofstream(file) << doc.dump(1) << "\n"; }

// The A2 profile with `values` set and `bounds` added at dotted paths.
json a2_profile(const std::map<std::string, std::string>& values,
                const std::map<std::string, std::pair<std::string, std::string>>& bounds = {}) {
  json doc = json::parse(read_text(source_file("configs/profiles/a2-910b.json")));
  for (const auto& [path, b] : bounds) (*json_at_path(doc, path))["bounds"] = {b.first, b.second};
  for (const auto& [path, v] : values) (*json_at_path(doc, path))["value"] = v;
  return doc;
}

// Runs `body` in a child process (SystemC elaborates once per process: a
// process that simulated cannot build the platforms of a fit) and checks
// that it succeeded.
void in_child(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 1;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

// Measurement rows whose values are what the simulator gives with `profile`.
void simulate_rows(const std::string& file, json points, const std::string& profile) {
  write_json(file, {{"points", points}});
  in_child([&] {
    const std::vector<MeasuredPoint> loaded = load_measurements(file);
    const std::vector<ValidationResult> results = run_validation(loaded, profile);
    for (std::size_t i = 0; i < results.size(); ++i) points[i]["value"] = results[i].simulated;
    write_json(file, {{"points", points}});
  });
}

json p2p_row(const std::string& id, const std::string& op, std::uint64_t block) {
  return {{"id", id},
          {"group", op},
          {"topology", source_file("configs/topologies/a2-server.json")},
          {"servers", 1},
          {"ranks", 2},
          {"op", op},
          {"block_bytes", block},
          {"total_bytes", 8 << 20},
          {"metric", "algbw_GBps"},
          {"value", 1},
          // hixl_cs's one-sided batches: HCCL's transport (a single task)
          // is held to links.hccs.transport_rate, below the link's read rate.
          {"options", {{"method", "batch"}, {"src", 0}, {"dst", 1}}},
          {"source", "simulated with the perturbed profile"}};
}

json collective_row(const std::string& id, const std::string& op, std::uint64_t size) {
  return {{"id", id},
          {"group", "collectives"},
          {"topology", source_file("configs/topologies/a2-server.json")},
          {"servers", 1},
          {"op", op},
          {"size_bytes", size},
          {"size_means", "hccl_test"},
          {"metric", "time_us"},
          {"value", 1},
          {"source", "simulated with the perturbed profile"}};
}

double value_of(const nlohmann::ordered_json& profile, const std::string& path, double (*parse)(const std::string&)) {
  return parse((*json_at_path(profile, path))["value"].get<std::string>());
}
double gbps(const std::string& s) { return static_cast<double>(parse_bandwidth(s).bytes_per_s) / 1e9; }
double us(const std::string& s) { return static_cast<double>(parse_time(s).ps) / 1e6; }

CalibrateRequest request_for(const std::string& measurements, const std::string& profile, std::vector<std::string> fit,
                             std::vector<std::string> only = {}) {
  CalibrateRequest r;
  r.measurement_files = {measurements};
  r.profile_file = profile;
  r.fit = std::move(fit);
  r.only = std::move(only);
  return r;
}

}  // namespace

// ---- The least squares alone ----

namespace {
// y = a x + b at x = 0..9, with a = 0.3 + u0 and b = u1: residuals
// linear in u, the data from (a, b) = (0.7, 0.7) unless given.
LeastSquaresProblem line_problem(double a_true, double b_true) {
  LeastSquaresProblem p;
  p.parameters = 2;
  p.depends.assign(10, {1, 1});
  p.residuals = [a_true, b_true](const std::vector<double>& u, const std::vector<std::size_t>& rows, std::vector<double>& out) {
    out.clear();
    for (const std::size_t i : rows) {
      const double x = static_cast<double>(i);
      out.push_back((0.3 + u[0]) * x + u[1] - (a_true * x + b_true));
    }
  };
  return p;
}
std::vector<std::size_t> ten_rows() { return {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; }
}  // namespace

TEST_CASE("least squares recovers the parameters of a line inside the box", "[calibrate]") {
  const LeastSquaresResult r = least_squares(line_problem(0.7, 0.7), ten_rows(), {0.0, 0.0});
  CHECK(r.converged);
  CHECK(r.u[0] == Approx(0.4).margin(1e-6));
  CHECK(r.u[1] == Approx(0.7).margin(1e-6));
  CHECK(r.cost < 1e-10);
}

TEST_CASE("least squares stops at a bound when the optimum lies beyond it", "[calibrate]") {
  // a = 1.8 needs u0 = 1.5: held at 1 (a = 1.3); the best intercept for
  // that slope, the mean of 0.5 x - 2 over x = 0..9 = 0.25, lies inside.
  const LeastSquaresResult r = least_squares(line_problem(1.8, -2.0), ten_rows(), {0.5, 0.5});
  CHECK(r.u[0] == 1.0);
  CHECK(r.u[1] == Approx(0.25).margin(1e-6));
}

TEST_CASE("least squares ends where a step would move no parameter by its resolution", "[calibrate]") {
  // The optimum is u = (0.4, 0.7); the start is 1e-5 off in the intercept.
  const std::vector<double> start{0.4, 0.7 + 1e-5};
  LeastSquaresOptions options;
  SECTION("no resolution: the step is taken") {
    const LeastSquaresResult r = least_squares(line_problem(0.7, 0.7), ten_rows(), start, options);
    CHECK(r.u[1] == Approx(0.7).margin(1e-9));
  }
  SECTION("a resolution above the step: the fit ends where it started") {
    options.resolution = {1e-4, 1e-4};
    const LeastSquaresResult r = least_squares(line_problem(0.7, 0.7), ten_rows(), start, options);
    CHECK(r.converged);
    CHECK(r.iterations == 1);
    CHECK(r.u == start);
  }
  SECTION("one parameter's step above its own resolution: taken") {
    options.resolution = {1e-4, 1e-7};
    const LeastSquaresResult r = least_squares(line_problem(0.7, 0.7), ten_rows(), start, options);
    CHECK(r.u[1] == Approx(0.7).margin(1e-9));
  }
}

TEST_CASE("least squares is deterministic to the bit", "[calibrate]") {
  const LeastSquaresResult a = least_squares(line_problem(0.9, 0.1), ten_rows(), {0.2, 0.9});
  const LeastSquaresResult b = least_squares(line_problem(0.9, 0.1), ten_rows(), {0.2, 0.9});
  CHECK(a.u == b.u);
  CHECK(a.cost == b.cost);
  CHECK(a.iterations == b.iterations);
}

// ---- Bounds in the profile ----

TEST_CASE("a profile constant's bounds are read in its unit and must hold its value", "[calibrate]") {
  TempDir dir;
  const std::string file = dir.file("p.json");
  SECTION("inside: read") {
    write_json(file, a2_profile({{"links.hccs.bandwidth", "30GBps"}}));
    CHECK(load_profile(file).links.at("hccs").bandwidth.bytes_per_s == 30'000'000'000ULL);
  }
  SECTION("outside: refused naming the JSON path") {
    write_json(file, a2_profile({{"links.hccs.bandwidth", "61GBps"}}));
    CHECK_THROWS_WITH(load_profile(file), Catch::Contains("$.links.hccs.bandwidth.bounds") && Catch::Contains("outside"));
  }
  SECTION("low above high: refused") {
    write_json(file, a2_profile({}, {{"links.hccs.bandwidth", {"60GBps", "10GBps"}}}));
    CHECK_THROWS_WITH(load_profile(file), Catch::Contains("$.links.hccs.bandwidth.bounds") && Catch::Contains("above"));
  }
  SECTION("another unit: refused") {
    write_json(file, a2_profile({}, {{"links.hccs.bandwidth", {"1us", "60GBps"}}}));
    CHECK_THROWS_WITH(load_profile(file), Catch::Contains("$.links.hccs.bandwidth.bounds[0]"));
  }
  SECTION("a calibration object naming a constant without bounds: refused") {
    json doc = a2_profile({});
    doc["calibration"]["fit"].push_back("npu.sdma.task_fixed");
    write_json(file, doc);
    CHECK_THROWS_WITH(load_profile(file), Catch::Contains("$.calibration.fit[") && Catch::Contains("npu.sdma.task_fixed"));
  }
}

TEST_CASE("the profile writer lays a profile out as the shipped ones are", "[calibrate]") {
  for (const char* name : {"configs/profiles/a2-910b.json", "configs/profiles/a3-910c.json"}) {
    const std::string text = read_text(source_file(name));
    INFO(name);
    CHECK(profile_text(nlohmann::ordered_json::parse(text)) == text);
  }
}

// ---- Fits on the simulator ----

TEST_CASE("calibrate recovers two perturbed constants from rows simulated with them", "[calibrate]") {
  // The acceptance test: HCCS bandwidth +20%, SDMA fixed cost -30%.
  TempDir dir;
  const std::map<std::string, std::pair<std::string, std::string>> bounds{{"npu.sdma.task_fixed", {"0.05us", "2us"}}};
  const json base = a2_profile({}, bounds);
  const double bw0 = gbps((*json_at_path(base, "links.hccs.bandwidth"))["value"]);
  const double fixed0 = us((*json_at_path(base, "npu.sdma.task_fixed"))["value"]);
  const double bw_true = bw0 * 1.2;
  const double fixed_true = fixed0 * 0.7;
  char bw_text[32], fixed_text[32];
  std::snprintf(bw_text, sizeof bw_text, "%.3fGBps", bw_true);
  std::snprintf(fixed_text, sizeof fixed_text, "%.3fus", fixed_true);
  write_json(dir.file("base.json"), base);
  write_json(dir.file("true.json"), a2_profile({{"links.hccs.bandwidth", bw_text}, {"npu.sdma.task_fixed", fixed_text}}, bounds));
  const json rows = {p2p_row("read/16K", "p2p_read", 16384),     p2p_row("read/256K", "p2p_read", 262144),
                     p2p_row("read/2M", "p2p_read", 2097152),    p2p_row("write/16K", "p2p_write", 16384),
                     p2p_row("write/64K", "p2p_write", 65536),   p2p_row("write/2M", "p2p_write", 2097152),
                     collective_row("all_reduce/1M", "all_reduce", 1 << 20),
                     collective_row("all_reduce/64M", "all_reduce", 64 << 20),
                     collective_row("all_gather/4M", "all_gather", 4 << 20)};
  simulate_rows(dir.file("m.json"), rows, dir.file("true.json"));

  CalibrateRequest req = request_for(dir.file("m.json"), dir.file("base.json"), {"links.hccs.bandwidth", "npu.sdma.task_fixed"});
  req.out_file = dir.file("fitted.json");
  const CalibrationReport report = calibrate(req);
  const double bw_fit = value_of(report.profile, "links.hccs.bandwidth", gbps);
  const double fixed_fit = value_of(report.profile, "npu.sdma.task_fixed", us);
  INFO("hccs bandwidth " << bw_fit << " GB/s (true " << bw_true << "), sdma task_fixed " << fixed_fit << " us (true "
                         << fixed_true << ")");
  CHECK(std::fabs(bw_fit / bw_true - 1) < 0.03);
  CHECK(std::fabs(fixed_fit / fixed_true - 1) < 0.03);
  // The base profile was off; the fitted one reproduces the rows.
  double worst_before = 0;
  for (const CalibratedPoint& p : report.rows) worst_before = std::max(worst_before, std::fabs(p.before_pct));
  CHECK(worst_before > 5.0);
  for (const CalibratedPoint& p : report.rows) {
    INFO(report.points[p.point].id << ": before " << p.before_pct << "%, after " << p.after_pct << "%");
    CHECK(std::fabs(p.after_pct) < 0.5);
    REQUIRE(p.loo_pct);
    CHECK(std::fabs(*p.loo_pct) < 3.0);
  }
  // The collectives ran in the estimate mode during the fit (within 1% of the detailed model on one A2 server).
  for (const CalibratedPoint& p : report.rows) {
    INFO(report.points[p.point].id);
    CHECK(p.estimate == (report.points[p.point].op.rfind("p2p_", 0) != 0));
  }
  // The fitted constants cite the rows that move them, and the file.
  const auto& bw = *json_at_path(report.profile, "links.hccs.bandwidth");
  CHECK(bw["source"].get<std::string>().find("hcclsim calibrate") != std::string::npos);
  CHECK(bw["source"].get<std::string>().find("m.json") != std::string::npos);
  CHECK(bw["measured"].size() >= 3);
  CHECK(report.profile["calibration"]["fit"] == nlohmann::ordered_json({"links.hccs.bandwidth", "npu.sdma.task_fixed"}));
  CHECK(report.profile["calibration"]["measurements"] == nlohmann::ordered_json({"m.json"}));
}

TEST_CASE("calibrate holds a constant at its bound when the rows want it beyond", "[calibrate]") {
  // A2-1's reads want about 27 GB/s of HCCS; the bounds allow at most 25.
  TempDir dir;
  write_json(dir.file("p.json"), a2_profile({{"links.hccs.bandwidth", "24GBps"}}, {{"links.hccs.bandwidth", {"10GBps", "25GBps"}}}));
  const CalibrationReport report = calibrate(request_for(source_file("configs/calibration/measurements.json"),
                                                         dir.file("p.json"), {"links.hccs.bandwidth"}, {"A2-1/read"}));
  REQUIRE(report.constants.size() == 1);
  CHECK(report.constants[0].after == "25GBps");
  CHECK(report.constants[0].at_bound == "high");
  CHECK(report.points.size() == 8);
}

TEST_CASE("calibrate refuses a constant no row depends on, naming it", "[calibrate]") {
  // The A2-1 rows run inside one server: no RDMA post is in them.
  CHECK_THROWS_WITH(calibrate(request_for(source_file("configs/calibration/measurements.json"),
                                          source_file("configs/profiles/a2-910b.json"),
                                          {"links.hccs.bandwidth", "npu.rdma.post"}, {"A2-1/"})),
                    Catch::Contains("npu.rdma.post") && Catch::Contains("no row depends"));
}

TEST_CASE("calibrate refuses a constant without bounds and a path that is no constant", "[calibrate]") {
  const std::string m = source_file("configs/calibration/measurements.json");
  const std::string p = source_file("configs/profiles/a2-910b.json");
  CHECK_THROWS_WITH(calibrate(request_for(m, p, {"npu.sdma.task_fixed"})),
                    Catch::Contains("option --fit") && Catch::Contains("npu.sdma.task_fixed") && Catch::Contains("bounds"));
  CHECK_THROWS_WITH(calibrate(request_for(m, p, {"links.hccs.bandwith"})),
                    Catch::Contains("option --fit") && Catch::Contains("links.hccs.bandwith"));
  CHECK_THROWS_WITH(calibrate(request_for(m, p, {"npu.sdma.engines"})), Catch::Contains("npu.sdma.engines"));
}

TEST_CASE("validate --profile refuses a profile of the other product, naming the point", "[calibrate]") {
  std::vector<MeasuredPoint> points;
  for (const MeasuredPoint& p : load_measurements(source_file("configs/calibration/measurements.json"))) {
    if (p.id.rfind("A2-1/", 0) == 0) points.push_back(p);
  }
  try {
    PointRunner runner(points, source_file("configs/profiles/a3-910c.json"));
    FAIL("an A3 profile ran A2 points");
  } catch (const InputError& e) {
    CHECK(e.where() == "option --profile");
    CHECK_THAT(e.message(), Catch::Contains("point A2-1/write/16K") && Catch::Contains("910C") && Catch::Contains("910B"));
  }
}
