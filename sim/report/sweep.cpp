#include "sim/report/sweep.h"

#include <optional>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "sim/executors/hccl_algo.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "sim/report/row_writer.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/rank_table.h"

namespace hcclsim {

namespace {

std::string resolve(const std::string& grid_file, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty() || fs::path(path).is_absolute()) return path;
  const fs::path dir = fs::path(grid_file).parent_path();
  return dir.empty() ? path : (dir / path).lexically_normal().string();
}

std::vector<std::string> string_list(ObjectReader& r, const std::string& key, std::vector<std::string> fallback) {
  const nlohmann::json* v = r.optional_value(key);
  if (!v) return fallback;
  const JsonLocation where = r.location_of(key);
  if (!v->is_array() || v->empty()) where.fail("expected a non-empty array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) where.index(i).fail("expected a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::uint64_t size_at(const nlohmann::json& v, const JsonLocation& where) {
  if (!v.is_string()) where.fail("expected a size with its unit, e.g. \"8K\" or \"64KiB\"");
  try {
    return parse_size(v.get<std::string>());
  } catch (const UnitError& e) {
    where.fail(e.what());
  }
}

TopologySpec load_sweep_topology(const SweepTopology& t) {
  if (!t.rank_table_file.empty()) {
    const HardwareProfile hw = load_profile(t.profile_file);
    const RankTable table = load_rank_table(t.rank_table_file, hw.npu.traits);
    try {
      return make_cluster(table.layout, hw);
    } catch (const std::invalid_argument& e) {
      throw InputError(t.rank_table_file, e.what());
    }
  }
  return load_topology(t.topology_file, t.profile_file.empty() ? std::nullopt : std::optional(t.profile_file),
                       t.servers);
}

PerfRequest request_for(const SweepGrid& grid, const SweepSeries& s, const TopologySpec& spec) {
  PerfRequest req;
  req.op = s.op;
  req.ranks = spec.npus;
  req.dtype = s.dtype;
  req.reduce_op = grid.reduce_op;
  req.root = 0;
  req.buffer_bytes = s.buffsize.value_or(spec.npu.hccl_buffer_bytes);
  req.check = grid.check;
  req.algo = s.algo.empty() ? AlgoRequest{} : parse_hccl_algo(s.algo, s.op);
  if (s.op_name == "alltoallv") req.alltoallv_distribution = "uniform";
  req.sizes = grid.sizes;
  return req;
}

std::string describe_series(const SweepGrid& grid, const SweepSeries& s) {
  const SweepTopology& t = grid.topologies[s.topology];
  return s.op_name + " " + data_type_name(s.dtype) + " on " + t.label +
         (t.servers > 0 ? " (" + std::to_string(t.servers) + " servers)" : "") +
         (s.algo.empty() ? "" : ", algo " + s.algo) + (s.buffsize ? ", buffsize " + format_size(*s.buffsize) : "");
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(3);  // the parent is gone
    done += static_cast<std::size_t>(n);
  }
}

// The child: one platform, the series of one topology, rows to `fd` as lines
// "R<point> <row>", a failure as "E<exit code> <JSON string>".
[[noreturn]] void sweep_child(const SweepGrid& grid, const std::vector<const SweepSeries*>& series, int fd) {
  int code = 0;
  std::string message;
  try {
    const TopologySpec spec = load_sweep_topology(grid.topologies[series.front()->topology]);
    // The estimate needs no SystemC platform (and none is elaborated).
    std::optional<Platform> platform;
    if (!grid.estimate) platform.emplace(spec);
    for (const SweepSeries* s : series) {
      try {
        const PerfRowCallback on_row = [&](std::size_t i, const PerfRow& row) {
          write_all(fd, "R" + std::to_string(s->first_point + i) + " " + serialize_perf_row(row) + "\n");
        };
        if (grid.estimate) {
          estimate_perf(spec, request_for(grid, *s, spec), on_row);
        } else {
          run_perf(*platform, request_for(grid, *s, spec), nullptr, on_row);
        }
      } catch (const std::invalid_argument& e) {
        throw InputError(grid.file, describe_series(grid, *s) + ": " + e.what());
      } catch (const GraphError& e) {
        throw GraphError(describe_series(grid, *s) + ": " + e.what());
      }
    }
  } catch (const InputError& e) {
    code = 2;
    message = e.what();
  } catch (const GraphError& e) {
    code = 1;
    message = e.what();
  } catch (const std::bad_alloc&) {
    code = 2;
    message = "out of memory";
  } catch (const std::exception& e) {
    code = 2;
    message = e.what();
  }
  if (code != 0) write_all(fd, "E" + std::to_string(code) + " " + nlohmann::json(message).dump() + "\n");
  ::close(fd);
  _exit(0);
}

void run_topology_in_child(const SweepGrid& grid, const std::vector<const SweepSeries*>& series,
                           const std::function<void(std::size_t, const PerfRow&)>& on_point) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("sweep: cannot create a pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("sweep: cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::close(fds[0]);
    sweep_child(grid, series, fds[1]);
  }
  ::close(fds[1]);
  FILE* in = ::fdopen(fds[0], "r");
  char* line = nullptr;
  std::size_t capacity = 0;
  int failure_code = 0;
  std::string failure;
  ssize_t n = 0;
  while ((n = ::getline(&line, &capacity, in)) > 0) {
    std::string text(line, static_cast<std::size_t>(n));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const std::size_t space = text.find(' ');
    if (text.size() < 2 || space == std::string::npos) continue;
    if (text[0] == 'R') {
      on_point(std::stoull(text.substr(1, space - 1)), deserialize_perf_row(text.substr(space + 1)));
    } else if (text[0] == 'E') {
      failure_code = std::stoi(text.substr(1, space - 1));
      failure = nlohmann::json::parse(text.substr(space + 1)).get<std::string>();
    }
  }
  std::free(line);
  std::fclose(in);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failure_code == 2) throw InputError("", failure);
  if (failure_code != 0) throw GraphError(failure);
  const SweepTopology& t = grid.topologies[series.front()->topology];
  if (WIFSIGNALED(status)) {
    throw GraphError("the sweep worker for " + t.label + " was killed by signal " + std::to_string(WTERMSIG(status)) +
                     " (" + strsignal(WTERMSIG(status)) + ")");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw GraphError("the sweep worker for " + t.label + " ended with exit code " + std::to_string(WEXITSTATUS(status)));
  }
}

}  // namespace

