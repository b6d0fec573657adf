#include "sim/calibrate/fit.h"

#include "base/input_files.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "sim/calibrate/least_squares.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "topologies/config.h"

namespace hcclsim {

namespace {

namespace fs = std::filesystem;

// ---- The constants: where they are, their unit and bounds ----

enum class Quantity { Time, Bandwidth, Size, Rate };

std::uint64_t parse_quantity(Quantity q, const std::string& text) {
  switch (q) {
    case Quantity::Time: return parse_time(text).ps;
    case Quantity::Bandwidth: return parse_bandwidth(text).bytes_per_s;
    case Quantity::Size: return parse_size(text);
    case Quantity::Rate: return parse_flops(text);
  }
  return 0;
}

// The base unit a trial value is written in: exact, whatever the value.
const char* base_unit(Quantity q) {
  switch (q) {
    case Quantity::Time: return "ps";
    case Quantity::Bandwidth: return "Bps";
    case Quantity::Size: return "B";
    case Quantity::Rate: return "FLOPS";
  }
  return "";
}

struct FitParam {
  std::string path;
  Quantity kind = Quantity::Time;
  std::string unit;          // as the profile writes the value: "GBps", "us"
  double per_unit = 1;       // base units (ps, B/s, B) per `unit`
  std::uint64_t value = 0;   // base units
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  std::string value_text, low_text, high_text;

  // [low, high] onto [0, 1]: logarithmic when low > 0, else linear.
  double to_u(double x) const {
    if (low == 0) return x / static_cast<double>(high);
    return std::log(x / static_cast<double>(low)) / std::log(static_cast<double>(high) / static_cast<double>(low));
  }
  std::uint64_t to_x(double u) const {
    const double lo = static_cast<double>(low);
    const double hi = static_cast<double>(high);
    const double x = low == 0 ? u * hi : lo * std::exp(u * std::log(hi / lo));
    return std::clamp(static_cast<std::uint64_t>(std::llround(x)), low, high);
  }
};

// `text` is "<number><unit>": the unit part.
std::string unit_of(const std::string& text) {
  std::size_t at = 0;
  while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '.')) ++at;
  return text.substr(at);
}

FitParam read_constant(const nlohmann::json& profile, const std::string& file, const std::string& path) {
  const std::string where = "option --fit";
  const std::string shown = printable(path);
  const nlohmann::json* at = json_at_path(profile, path);
  if (at == nullptr) throw InputError(where, "'" + shown + "' is not a constant of profile " + file);
  const std::string example = "{\"value\": \"27.1GBps\", \"bounds\": [\"10GBps\", \"60GBps\"], \"source\": ...}";
  if (!at->is_object() || !at->contains("value") || !(*at)["value"].is_string()) {
    throw InputError(where, "'" + shown + "' in profile " + file +
                                " is not a cited constant with a unit; a fitted constant is written " + example);
  }
  if (!at->contains("bounds")) {
    throw InputError(where, "'" + shown + "' has no \"bounds\" in profile " + file +
                                "; a constant is fitted only within the bounds the profile states for it: " + example);
  }
  FitParam c;
  c.path = path;
  c.value_text = (*at)["value"].get<std::string>();
  c.low_text = (*at)["bounds"][0].get<std::string>();
  c.high_text = (*at)["bounds"][1].get<std::string>();
  bool parsed = false;
  for (const Quantity q : {Quantity::Time, Quantity::Bandwidth, Quantity::Size, Quantity::Rate}) {
    try {
      c.value = parse_quantity(q, c.value_text);
      c.kind = q;
      parsed = true;
      break;
    } catch (const UnitError&) {
    }
  }
  if (!parsed) throw InputError(where, "'" + shown + "' is not a time, a bandwidth, a size or a compute rate (" + c.value_text + ")");
  // The profile reader checked the bounds' units and order.
  c.low = parse_quantity(c.kind, c.low_text);
  c.high = parse_quantity(c.kind, c.high_text);
  if (c.low == c.high) throw InputError(where, "'" + shown + "' has equal bounds: nothing to fit");
  c.unit = unit_of(c.value_text);
  c.per_unit = static_cast<double>(parse_quantity(c.kind, "1000" + c.unit)) / 1000.0;
  return c;
}

