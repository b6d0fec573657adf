#include "sim/calibrate/import.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string_view>

#include "sim/executors/collective.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "sim/perf/perf.h"

namespace hcclsim {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The largest size_bytes a measurement file takes (load_measurements), and
// the longest time any input gives (10^6 s, base/json_reader.h).
constexpr std::uint64_t kMaxPointBytes = std::uint64_t{1} << 50;
constexpr double kMaxTimeUs = 1e12;

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::vector<std::string> split_cells(std::string_view line) {
  std::vector<std::string> cells;
  for (std::size_t at = 0;;) {
    const std::size_t bar = line.find('|', at);
    cells.emplace_back(trim(line.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at)));
    if (bar == std::string_view::npos) return cells;
    at = bar + 1;
  }
}

const char* kHeader = "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:";

bool is_header(const std::vector<std::string>& c) {
  return c.size() == 4 && starts_with(c[0], "data_size") &&
         (starts_with(c[1], "aveg_time") || starts_with(c[1], "avg_time")) && starts_with(c[2], "alg_bandwidth") &&
         starts_with(c[3], "check_result");
}

// "LOG:LINE", where an error in a log is.
std::string line_of(const std::string& file, std::size_t line) { return file + ":" + std::to_string(line); }

std::uint64_t data_size_cell(const std::string& cell, const std::string& where) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (cell.empty() || ec == std::errc::result_out_of_range || end != cell.data() + cell.size()) {
    throw InputError(where, "data_size '" + printable(cell) + "' is not a whole number of bytes" +
                                (ec == std::errc::result_out_of_range ? " that fits 64 bits" : ""));
  }
  return v;
}

// A decimal number as printf's %f writes it (digits, a point, a sign).
double decimal_cell(const std::string& cell, const std::string& column, const std::string& where) {
  const bool plain = !cell.empty() && cell.find_first_not_of("0123456789.+-") == std::string::npos;
  char* end = nullptr;
  const double v = plain ? std::strtod(cell.c_str(), &end) : 0;
  if (!plain || end != cell.c_str() + cell.size() || !std::isfinite(v)) {
    throw InputError(where, column + " '" + printable(cell) + "' is not a decimal number");
  }
  return v;
}

// "hcom_allReduce__844_2_1@1368..." -> "allreduce" (torch_npu names the type
// after "hcom_", or before "__" otherwise).
std::string op_kind(const std::string& name) {
  std::string base = name.substr(0, name.find('@'));
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
  if (starts_with(base, "hcom_")) return base.substr(5, base.find('_', 5) - 5);
  return base.substr(0, base.find("__"));
}

double milliseconds_or_megabytes(ObjectReader& r, const std::string& key, const char* what) {
  const json& v = r.required_value(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
    r.location_of(key).fail(std::string("expected a number >= 0 (") + what + "), got " +
                            (v.is_number() ? "number " + v.dump() : std::string(v.type_name())));
  }
  return v.get<double>();
}

const char* kTimeInfo = "Communication Time Info";
const char* kBandwidthInfo = "Communication Bandwidth Info";
const char* kTotal = "Total Op Info";

}  // namespace

std::vector<HcclTestRow> parse_hccl_test_log(const std::string& text, const std::string& file) {
  std::vector<HcclTestRow> rows;
  std::size_t header_line = 0;  // of the table being read; 0: none yet
  std::size_t number = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = std::min(text.find('\n', at), text.size());
    const std::string_view line = trim(std::string_view(text).substr(at, nl - at));
    at = nl + 1;
    ++number;
    const std::string where = line_of(file, number);
    const std::vector<std::string> cells = split_cells(line);
    if (starts_with(line, "data_size")) {
      if (!is_header(cells)) {
        throw InputError(where, "a table header that is not hccl_test's; expected `" + std::string(kHeader) +
                                    "` (hcclsim perf writes it with --format hccl_test)");
      }
      header_line = number;
      continue;
    }
    const bool looks_like_row = cells.size() > 1 && (std::isdigit(static_cast<unsigned char>(cells[0].c_str()[0])) ||
                                                     cells.size() == 4);
    if (header_line == 0 || !looks_like_row) continue;  // the preamble, MPI and HCCL messages
    if (cells.size() != 4) {
      throw InputError(where, "expected 4 columns separated by '|' (data_size | aveg_time | alg_bandwidth | "
                              "check_result), found " + std::to_string(cells.size()));
    }
    HcclTestRow row;
    row.line = number;
    row.data_size = data_size_cell(cells[0], where);
    row.time_us = decimal_cell(cells[1], "aveg_time", where);
    if (row.time_us <= 0 || row.time_us > kMaxTimeUs) {
      throw InputError(where, "aveg_time " + cells[1] + " is not a positive time in us of at most 10^6 s");
    }
    row.algbw_gbps = decimal_cell(cells[2], "alg_bandwidth", where);
    row.check = cells[3];
    if (row.check != "success" && row.check != "failed" && row.check != "NULL") {
      throw InputError(where, "check_result '" + printable(row.check) + "' is not one of: success, failed, NULL");
    }
    rows.push_back(row);
  }
  if (header_line == 0) {
    throw InputError(file, std::string("no hccl_test table: expected its header `") + kHeader +
                               "` and rows `data_size | aveg_time | alg_bandwidth | check_result` below it");
  }
  if (rows.empty()) throw InputError(line_of(file, header_line), "the table under this header has no rows");
  return rows;
}