SweepGrid load_sweep_grid(const std::string& file) {
  const nlohmann::json doc = load_json_file(file);
  ObjectReader top(doc, JsonLocation{file});
  SweepGrid grid;
  grid.file = file;

  const nlohmann::json& topologies = top.required_array("topologies");
  if (topologies.empty()) top.location_of("topologies").fail("expected at least one topology");
  for (std::size_t i = 0; i < topologies.size(); ++i) {
    const JsonLocation where = top.location_of("topologies").index(i);
    SweepTopology t;
    t.where = where.describe();
    std::vector<int> servers{-1};
    if (topologies[i].is_string()) {
      t.label = topologies[i].get<std::string>();
      t.topology_file = resolve(file, t.label);
    } else {
      ObjectReader r(topologies[i], where);
      const auto topology = r.optional_string("topology");
      const auto rank_table = r.optional_string("rank_table");
      const auto profile = r.optional_string("profile");
      if (topology.has_value() == rank_table.has_value()) {
        where.fail("give either \"topology\" (a topology file) or \"rank_table\" (with \"profile\")");
      }
      if (rank_table && !profile) where.fail("a rank table needs \"profile\" (the hardware of its NPUs)");
      t.label = topology ? *topology : *rank_table;
      t.topology_file = topology ? resolve(file, *topology) : "";
      t.rank_table_file = rank_table ? resolve(file, *rank_table) : "";
      t.profile_file = profile ? resolve(file, *profile) : "";
      if (const nlohmann::json* v = r.optional_value("servers")) {
        const JsonLocation sw = where.key("servers");
        if (rank_table) sw.fail("the rank table already says how many servers there are");
        if (!v->is_array() || v->empty()) sw.fail("expected a non-empty array of server counts");
        servers.clear();
        for (std::size_t k = 0; k < v->size(); ++k) {
          const nlohmann::json& n = (*v)[k];
          if (!n.is_number_integer() || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > (1 << 16)) {
            sw.index(k).fail("expected an integer in [1, 65536]");
          }
          servers.push_back(n.get<int>());
        }
      }
      r.finish();
    }
    for (const int s : servers) {
      t.servers = s;
      grid.topologies.push_back(t);
    }
  }

  std::vector<std::string> ops = string_list(top, "ops", {});
  if (ops.empty()) top.location_of("ops").fail("expected a non-empty array of ops");
  std::vector<std::string> dtypes = string_list(top, "dtypes", {"fp16"});
  std::vector<std::string> algos = string_list(top, "algos", {""});

  const nlohmann::json& sizes = top.required_value("sizes");
  const JsonLocation sizes_where = top.location_of("sizes");
  if (sizes.is_array()) {
    if (sizes.empty()) sizes_where.fail("expected at least one size");
    for (std::size_t i = 0; i < sizes.size(); ++i) grid.sizes.push_back(size_at(sizes[i], sizes_where.index(i)));
  } else if (sizes.is_object()) {
    ObjectReader r(sizes, sizes_where);
    const std::uint64_t b = r.required_size("b");
    const std::uint64_t e = r.required_size("e");
    const std::int64_t f = r.int_in_or("f", 1, 1 << 20, 2);
    r.finish();
    try {
      grid.sizes = perf_sizes(b, e, static_cast<std::uint64_t>(f));
    } catch (const std::invalid_argument&) {
      sizes_where.fail("expected 0 < b <= e");
    }
  } else {
    sizes_where.fail("expected an array of sizes or {\"b\": ..., \"e\": ..., \"f\": ...}");
  }

  std::vector<std::optional<std::uint64_t>> buffsizes{std::nullopt};
  if (const nlohmann::json* v = top.optional_value("buffsizes")) {
    const JsonLocation where = top.location_of("buffsizes");
    if (!v->is_array() || v->empty()) where.fail("expected a non-empty array of sizes");
    buffsizes.clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      buffsizes.push_back(size_at((*v)[i], where.index(i)));
      if (*buffsizes.back() == 0) where.index(i).fail("the HCCL buffer cannot be empty; expected a size above 0");
    }
  }
  grid.reduce_op = *parse_reduce_op(top.choice_or("reduce_op", reduce_op_names(), "sum"));
  grid.check = top.bool_or("check", true);
  grid.estimate = top.choice_or("model", {"detailed", "estimate"}, "detailed") == "estimate";
  if (grid.estimate) grid.check = false;  // the closed form has no data to check
  top.finish();

  std::vector<std::string> op_choices = coll_op_names();
  op_choices.push_back("alltoallv");
  for (std::size_t t = 0; t < grid.topologies.size(); ++t) {
    for (std::size_t o = 0; o < ops.size(); ++o) {
      const std::string name = hccl_test_op_name(ops[o]);
      const auto op = name == "alltoallv" ? std::optional(CollOp::AlltoAll) : parse_coll_op(name);
      if (!op) {
        std::string expected;
        for (const auto& c : op_choices) expected += (expected.empty() ? "" : ", ") + c;
        top.location_of("ops").index(o).fail("unknown op '" + ops[o] + "'; expected one of: " + expected);
      }
      for (std::size_t d = 0; d < dtypes.size(); ++d) {
        const auto dtype = parse_data_type(dtypes[d]);
        if (!dtype) {
          std::string expected;
          for (const auto& c : data_type_names()) expected += (expected.empty() ? "" : ", ") + c;
          top.location_of("dtypes").index(d).fail("unknown dtype '" + dtypes[d] + "'; expected one of: " + expected);
        }
        for (std::size_t a = 0; a < algos.size(); ++a) {
          try {
            if (!algos[a].empty()) parse_hccl_algo(algos[a], *op);
          } catch (const std::invalid_argument& e) {
            top.location_of("algos").index(a).fail(e.what());
          }
          for (const auto& buffsize : buffsizes) {
            SweepSeries s;
            s.topology = t;
            s.op_name = name;
            s.op = *op;
            s.dtype = *dtype;
            s.algo = algos[a];
            s.buffsize = buffsize;
            s.first_point = grid.series.size() * grid.sizes.size();
            grid.series.push_back(s);
          }
        }
      }
    }
  }
  return grid;
}