// `x` base units in the constant's own unit with `digits` significant
// digits ("27.08GBps"); in base units when that is not a whole number of
// them; never outside the bounds.
std::string rounded_text(const FitParam& c, std::uint64_t x, int digits) {
  const double v = static_cast<double>(x) / c.per_unit;
  std::string number = "0";
  if (v > 0) {
    const int exponent = static_cast<int>(std::floor(std::log10(v)));
    const int decimals = std::max(0, digits - 1 - exponent);
    const double scale = std::pow(10.0, digits - 1 - exponent);
    const double r = std::round(v * scale) / scale;
    number = format_fixed(r, decimals);
    if (number.find('.') != std::string::npos) {
      while (number.back() == '0') number.pop_back();
      if (number.back() == '.') number.pop_back();
    }
  }
  std::string text = number + c.unit;
  std::uint64_t back = 0;
  try {
    back = parse_quantity(c.kind, text);
  } catch (const UnitError&) {
    text = std::to_string(x) + base_unit(c.kind);
    back = x;
  }
  if (back < c.low) return c.low_text;
  if (back > c.high) return c.high_text;
  return text;
}

// ---- Simulating rows at trial values ----

// Runs rows at integer trial values of the constants, each simulated once
// per distinct value of the constants it depends on.
class Evaluator {
 public:
  Evaluator(PointRunner& runner, const std::vector<MeasuredPoint>& points, nlohmann::json profile,
            std::string profile_file, const std::vector<FitParam>& constants)
      : runner_(runner),
        points_(points),
        work_(std::move(profile)),
        file_(std::move(profile_file)),
        constants_(constants),
        depends_(points.size(), std::vector<char>(constants.size(), 1)),
        cache_(points.size()) {}

  // Simulated values of `rows` at `x`, each row in the estimate mode when
  // its flag in `estimate` is set.
  void simulate(const std::vector<std::uint64_t>& x, const std::vector<std::size_t>& rows,
                const std::vector<char>& estimate, std::vector<double>& out) {
    out.resize(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::size_t row = rows[i];
      std::vector<std::uint64_t> key{static_cast<std::uint64_t>(estimate[row])};
      for (std::size_t j = 0; j < x.size(); ++j) {
        if (depends_[row][j]) key.push_back(x[j]);
      }
      const auto found = cache_[row].find(key);
      if (found != cache_[row].end()) {
        out[i] = found->second;
        continue;
      }
      apply(x);
      out[i] = runner_.run(points_[row], estimate[row] != 0).simulated;
      ++simulations_;
      cache_[row].emplace(std::move(key), out[i]);
    }
  }

  // From now on a row is simulated again only when a constant it depends on
  // changes (the cache is keyed by those constants alone).
  void set_depends(std::vector<std::vector<char>> depends) {
    depends_ = std::move(depends);
    for (auto& c : cache_) c.clear();
  }
  std::uint64_t simulations() const { return simulations_; }

 private:
  // The profile with `x` written into its copy, read again into typed
  // parameters and applied to every platform (when it changed).
  void apply(const std::vector<std::uint64_t>& x) {
    if (x == applied_) return;
    for (std::size_t j = 0; j < constants_.size(); ++j) {
      (*json_at_path(work_, constants_[j].path))["value"] = std::to_string(x[j]) + base_unit(constants_[j].kind);
    }
    runner_.set_profile(read_profile(work_, file_));
    applied_ = x;
  }

  PointRunner& runner_;
  const std::vector<MeasuredPoint>& points_;
  nlohmann::json work_;
  std::string file_;
  const std::vector<FitParam>& constants_;
  std::vector<std::vector<char>> depends_;
  std::vector<std::map<std::vector<std::uint64_t>, double>> cache_;
  std::vector<std::uint64_t> applied_;
  std::uint64_t simulations_ = 0;
};

// ---- Reading the request ----

std::string read_text(const std::string& file) { return read_regular_file(file, kMaxJsonFileBytes); }

bool starts_with_any(const std::string& id, const std::vector<std::string>& prefixes) {
  if (prefixes.empty()) return true;
  for (const std::string& p : prefixes) {
    if (id.rfind(p, 0) == 0) return true;
  }
  return false;
}

