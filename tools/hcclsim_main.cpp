// hcclsim command line: `perf` (hccl_test-style sweeps) and `run` (programs).
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "sim/critical_path.h"
#include "sim/error.h"
#include "sim/perf.h"
#include "sim/program/program_json.h"
#include "tools/cli_common.h"
#include "topologies/config.h"

namespace hcclsim {
namespace {

const char* kUsage = R"(hcclsim - a cycle-approximate simulator of HCCL collectives on Ascend A2/A3

usage:
  hcclsim perf <op> [options]       hccl_test-style sweep of one collective
  hcclsim run --program FILE [opts] run a communication program (HCCL thread/notify
                                    API and Ascend C Hccl kernels, see README)
  hcclsim help                      this text

<op>: all_reduce | all_gather | reduce_scatter | alltoall | alltoallv | broadcast | reduce

perf options:
  --topology FILE   topology JSON (default configs/topologies/a2-server.json);
                    clusters: a2-cluster.json, a2-cluster-oversubscribed.json,
                    cloudmatrix384.json, cloudmatrix384x4.json
  --servers N       servers of a cluster topology (A3: in whole supernodes)
  --rank-table FILE an HCCL rank table (1.0 A2, 1.2 A3) instead of --topology;
                    needs --profile
  --profile FILE    hardware profile JSON, replacing the one the topology names
  --network M       flow (default): a transfer's rate is its max-min fair share of
                    the channels it crosses, recomputed when a flow starts or ends;
                    segment: transfers cross every channel as 64-256 KiB segments
                    that interleave round-robin (many more events)
  --ranks N         ranks 0..N-1 take part (default: every NPU of the topology;
                    more than one server: whole servers)
  -b SIZE           smallest data_size (default 8K); K/M/G are binary as in hccl_test
  -e SIZE           largest data_size (default 64M)
  -f FACTOR         multiply the size by FACTOR each step (default 2)
  -d DTYPE          fp32 | fp16 | bf16 | int8 | int16 | int32 | int64 (default fp16)
  -o OP             sum | prod | max | min (default sum)
  -r ROOT           root rank of broadcast / reduce (default 0)
  --vcounts DIST    alltoallv: how each rank's data_size splits over its peers:
                    uniform (default), random:SEED (shares uniform in [0, 2 x mean]),
                    zipf:S (peer r+k gets a share ~ 1/(k+1)^S)
  --algo SPEC       HCCL_ALGO syntax, e.g. "level0:ring", "level0:NA;level1:NHR" or
                    "allreduce=level1:H-D_R/allgather=level0:NA"; NA = HCCL's choice.
                    level1/level2: ring, H-D_R, NHR, NB, pairwise (alltoall);
                    level1 also pipeline (A2 clusters)
  --buffsize SIZE   HCCL_BUFFSIZE, the HCCL buffer per rank (default: profile, 200MiB)
  --format F        table | csv | json (default table)
  --trace FILE      write a Chrome trace-event JSON (Perfetto, MindStudio Insight)
  --no-check        skip the data check (check_result shows "skipped")
  --stats           print wall time, tasks, events/s and peak memory to stderr

run options:
  --program FILE    program JSON (configs/programs/)
  --topology FILE   as for perf; --profile FILE, --network M as for perf
  --format F        table | json (default table)
  --trace FILE      Chrome trace: a track per domain/engine/thread, flow arrows
                    from each notify record to the wait it released
  run prints the total time, per handle its start, end and duration, Query
  results, and the critical path (the chain of tasks that set the total).

Columns: data_size (bytes), aveg_time (us), alg_bandwidth = data_size/time (GB/s,
1e9 B/s), bus_bandwidth = alg_bandwidth x bus factor (AllReduce 2(n-1)/n; AllGather,
ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce 1), check_result.
data_size is per rank: the input of all_reduce, broadcast, reduce; the output of
all_gather; the input of reduce_scatter; the whole send buffer of alltoall.

What is modelled: per-NPU stream engines (in-order tasks, dispatch gap, launch
cost), notify registers (record sets, wait blocks until set and clears), a pool
of SDMA engines with a fixed cost per task, RDMA posts with in-order queue
pairs, on-chip memory and every HCCS / SIO / UB / RoCE link direction and
switch port as a channel shared max-min fairly by flows (--network segment:
round-robin by segments) with cut-through forwarding, leaf/spine fabrics
with ECMP and oversubscription, HCCL's loops over its buffer and its
level-0/1/2 algorithms.
What is not: AI CPU / host expansion costs beyond the launch and dispatch
constants, HBM contention of remote traffic, read-vs-write asymmetry of HCCS
(all transfers are writes), flow control / PFC / drops, errors and retries,
HCCL's AHC, Star and NHR_V1 algorithms. Timings are calibrated on
point-to-point measurements (see README), not on collectives.

Exit codes: 0 success, 1 a run failed (deadlock, timeout, failed check),
2 bad input (file, JSON path or option named on stderr).
)";

int perf(Args& args) {
  const std::string op_name = args.positional("<op>", "perf");
  const bool alltoallv = op_name == "alltoallv";
  const auto op = alltoallv ? std::optional<CollOp>(CollOp::AlltoAll) : parse_coll_op(op_name);
  if (!op) {
    throw InputError("<op>", "unknown collective '" + op_name + "'; expected one of: " + join(coll_op_names()) +
                                 ", alltoallv");
  }
  std::string topology_file;
  Platform platform(topology_from_args(args, &topology_file));

  PerfRequest req;
  req.op = *op;
  req.ranks = args.int_in("--ranks", 2, platform.npus(), platform.npus(),
                          "topology " + topology_file + " has " + std::to_string(platform.npus()) + " NPUs");
  req.dtype = args.choice("-d", data_type_names(), "fp16", parse_data_type);
  req.reduce_op = args.choice("-o", reduce_op_names(), "sum", parse_reduce_op);
  req.root = args.int_in("-r", 0, req.ranks - 1, 0, "the root must be one of the ranks");
  req.buffer_bytes = args.size("--buffsize", platform.spec().npu.hccl_buffer_bytes);
  req.check = !args.flag("--no-check");
  req.algo = parse_algo(args.optional("--algo"), *op);
  const std::optional<std::string> distribution = args.optional("--vcounts");
  if (distribution && !alltoallv) throw InputError("option --vcounts", "only alltoallv takes per-peer counts");
  if (alltoallv) {
    req.alltoallv_distribution = distribution.value_or("uniform");
    try {
      alltoallv_counts(req.alltoallv_distribution, 2, 2);
    } catch (const std::invalid_argument& e) {
      throw InputError("option --vcounts", e.what());
    }
  }
  const std::uint64_t first = args.size("-b", 8 * 1024);
  const std::uint64_t last = args.size("-e", 64ULL * 1024 * 1024);
  const std::uint64_t factor = static_cast<std::uint64_t>(args.int_in("-f", 2, 1 << 20, 2, ""));
  const std::string format = args.value("--format", "table");
  if (format != "table" && format != "csv" && format != "json") {
    throw InputError("option --format", "unknown format '" + format + "'; expected one of: table, csv, json");
  }
  const std::optional<std::string> trace_file = args.optional("--trace");
  const bool stats = args.flag("--stats");
  args.finish();

  const std::uint64_t dsize = data_type_size(req.dtype);
  if (first == 0 || last < first) throw InputError("option -b/-e", "expected 0 < -b <= -e");
  for (std::uint64_t s = first;; s *= factor) {
    if (s % dsize != 0) {
      throw InputError("option -b", "data_size " + std::to_string(s) + " is not a multiple of the " +
                                        data_type_name(req.dtype) + " element size (" + std::to_string(dsize) + " bytes)");
    }
    if (count_for_size(req.op, req.ranks, req.dtype, s) == 0) {
      throw InputError("option -b", "data_size " + std::to_string(s) + " holds no element per rank for " +
                                        op_name + " on " + std::to_string(req.ranks) + " ranks");
    }
    req.sizes.push_back(s);
    if (factor == 1 || s > last / factor) break;  // the next size would pass -e (or overflow)
  }

  try {
    hierarchy_of(platform, req.ranks);
  } catch (const std::invalid_argument& e) {
    throw InputError("option --ranks", e.what());
  }
  WallClock clock;
  TraceWriter trace;
  const std::vector<PerfRow> rows = run_perf(platform, req, trace_file ? &trace : nullptr);
  if (format == "table") {
    std::cout << "# " << (alltoallv ? std::string("AlltoAllV (") + req.alltoallv_distribution + ")" : coll_op_title(req.op)) << " on " << req.ranks << " ranks of " << platform.spec().name << ", "
              << data_type_name(req.dtype) << ", " << (rows.empty() ? "" : rows.front().algo) << "\n"
              << format_table(rows);
  } else if (format == "csv") {
    std::cout << format_csv(rows);
  } else {
    std::cout << format_json(rows);
  }
  if (trace_file) write_trace(trace, *trace_file);
  if (stats) {
    std::uint64_t tasks = 0;
    std::uint64_t events = 0;
    for (const PerfRow& r : rows) {
      tasks += r.tasks;
      events += r.activations;
    }
    print_stats(clock, tasks, events);
  }
  for (const PerfRow& r : rows) {
    if (r.check.rfind("fail", 0) == 0) return 1;
  }
  return 0;
}

Arch arch_of(const NpuParams& npu, const std::string& topology_file) {
  if (npu.model == "910B") return Arch::A2;
  if (npu.model == "910C") return Arch::A3;
  throw InputError(topology_file, "NPU model '" + npu.model + "' is neither 910B (A2) nor 910C (A3)");
}

std::string task_line(const TaskGraph& g, const RunResult& r, TaskId id, Platform& platform) {
  const Task& t = g.task(id);
  std::string line = format_us(r.timings[id].start) + " -> " + format_us(r.timings[id].end) + "  rank " +
                     std::to_string(g.rank_of(id)) + " " + g.thread(t.thread).name + "  " + task_kind_name(t.kind);
  if (!t.label.empty()) line += " (" + t.label + ")";
  if ((t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline) && t.bytes > 0) {
    line += " " + std::to_string(t.bytes) + " B over";
    for (Channel* ch : platform.route(t.src.rank, t.dst.rank)) line += " [" + ch->label() + "]";
  }
  return line;
}

int run(Args& args) {
  const std::string program_file = args.optional("--program").value_or("");
  if (program_file.empty()) throw InputError("option --program", "run needs --program FILE");
  std::string topology_file;
  const TopologySpec spec = topology_from_args(args, &topology_file);
  const std::string format = args.value("--format", "table");
  if (format != "table" && format != "json") {
    throw InputError("option --format", "unknown format '" + format + "'; expected table or json");
  }
  const std::optional<std::string> trace_file = args.optional("--trace");
  const bool stats = args.flag("--stats");
  args.finish();

  Program program(arch_of(spec.npu, topology_file), spec.npus, spec.npu);
  program.set_npus_per_server(spec.npus_per_server);
  const LoadedProgram loaded = load_program(program_file, program);
  Program::Built built;
  try {
    built = program.build();
  } catch (const ProgramError& e) {
    std::cerr << "hcclsim: program " << loaded.name << " cannot finish: " << e.what() << "\n";
    return 1;
  } catch (const std::invalid_argument& e) {
    throw InputError(program_file, e.what());
  }
  WallClock clock;
  Platform platform(spec);
  Scheduler scheduler(platform);
  const RunResult result = scheduler.run(built.graph);
  if (trace_file) {
    TraceWriter trace;
    trace.add_run(built.graph, result, platform, loaded.name);
    write_trace(trace, *trace_file);
  }
  if (!result.failure.empty()) {
    std::cerr << "hcclsim: program " << loaded.name << " did not finish: " << result.failure << "\n";
    return 1;
  }

  struct Span {
    Time start;
    Time end;
  };
  auto span_of = [&](const std::vector<std::vector<TaskId>>& repeats) {
    Span s{Time{~0ULL}, Time{}};
    for (const auto& ids : repeats) {
      for (TaskId id : ids) {
        if (!result.timings[id].started) continue;
        s.start = std::min(s.start, result.timings[id].start);
        s.end = std::max(s.end, result.timings[id].end);
      }
    }
    if (s.start.ps == ~0ULL) s.start = Time{};
    return s;
  };
  auto handle_name = [&](int domain, int handle) {
    const auto found = loaded.handle_names.find({domain, handle});
    return found == loaded.handle_names.end() ? std::to_string(handle) : found->second;
  };
  // Query: repeats of the handle finished on that rank when the Query ran.
  auto completed_at = [&](const Program::QueryInfo& q) {
    int done = 0;
    for (const Program::HandleInfo& h : built.handles) {
      if (h.domain != q.domain || h.handle != q.handle) continue;
      for (const auto& ids : h.tasks) {
        bool finished = true;
        for (TaskId id : ids) {
          if (built.graph.rank_of(id) == q.rank) finished = finished && result.timings[id].end <= result.timings[q.task].start;
        }
        done += finished ? 1 : 0;
      }
    }
    return done;
  };
  const std::vector<PathStep> path = critical_path(built.graph, result);

  if (format == "json") {
    nlohmann::json out{{"program", loaded.name}, {"topology", spec.name}, {"ranks", spec.npus},
                       {"total_us", std::stod(format_us(result.elapsed(), 6))}};
    out["handles"] = nlohmann::json::array();
    for (const Program::HandleInfo& h : built.handles) {
      const Span s = span_of(h.tasks);
      nlohmann::json item{{"domain", h.domain}, {"handle", h.handle}, {"name", handle_name(h.domain, h.handle)},
                          {"op", h.op}, {"repeat", h.repeat}, {"start_us", std::stod(format_us(s.start, 6))},
                          {"end_us", std::stod(format_us(s.end, 6))},
                          {"duration_us", std::stod(format_us(s.end - s.start, 6))}};
      // The same span per rank: InterHcclGroupSync and Wait act per rank.
      std::map<int, std::vector<std::vector<TaskId>>> by_rank;
      for (const auto& ids : h.tasks) {
        for (TaskId id : ids) {
          auto& per = by_rank[built.graph.rank_of(id)];
          if (per.empty()) per.emplace_back();
          per.front().push_back(id);
        }
      }
      item["ranks"] = nlohmann::json::array();
      for (const auto& [rank, ids] : by_rank) {
        const Span rs = span_of(ids);
        item["ranks"].push_back({{"rank", rank}, {"start_us", std::stod(format_us(rs.start, 6))},
                                 {"end_us", std::stod(format_us(rs.end, 6))}});
      }
      out["handles"].push_back(item);
    }
    out["queries"] = nlohmann::json::array();
    for (const auto& q : built.queries) {
      out["queries"].push_back({{"rank", q.rank}, {"domain", q.domain}, {"handle", q.handle},
                                {"at_us", std::stod(format_us(result.timings[q.task].start, 6))},
                                {"completed_repeats", completed_at(q)}});
    }
    out["critical_path"] = nlohmann::json::array();
    for (const PathStep& step : path) {
      const Task& t = built.graph.task(step.task);
      out["critical_path"].push_back({{"rank", built.graph.rank_of(step.task)},
                                      {"thread", built.graph.thread(t.thread).name},
                                      {"task", task_kind_name(t.kind)}, {"label", t.label}, {"via", step.via},
                                      {"start_us", std::stod(format_us(result.timings[step.task].start, 6))},
                                      {"end_us", std::stod(format_us(result.timings[step.task].end, 6))}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "# program " << loaded.name << " on " << spec.name << " (" << spec.npus << " ranks)\n";
    std::cout << "total_time_us " << format_us(result.elapsed()) << "\n\n";
    std::printf("%-12s %6s %-12s %7s %14s %14s %14s\n", "handle", "domain", "op", "repeat", "start_us", "end_us",
                "duration_us");
    for (const Program::HandleInfo& h : built.handles) {
      const Span s = span_of(h.tasks);
      std::printf("%-12s %6d %-12s %7d %14s %14s %14s\n", handle_name(h.domain, h.handle).c_str(), h.domain,
                  h.op.c_str(), h.repeat, format_us(s.start).c_str(), format_us(s.end).c_str(),
                  format_us(s.end - s.start).c_str());
    }
    for (const auto& q : built.queries) {
      std::cout << "query: rank " << q.rank << " domain " << q.domain << " handle " << handle_name(q.domain, q.handle)
                << " at " << format_us(result.timings[q.task].start) << " us: " << completed_at(q)
                << " repeat(s) completed\n";
    }
    std::cout << "\ncritical path (" << path.size() << " tasks, times in us):\n";
    for (const PathStep& step : path) {
      std::cout << "  [" << step.via << "] " << task_line(built.graph, result, step.task, platform) << "\n";
    }
  }
  if (stats) print_stats(clock, built.graph.tasks().size(), result.activations);
  return 0;
}

}  // namespace
}  // namespace hcclsim

int sc_main(int argc, char* argv[]) {
  using namespace hcclsim;
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty() || words[0] == "help" || words[0] == "--help" || words[0] == "-h") {
    std::cout << kUsage;
    return words.empty() ? 2 : 0;
  }
  return run_command(words, [&](const std::string& command, Args& args) -> int {
    if (command == "perf") return perf(args);
    if (command == "run") return run(args);
    throw InputError("command", "unknown command '" + command + "'; expected perf, run or help");
  });
}