void validate_sweep_grid(const SweepGrid& grid) {
  for (std::size_t t = 0; t < grid.topologies.size(); ++t) {
    const TopologySpec spec = load_sweep_topology(grid.topologies[t]);
    if (spec.npus < 2) {
      throw InputError(grid.topologies[t].where, "the topology has " + std::to_string(spec.npus) +
                                                     " NPU; a collective needs at least 2 ranks");
    }
    for (const SweepSeries& s : grid.series) {
      if (s.topology != t) continue;
      for (const std::uint64_t size : grid.sizes) {
        const std::string problem = perf_size_problem(s.op, s.op_name, spec.npus, s.dtype, size);
        if (!problem.empty()) throw InputError(grid.file + " at $.sizes", problem + " (" + describe_series(grid, s) + ")");
      }
    }
  }
}

std::vector<std::string> sweep_csv_columns() {
  std::vector<std::string> columns{"point", "topology", "servers", "algo_request", "buffsize", "size_request"};
  for (const std::string& c : perf_csv_columns()) columns.push_back(c);
  return columns;
}

std::vector<std::string> sweep_csv_fields(const SweepRow& r) {
  std::vector<std::string> fields{std::to_string(r.point),
                                  r.topology->label,
                                  r.topology->servers > 0 ? std::to_string(r.topology->servers) : "",
                                  r.series->algo,
                                  r.series->buffsize ? std::to_string(*r.series->buffsize) : "",
                                  std::to_string(r.size_request)};
  for (std::string& f : fields) {
    for (char& c : f) {
      if (c == ',' || c == '\n') c = ';';
    }
  }
  for (const std::string& f : perf_csv_fields(r.row)) fields.push_back(f);
  return fields;
}