std::optional<std::string> measured_op_name(const std::string& name) {
  const std::string op = hccl_test_op_name(name);
  const auto& ops = measured_collective_ops();
  if (std::find(ops.begin(), ops.end(), op) == ops.end()) return std::nullopt;
  return op;
}

ImportResult hccl_test_points(const std::vector<HcclTestRow>& rows, const std::string& log, const std::string& op,
                              const std::string& dtype, const ImportTarget& target) {
  const std::string stem = fs::path(log).stem().string();
  const std::string group = !target.group.empty() ? target.group : (stem.empty() ? "hccl_test" : stem) + " " + op;
  ImportResult result;
  std::map<std::uint64_t, std::size_t> first_line;  // data_size -> line
  for (const HcclTestRow& row : rows) {
    const std::string where = line_of(log, row.line);
    const auto [seen, added] = first_line.emplace(row.data_size, row.line);
    if (!added) {
      throw InputError(where, "data_size " + std::to_string(row.data_size) + " is given again (first at line " +
                                  std::to_string(seen->second) + "); import one run per log");
    }
    if (row.data_size == 0 || row.data_size > kMaxPointBytes) {
      throw InputError(where, "data_size " + std::to_string(row.data_size) +
                                  " is outside what a measurement file takes, 1..2^50 bytes");
    }
    if (row.check == "failed") {
      result.warnings.push_back(where + ": check_result failed: row passed over (the collective's result was wrong, "
                                        "so its time is no measurement of it)");
      continue;
    }
    MeasuredPoint p;
    p.id = group + "/" + op + "/" + std::to_string(row.data_size);
    p.group = group;
    p.topology = target.topology;
    p.servers = target.servers;
    p.ranks = target.ranks;
    p.op = op;
    p.dtype = dtype;
    p.size_bytes = row.data_size;
    p.size_means = "hccl_test";
    p.metric = "time_us";
    p.value = row.time_us;
    p.source = "hccl_test output " + log + ", line " + std::to_string(row.line) +
               (row.check == "NULL" ? " (no data check)" : "");
    result.points.push_back(std::move(p));
  }
  return result;
}