// The measurement files as the fitted profile names them: relative to its directory.
std::vector<std::string> names_for(const std::vector<std::string>& files, const std::string& out_file) {
  if (out_file.empty()) return files;
  const fs::path dir = fs::absolute(out_file).parent_path();
  std::vector<std::string> out;
  for (const std::string& f : files) out.push_back(fs::absolute(f).lexically_normal().lexically_relative(dir).generic_string());
  return out;
}

std::string joined(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

// Rows and constants joined by dependence: no row of one block depends on a
// constant of another, so the sum of squares separates exactly and each
// block is fitted alone (one block's trial values never re-simulate
// another's rows). Blocks in the order of their first constant, rows in file order.
struct Block {
  std::vector<std::size_t> params;
  std::vector<std::size_t> rows;
};

std::vector<Block> blocks_of(const std::vector<std::vector<char>>& depends, const std::vector<std::size_t>& fitted,
                             std::size_t k) {
  std::vector<std::size_t> parent(k);
  for (std::size_t j = 0; j < k; ++j) parent[j] = j;
  auto root = [&](std::size_t j) {
    while (parent[j] != j) j = parent[j] = parent[parent[j]];
    return j;
  };
  for (const std::size_t i : fitted) {
    std::size_t first = k;
    for (std::size_t j = 0; j < k; ++j) {
      if (!depends[i][j]) continue;
      if (first == k) {
        first = j;
      } else {
        const std::size_t a = root(first), b = root(j);
        parent[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  std::vector<Block> blocks;
  std::map<std::size_t, std::size_t> index;  // root constant -> block
  for (std::size_t j = 0; j < k; ++j) {
    auto [it, added] = index.emplace(root(j), blocks.size());
    if (added) blocks.emplace_back();
    blocks[it->second].params.push_back(j);
  }
  for (const std::size_t i : fitted) {
    for (std::size_t j = 0; j < k; ++j) {
      if (depends[i][j]) {
        blocks[index.at(root(j))].rows.push_back(i);
        break;
      }
    }
  }
  return blocks;
}

// The problem restricted to one block's constants, the others held at `held`.
LeastSquaresProblem block_problem(const LeastSquaresProblem& problem, const Block& block, const std::vector<double>& held) {
  LeastSquaresProblem sub;
  sub.parameters = block.params.size();
  sub.depends.resize(problem.depends.size());
  for (std::size_t i = 0; i < problem.depends.size(); ++i) {
    for (const std::size_t j : block.params) sub.depends[i].push_back(problem.depends[i][j]);
  }
  sub.residuals = [&problem, &block, held](const std::vector<double>& su, const std::vector<std::size_t>& r,
                                           std::vector<double>& out) {
    std::vector<double> full = held;
    for (std::size_t p = 0; p < su.size(); ++p) full[block.params[p]] = su[p];
    problem.residuals(full, r, out);
  };
  return sub;
}

std::vector<double> block_part(const Block& block, const std::vector<double>& u) {
  std::vector<double> part;
  for (const std::size_t j : block.params) part.push_back(u[j]);
  return part;
}

// Fits the constants of one block to `rows`, the others held at `u`
// (updated in place).
// `options.resolution`, when given, is per constant of the whole problem.
LeastSquaresResult fit_block(const LeastSquaresProblem& problem, const Block& block, const std::vector<std::size_t>& rows,
                             std::vector<double>& u, LeastSquaresOptions options) {
  if (!options.resolution.empty()) options.resolution = block_part(block, options.resolution);
  const LeastSquaresResult result = least_squares(block_problem(problem, block, u), rows, block_part(block, u), options);
  for (std::size_t p = 0; p < block.params.size(); ++p) u[block.params[p]] = result.u[p];
  return result;
}

}  // namespace

namespace {

// One run of `hcclsim calibrate`, phase by phase (calibrate() below).
class Calibration {
 public:
  explicit Calibration(const CalibrateRequest& request) : request_(request) {}

  CalibrationReport run() {
    read_profile_and_constants();
    read_rows();
    PointRunner runner(report_.points, request_.profile_file);
    Evaluator eval(runner, report_.points, base_doc_, request_.profile_file, constants_);
    eval_ = &eval;
    detailed_.assign(n(), 0);
    eval.simulate(x0_, all_rows(), detailed_, before_);
    choose_models();
    find_dependence();
    eval.set_depends(depends_);
    make_problem();
    fit();
    eval.simulate(x_fit_, all_rows(), detailed_, after_);
    if (request_.leave_one_out) leave_one_out();
    summarize();
    report_.simulations = eval.simulations();
    write_profile();
    return std::move(report_);
  }

 private:
  std::size_t n() const { return report_.points.size(); }
  std::size_t k() const { return constants_.size(); }
  std::vector<std::size_t> all_rows() const {
    std::vector<std::size_t> all(n());
    for (std::size_t i = 0; i < n(); ++i) all[i] = i;
    return all;
  }
  void note(const std::string& text) const {
    if (request_.log == nullptr) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    *request_.log << "calibrate: " << format_fixed(s, 1) << " s: " << text << "\n" << std::flush;
  }
  std::vector<std::uint64_t> x_of(const std::vector<double>& u) const {
    std::vector<std::uint64_t> x(k());
    for (std::size_t j = 0; j < k(); ++j) x[j] = constants_[j].to_x(u[j]);
    return x;
  }
  std::vector<double> u_of(const std::vector<std::uint64_t>& x) const {
    std::vector<double> u(k());
    for (std::size_t j = 0; j < k(); ++j) u[j] = constants_[j].to_u(static_cast<double>(x[j]));
    return u;
  }
  double error_pct(std::size_t row, double simulated) const {
    const double measured = report_.points[row].value;
    return 100.0 * (simulated - measured) / measured;
  }

  // The base profile, read strictly (also its bounds), kept twice: a copy
  // to write trial values into, and one in key order for the output; and
  // the constants to fit.
  void read_profile_and_constants() {
    base_doc_ = load_json_file(request_.profile_file);
    const NpuParams base_npu = read_profile(base_doc_, request_.profile_file).npu;
    base_model_ = base_npu.model;
    base_product_ = base_npu.traits.name;
    report_.profile = nlohmann::ordered_json::parse(read_text(request_.profile_file));
    if (request_.fit.empty()) throw InputError("option --fit", "no constant to fit");
    for (const std::string& path : request_.fit) {
      for (const FitParam& c : constants_) {
        if (c.path == path) throw InputError("option --fit", "'" + printable(path) + "' is given twice");
      }
      constants_.push_back(read_constant(base_doc_, request_.profile_file, path));
      x0_.push_back(constants_.back().value);
    }
  }

  // The rows of the profile's product (and `only`); those without a known
  // gap are fitted.
  void read_rows() {
    if (request_.measurement_files.empty()) throw InputError("", "no measurement file");
    std::set<std::string> ids;
    std::map<std::string, std::string> model_of;  // topology file -> NPU model of its own profile
    for (const std::string& file : request_.measurement_files) {
      for (MeasuredPoint& p : load_measurements(file)) {
        if (!ids.insert(p.id).second) {
          throw InputError(file, "point id '" + p.id + "' is also in an earlier measurement file");
        }
        auto [it, added] = model_of.emplace(p.topology_file, "");
        if (added) it->second = load_profile(topology_profile_file(p.topology_file)).npu.model;
        if (it->second == base_model_ && starts_with_any(p.id, request_.only)) report_.points.push_back(std::move(p));
      }
    }
    report_.files = names_for(request_.measurement_files, request_.out_file);
    for (std::size_t i = 0; i < n(); ++i) {
      if (report_.points[i].known_gap.empty()) fitted_.push_back(i);
    }
    if (fitted_.empty()) {
      const std::string& product = base_product_;
      throw InputError("option --profile",
                       "no row of " + joined(request_.measurement_files) + " without a known gap" +
                           (request_.only.empty() ? "" : " and with an id starting " + joined(request_.only, " or ")) +
                           " runs on a " + base_model_ + " (" + product + ") topology; nothing to fit " +
                           request_.profile_file + " to");
    }
    note(std::to_string(fitted_.size()) + " rows to fit (" + std::to_string(n() - fitted_.size()) +
         " more with a known gap, reported only), " + std::to_string(k()) + " constant(s)");
  }

  // A collective row runs in the estimate mode where that is within 1% of
  // the detailed model at the base profile.
  void choose_models() {
    estimate_.assign(n(), 0);
    for (const std::size_t i : fitted_) {
      if (!has_closed_form(report_.points[i])) continue;
      std::vector<char> only_this(n(), 0);
      only_this[i] = 1;
      std::vector<double> e;
      try {
        eval_->simulate(x0_, {i}, only_this, e);
      } catch (const InputError&) {
        continue;  // no closed form for its executor, or a size the forms refuse
      }
      estimate_[i] = std::fabs(e[0] - before_[i]) <= kEstimateAgreement * std::fabs(before_[i]) ? 1 : 0;
    }
  }

  // Which rows each constant moves: each at its bounds, the others at base.
  // Changes below kDependence are numerical (the flow network solves large
  // components at multiples of a quantum of simulated time, so a shifted
  // start moves a batch of thousands of writes by parts per million) or too
  // small to fit anything to. A constant no row depends on is refused.
  void find_dependence() {
    std::vector<double> at_base;
    eval_->simulate(x0_, fitted_, estimate_, at_base);
    depends_.assign(n(), std::vector<char>(k(), 0));
    for (std::size_t j = 0; j < k(); ++j) {
      // The high bound first: a rate there is fastest and a cost longest,
      // so a batch of writes has the fewest in flight and simulates in a
      // fraction of the time (A2's RDMA post at its low bound put 8192
      // writes through one NIC at once: 2.9 s against 0.07 s). Whatever
      // the order, a row depends on the constant when either bound moves it.
      for (const std::uint64_t end : {constants_[j].high, constants_[j].low}) {
        std::vector<std::uint64_t> x = x0_;
        x[j] = end;
        std::vector<std::size_t> open;  // rows not yet seen to move (the low bound asks only those)
        std::vector<double> base_of;
        for (std::size_t i = 0; i < fitted_.size(); ++i) {
          if (!depends_[fitted_[i]][j]) {
            open.push_back(fitted_[i]);
            base_of.push_back(at_base[i]);
          }
        }
        std::vector<double> moved;
        eval_->simulate(x, open, estimate_, moved);
        for (std::size_t i = 0; i < open.size(); ++i) {
          if (std::fabs(moved[i] - base_of[i]) > kDependence * std::fabs(base_of[i])) depends_[open[i]][j] = 1;
        }
      }
      bool any = false;
      for (const std::size_t i : fitted_) any = any || depends_[i][j];
      if (!any) {
        const FitParam& c = constants_[j];
        throw InputError("option --fit", "no row depends on '" + printable(c.path) + "': moving it from " +
                                             c.low_text + " to " + c.high_text + " changes none of the " +
                                             std::to_string(fitted_.size()) + " rows fitted by more than " +
                                             kDependenceText + " (" + joined(request_.measurement_files) +
                                             "); leave it out or add rows that exercise it");
      }
    }
  }

  // Residuals (simulated - measured) / measured at [0, 1] coordinates.
  void make_problem() {
    problem_.parameters = k();
    problem_.depends = depends_;
    problem_.residuals = [this](const std::vector<double>& u, const std::vector<std::size_t>& rows,
                                std::vector<double>& out) {
      eval_->simulate(x_of(u), rows, estimate_, out);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const double measured = report_.points[rows[i]].value;
        out[i] = (out[i] - measured) / measured;
      }
    };
    blocks_ = blocks_of(depends_, fitted_, k());
  }

  // Values rounded to kFitDigits in their units, as text and as base units.
  std::pair<std::vector<std::uint64_t>, std::vector<std::string>> rounded(const std::vector<double>& u) const {
    std::vector<std::uint64_t> x = x_of(u);
    std::vector<std::string> text(k());
    for (std::size_t j = 0; j < k(); ++j) {
      text[j] = rounded_text(constants_[j], x[j], kFitDigits);
      x[j] = parse_quantity(constants_[j].kind, text[j]);
    }
    return {x, text};
  }

  // Per constant, the move in [0, 1] coordinates at `u` that changes its
  // value by a tenth of the least its rounding to kFitDigits significant
  // digits can show (half a unit of the last digit of 9.999...): a fit step
  // smaller than that in every constant ends the fit (LeastSquaresOptions).
  // Without it, a fit at its optimum spent most of its simulations on such
  // steps (the A2 MoE stage: 196, each a tenth of a second).
  std::vector<double> resolution_at(const std::vector<double>& u) const {
    const double relative = 0.05 * std::pow(10.0, -kFitDigits);
    std::vector<double> out(k());
    for (std::size_t j = 0; j < k(); ++j) {
      const double x = static_cast<double>(constants_[j].to_x(u[j]));
      out[j] = std::fabs(constants_[j].to_u(x * (1 + relative)) - constants_[j].to_u(x));
    }
    return out;
  }

  // The fit, block by block, each again from its rounded values until they repeat.
  void fit() {
    fit_options_.max_iterations = kFitIterations;
    fit_options_.min_decrease = 1e-9;
    note("base profile simulated; fitting " + std::to_string(blocks_.size()) + " independent block(s)");
    u_best_ = u_of(x0_);
    x_fit_ = x0_;
    text_fit_.assign(k(), "");
    for (const Block& b : blocks_) {
      fit_options_.resolution = resolution_at(u_best_);
      LeastSquaresResult res = fit_block(problem_, b, b.rows, u_best_, fit_options_);
      auto [x_round, text_round] = rounded(u_best_);
      for (int round = 0; round < 3; ++round) {
        const std::vector<double> u_round = u_of(x_round);
        std::vector<double> u = u_best_;
        for (const std::size_t j : b.params) u[j] = u_round[j];
        fit_options_.resolution = resolution_at(u);
        res = fit_block(problem_, b, b.rows, u, fit_options_);
        auto [x_again, text_again] = rounded(u);
        for (const std::size_t j : b.params) u_best_[j] = u[j];
        bool same = true;
        for (const std::size_t j : b.params) same = same && x_again[j] == x_round[j];
        x_round = x_again;
        text_round = text_again;
        if (same) break;
      }
      for (const std::size_t j : b.params) {
        x_fit_[j] = x_round[j];
        text_fit_[j] = text_round[j];
      }
      report_.iterations += res.iterations;
    }
    note("fitted in " + std::to_string(report_.iterations) + " iterations");
  }

  // Leave one out: each fitted row predicted by a fit of its block made
  // without it. That fit is solved on the block's model linearized at the
  // full fit (its residuals and Jacobian there, within the bounds), then
  // the row is simulated at its values: first-order exact, and it costs a
  // Jacobian per block and a simulation per row instead of a fit per row
  // (a MoE row takes seconds). A row alone in its block leaves nothing to
  // fit: its constants stay at the base profile's values. A fitted row no
  // constant moves is the same in every fit.
  void leave_one_out() {
    loo_.assign(n(), std::nullopt);
    LeastSquaresOptions options;
    options.max_iterations = kFitIterations;
    options.min_decrease = 1e-12;
    for (const Block& b : blocks_) {
      const LeastSquaresProblem sub = block_problem(problem_, b, u_best_);
      const std::vector<double> at = block_part(b, u_best_);
      std::vector<double> r;
      sub.residuals(at, b.rows, r);
      const LeastSquaresProblem lin = linearized(sub, b.rows, at, r, forward_jacobian(sub, b.rows, at, r, options.step));
      for (const std::size_t i : b.rows) {
        std::vector<std::size_t> rest;
        for (const std::size_t other : b.rows) {
          if (other != i) rest.push_back(other);
        }
        std::vector<double> u = u_best_;
        const std::vector<double> without = rest.empty() ? block_part(b, u_of(x0_)) : least_squares(lin, rest, at, options).u;
        for (std::size_t p = 0; p < b.params.size(); ++p) u[b.params[p]] = without[p];
        std::vector<double> ri;
        problem_.residuals(u, {i}, ri);
        loo_[i] = 100.0 * ri[0];
      }
    }
    for (const std::size_t i : fitted_) {
      if (loo_[i]) continue;
      std::vector<double> ri;
      problem_.residuals(u_best_, {i}, ri);
      loo_[i] = 100.0 * ri[0];
    }
  }

  // Per constant and per point, and the mean |error| per group.
  void summarize() {
    loo_.resize(n());
    for (std::size_t j = 0; j < k(); ++j) {
      const FitParam& c = constants_[j];
      FittedConstant f{c.path, c.value_text, text_fit_[j], c.low_text, c.high_text, "", {}};
      f.at_bound = x_fit_[j] == c.low ? "low" : x_fit_[j] == c.high ? "high" : "";
      for (const std::size_t i : fitted_) {
        if (depends_[i][j]) f.rows.push_back(report_.points[i].id);
      }
      report_.constants.push_back(f);
    }
    std::map<std::string, std::size_t> group_index;
    std::vector<int> loo_count;
    for (std::size_t i = 0; i < n(); ++i) {
      const MeasuredPoint& m = report_.points[i];
      const CalibratedPoint p{i, m.known_gap.empty(), estimate_[i] != 0, error_pct(i, before_[i]), error_pct(i, after_[i]),
                              loo_[i]};
      report_.rows.push_back(p);
      auto [it, added] = group_index.emplace(m.group, report_.groups.size());
      if (added) {
        report_.groups.push_back(CalibratedGroup{m.group, 0, 0, 0, 0, std::nullopt});
        loo_count.push_back(0);
      }
      CalibratedGroup& g = report_.groups[it->second];
      ++g.points;
      g.fitted += p.fitted ? 1 : 0;
      g.before_pct += std::fabs(p.before_pct);
      g.after_pct += std::fabs(p.after_pct);
      if (p.loo_pct) {
        g.loo_pct = g.loo_pct.value_or(0) + std::fabs(*p.loo_pct);
        ++loo_count[it->second];
      }
    }
    for (std::size_t gi = 0; gi < report_.groups.size(); ++gi) {
      CalibratedGroup& g = report_.groups[gi];
      g.before_pct /= g.points;
      g.after_pct /= g.points;
      if (g.loo_pct) *g.loo_pct /= loo_count[gi];
    }
  }

  // The fitted profile: values, sources, the rows used, and what was fitted
  // together (after "description").
  void write_profile() {
    const std::string files = joined(report_.files);
    for (const FittedConstant& f : report_.constants) {
      nlohmann::ordered_json& at = *json_at_path(report_.profile, f.path);
      at["value"] = f.after;
      at["source"] = "fitted by `hcclsim calibrate` to " + files + " (the rows in 'measured')" +
                     (k() > 1 ? ", together with the other constants of calibration.fit" : "") +
                     (f.at_bound.empty() ? "" : "; stopped at its " + f.at_bound + " bound");
      at["measured"] = f.rows;
    }
    nlohmann::ordered_json block = {{"fit", request_.fit}, {"measurements", report_.files}};
    if (!request_.only.empty()) block["only"] = request_.only;
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto it = report_.profile.begin(); it != report_.profile.end(); ++it) {
      if (it.key() == "calibration") continue;
      out[it.key()] = it.value();
      if (it.key() == "description") out["calibration"] = block;
    }
    if (!out.contains("calibration")) out["calibration"] = block;
    report_.profile = std::move(out);
  }

  const CalibrateRequest& request_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  CalibrationReport report_;
  nlohmann::json base_doc_;
  std::string base_model_;
  std::string base_product_;   // its npu.product.name
  std::vector<FitParam> constants_;
  std::vector<std::uint64_t> x0_;
  std::vector<std::size_t> fitted_;
  Evaluator* eval_ = nullptr;
  std::vector<char> detailed_, estimate_;
  std::vector<double> before_, after_;
  std::vector<std::vector<char>> depends_;
  LeastSquaresProblem problem_;
  LeastSquaresOptions fit_options_;
  std::vector<Block> blocks_;
  std::vector<double> u_best_;
  std::vector<std::uint64_t> x_fit_;
  std::vector<std::string> text_fit_;
  std::vector<std::optional<double>> loo_;
};

}  // namespace

CalibrationReport calibrate(const CalibrateRequest& request) { return Calibration(request).run(); }

// ---- Output ----

namespace {

std::string opt_num(const std::optional<double>& v, int decimals) { return v ? format_fixed(*v, decimals) : "-"; }

}  // namespace

std::string calibration_table(const CalibrationReport& report) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-30s %14s %14s   %s\n", "constant", "before", "after", "bounds");
  os << line;
  for (const FittedConstant& c : report.constants) {
    const std::string bounds = "[" + c.low + ", " + c.high + "]" + (c.at_bound.empty() ? "" : " at " + c.at_bound);
    std::snprintf(line, sizeof line, "%-30s %14s %14s   %s\n", c.path.c_str(), c.before.c_str(), c.after.c_str(),
                  bounds.c_str());
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof line, "%-44s %6s %6s %10s %10s %15s\n", "group", "points", "fitted", "before %",
                "after %", "leave-one-out %");
  os << line;
  for (const CalibratedGroup& g : report.groups) {
    std::snprintf(line, sizeof line, "%-44s %6d %6d %10s %10s %15s\n", g.group.c_str(), g.points, g.fitted,
                  format_fixed(g.before_pct, 1).c_str(), format_fixed(g.after_pct, 1).c_str(), opt_num(g.loo_pct, 1).c_str());
    os << line;
  }
  int estimated = 0;
  for (const CalibratedPoint& p : report.rows) estimated += p.estimate ? 1 : 0;
  os << "\n(mean |error| per group: before and after with the detailed model; leave-one-out over the fitted points, "
     << "each predicted by a fit made without it. " << report.iterations << " iterations, " << report.simulations
     << " rows simulated, " << estimated << " of them by the estimate mode during the fit.)\n";
  return os.str();
}

std::string calibration_json(const CalibrationReport& report) {
  nlohmann::ordered_json out;
  out["files"] = report.files;
  out["constants"] = nlohmann::ordered_json::array();
  for (const FittedConstant& c : report.constants) {
    out["constants"].push_back({{"path", c.path},
                                {"before", c.before},
                                {"after", c.after},
                                {"bounds", {c.low, c.high}},
                                {"at_bound", c.at_bound.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.at_bound)},
                                {"rows", c.rows}});
  }
  out["groups"] = nlohmann::ordered_json::array();
  for (const CalibratedGroup& g : report.groups) {
    out["groups"].push_back({{"group", g.group},
                             {"points", g.points},
                             {"fitted", g.fitted},
                             {"before_mean_abs_error_pct", std::stod(format_fixed(g.before_pct, 3))},
                             {"after_mean_abs_error_pct", std::stod(format_fixed(g.after_pct, 3))},
                             {"loo_mean_abs_error_pct",
                              g.loo_pct ? nlohmann::ordered_json(std::stod(format_fixed(*g.loo_pct, 3))) : nlohmann::ordered_json()}});
  }
  out["points"] = nlohmann::ordered_json::array();
  for (const CalibratedPoint& p : report.rows) {
    const MeasuredPoint& m = report.points[p.point];
    out["points"].push_back({{"id", m.id},
                             {"group", m.group},
                             {"fitted", p.fitted},
                             {"model", p.estimate ? "estimate" : "detailed"},
                             {"measured", m.value},
                             {"before_error_pct", std::stod(format_fixed(p.before_pct, 3))},
                             {"after_error_pct", std::stod(format_fixed(p.after_pct, 3))},
                             {"loo_error_pct", p.loo_pct ? nlohmann::ordered_json(std::stod(format_fixed(*p.loo_pct, 3)))
                                                         : nlohmann::ordered_json()}});
  }
  out["iterations"] = report.iterations;
  out["simulations"] = report.simulations;
  return out.dump(2) + "\n";
}

namespace {

void write_value(std::ostringstream& os, const nlohmann::ordered_json& v, int indent) {
  if (v.is_object()) {
    bool flat = true;
    for (const auto& member : v) flat = flat && !member.is_object();
    if (flat) {
      os << "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        os << (first ? "" : ", ") << nlohmann::ordered_json(it.key()).dump() << ": ";
        write_value(os, it.value(), indent);
        first = false;
      }
      os << "}";
      return;
    }
    os << "{\n";
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      os << (first ? "" : ",\n") << std::string(2 * (indent + 1), ' ') << nlohmann::ordered_json(it.key()).dump() << ": ";
      write_value(os, it.value(), indent + 1);
      first = false;
    }
    os << "\n" << std::string(2 * indent, ' ') << "}";
  } else if (v.is_array()) {
    os << "[";
    bool first = true;
    for (const auto& item : v) {
      os << (first ? "" : ", ");
      write_value(os, item, indent);
      first = false;
    }
    os << "]";
  } else {
    os << v.dump();
  }
}

}  // namespace

std::string profile_text(const nlohmann::ordered_json& profile) {
  std::ostringstream os;
  write_value(os, profile, 0);
  os << "\n";
  return os.str();
}

}  // namespace hcclsim