nlohmann::json sweep_row_json(const SweepRow& r) {
  nlohmann::json out = perf_row_json(r.row);
  out["point"] = r.point;
  out["topology"] = r.topology->label;
  out["servers"] = r.topology->servers > 0 ? nlohmann::json(r.topology->servers) : nlohmann::json();
  out["algo_request"] = r.series->algo;
  out["buffsize"] = r.series->buffsize ? nlohmann::json(*r.series->buffsize) : nlohmann::json();
  out["size_request"] = r.size_request;
  return out;
}

std::vector<int> sweep_point_owners(const SweepGrid& grid, int processes) {
  const std::vector<int> by_series = assign_blocks(grid.series.size(), processes);
  std::vector<int> owners;
  for (const int o : by_series) owners.insert(owners.end(), grid.sizes.size(), o);
  return owners;
}

void run_sweep_series(const SweepGrid& grid, const std::vector<std::size_t>& series,
                      const std::function<void(std::size_t, const PerfRow&)>& on_point) {
  // Consecutive series of one topology share a child (and its platform).
  std::size_t i = 0;
  while (i < series.size()) {
    std::vector<const SweepSeries*> group;
    const std::size_t topology = grid.series[series[i]].topology;
    while (i < series.size() && grid.series[series[i]].topology == topology) group.push_back(&grid.series[series[i++]]);
    run_topology_in_child(grid, group, on_point);
  }
}

}  // namespace hcclsim