std::string find_communication_json(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw InputError(path, "no such file or directory");
  if (!fs::is_directory(st)) return path;
  for (const fs::path& candidate : {fs::path(path) / "communication.json",
                                   fs::path(path) / "ASCEND_PROFILER_OUTPUT" / "communication.json"}) {
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  throw InputError(path, "no communication.json in it or in its ASCEND_PROFILER_OUTPUT; expected the torch_npu "
                         "profiler's output directory, its ASCEND_PROFILER_OUTPUT directory, or the file");
}

std::vector<CommunicationOp> parse_communication_json(const json& doc, const std::string& file, std::size_t* p2p_ops) {
  const JsonLocation root{file};
  if (!doc.is_object()) {
    root.fail(std::string("expected an object of steps, {\"step1\": {\"collective\": {...}, \"p2p\": {...}}}, got ") +
              doc.type_name());
  }
  std::vector<CommunicationOp> ops;
  std::size_t p2p = 0;
  for (auto step = doc.begin(); step != doc.end(); ++step) {
    ObjectReader s(step.value(), root.key(step.key()));
    if (const json* point_to_point = s.optional_value("p2p")) {
      const ObjectReader is_object(*point_to_point, s.location_of("p2p"));
      p2p += point_to_point->size() - (point_to_point->contains(kTotal) ? 1 : 0);
    }
    if (!s.has("collective")) {
      s.location().fail("missing key 'collective'; expected a step of torch_npu's communication.json, "
                        "{\"collective\": {\"<op>@<group>\": ...}, \"p2p\": {...}}");
    }
    s.required_object("collective");
    const json& collective = step.value().at("collective");
    for (auto op = collective.begin(); op != collective.end(); ++op) {
      if (op.key() == kTotal) continue;
      ObjectReader o(op.value(), s.location_of("collective").key(op.key()));
      CommunicationOp c;
      c.path = o.location().path;
      c.step = step.key();
      c.name = op.key();
      c.kind = op_kind(op.key());
      ObjectReader time = o.required_object(kTimeInfo);
      c.elapse_ms = milliseconds_or_megabytes(time, "Elapse Time(ms)", "the operator's time in ms");
      if (c.elapse_ms * 1e3 > kMaxTimeUs) time.location_of("Elapse Time(ms)").fail("longer than the limit of 10^6 s");
      ObjectReader bandwidth = o.required_object(kBandwidthInfo);
      const bool sdma = bandwidth.has("SDMA");
      const bool rdma = bandwidth.has("RDMA");
      if (!sdma && !rdma) {
        bandwidth.location().fail("neither SDMA nor RDMA is given; expected the bytes this rank moved over them "
                                  "(\"SDMA\": {\"Transit Size(MB)\": ...}, \"RDMA\": {...})");
      }
      // SDMA already sums HCCS, PCIE and SIO (msprof's combine_sdma_info):
      // those are not added again.
      for (const char* transport : {"SDMA", "RDMA"}) {
        if (!bandwidth.has(transport)) continue;
        ObjectReader t = bandwidth.required_object(transport);
        c.transit_mb += milliseconds_or_megabytes(t, "Transit Size(MB)", "the MB (10^6 bytes) the rank moved");
      }
      ops.push_back(std::move(c));
    }
  }
  if (p2p_ops) *p2p_ops = p2p;
  return ops;
}

ImportResult communication_points(const std::vector<CommunicationOp>& ops, std::size_t p2p_ops,
                                  const std::string& file, int ranks, const ImportTarget& target,
                                  const std::string& default_group) {
  const std::string group = target.group.empty() ? default_group : target.group;
  static const std::map<std::string, std::string> imported{
      {"allreduce", "all_reduce"}, {"allgather", "all_gather"}, {"reducescatter", "reduce_scatter"}, {"alltoall", "alltoall"}};
  static const std::map<std::string, std::string> reasons{
      {"broadcast", "the bytes a rank moves depend on whether it is the root, so they do not tell the size"},
      {"reduce", "the bytes a rank moves depend on whether it is the root, so they do not tell the size"},
      {"alltoallv", "its per-peer counts are not in communication.json"},
      {"alltoallvc", "its per-peer counts are not in communication.json"}};
  struct Passed {
    std::size_t count = 0;
    std::string first;
    std::string why;
  };
  std::map<std::string, Passed> passed;  // by kind and reason, for one warning each
  const auto pass = [&](const CommunicationOp& c, const std::string& why) {
    Passed& p = passed[c.kind + "\n" + why];
    if (p.count++ == 0) p.first = c.path;
    p.why = why;
  };
  ImportResult result;
  for (const CommunicationOp& c : ops) {
    const auto op = imported.find(c.kind);
    if (op == imported.end()) {
      const auto why = reasons.find(c.kind);
      pass(c, why != reasons.end() ? why->second : "not a collective validate runs");
      continue;
    }
    const CollOp coll = *parse_coll_op(op->second);
    const double factor = bus_factor(coll, ranks);
    const double bytes = std::round(c.transit_mb * 1e6 / factor);
    if (c.elapse_ms <= 0) {
      pass(c, "it took no time");
      continue;
    }
    if (bytes > static_cast<double>(kMaxPointBytes)) {
      pass(c, "its size is beyond what a measurement file takes (2^50 bytes)");
      continue;
    }
    const auto size = static_cast<std::uint64_t>(bytes);
    if (count_for_size(coll, ranks, DataType::Fp16, size) == 0) {
      pass(c, "it moved less than one fp16 element per rank to other ranks");
      continue;
    }
    char figures[256];
    std::snprintf(figures, sizeof figures,
                  ": Elapse Time(ms) %.6g; Transit Size(MB) of SDMA and RDMA %.6g over %s's bus factor %.4g on %d "
                  "ranks; the dtype is not recorded (fp16 taken)",
                  c.elapse_ms, c.transit_mb, op->second.c_str(), factor, ranks);
    MeasuredPoint p;
    p.id = group + "/" + c.step + "/" + c.name;
    p.group = group;
    p.topology = target.topology;
    p.servers = target.servers;
    p.ranks = target.ranks;
    p.op = op->second;
    p.dtype = "fp16";
    p.size_bytes = size;
    p.size_means = "hccl_test";
    p.metric = "time_us";
    p.value = std::round(c.elapse_ms * 1e6) / 1e3;  // us, to the ns
    p.source = "torch_npu communication.json " + file + " at " + c.path + figures;
    result.points.push_back(std::move(p));
  }
  for (const auto& [key, p] : passed) {
    const std::string kind = key.substr(0, key.find('\n'));
    result.warnings.push_back(file + ": " + std::to_string(p.count) + " '" + kind + "' operator(s) passed over (" +
                              p.why + "), the first at " + p.first);
  }
  if (p2p_ops > 0) {
    result.warnings.push_back(file + ": " + std::to_string(p2p_ops) +
                              " point-to-point operator(s) under \"p2p\" passed over (validate's p2p points need the "
                              "block size and method, which communication.json does not give)");
  }
  return result;
}

}  // namespace hcclsim
