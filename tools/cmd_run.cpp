// `hcclsim run --program FILE`: a communication program (HCCL thread/notify
// API, Ascend C Hccl kernels) on a topology: total time, each handle's span,
// Query results and the critical path.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "base/error.h"
#include "models/link/channel.h"
#include "sim/critical_path.h"
#include "sim/perf/perf.h"
#include "sim/program/program_json.h"
#include "sim/report/link_stats.h"
#include "sim/report/row_writer.h"
#include "sim/scheduler.h"
#include "tools/baseline_output.h"
#include "tools/cli_common.h"
#include "tools/command.h"
#include "topologies/config.h"

namespace hcclsim {
namespace {

// printf into a string (the table's fixed columns).
std::string line(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

std::string task_line(const TaskGraph& g, const RunResult& r, TaskId id, Platform& platform) {
  const Task& t = g.task(id);
  std::string line = format_us(r.timings[id].start) + " -> " + format_us(r.timings[id].end) + "  rank " +
                     std::to_string(g.rank_of(id)) + " " + g.thread(t.thread).name + "  " + task_kind_name(t.kind);
  if (t.label != 0) line += " (" + g.label(t) + ")";
  if ((t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline) && t.bytes > 0) {
    line += " " + std::to_string(t.bytes) + " B over";
    for (Channel* ch : platform.route(t.src.rank, t.dst.rank)) line += " [" + ch->label() + "]";
  }
  return line;
}


class RunCommand : public Command {
 public:
  std::string name() const override { return "run"; }
  std::string summary() const override {
    return "run a communication program (HCCL thread/notify API, Ascend C Hccl kernels with AIC / AIV compute and "
           "MoE dispatch / combine calls): total time, each handle's and MoE call's start, end and duration, Query "
           "results and the critical path";
  }
  void declare(CommandOptions& app) override {
    app.add_option("--program", program_file_,
                   "program JSON (configs/programs/); kernel steps: init, set_tiling, prepare, commit, wait, query, "
                   "inter_group_sync, iterate, finalize, matmul, vector, moe_dispatch, moe_combine (AIV list), "
                   "cross_core_set, cross_core_wait (docs/user-guide.md, Programs)")
        ->type_name("FILE")
        ->required();
    topology_.declare(app);
    app.add_option("--format", format_,
                   "table | json (default table); json's \"assumed\" lists the profile's assumed constants the "
                   "program's tasks used, the table's handle list ends with them")
        ->type_name("F");
    app.add_option("--trace", trace_file_,
                   "Chrome trace: a track per domain/engine/thread, flow arrows from each notify record to the "
                   "wait it released")
        ->type_name("FILE");
    app.add_option("--save-baseline", baseline_file_,
                   "record the command, version, input files and per-handle times for 'hcclsim check'")
        ->type_name("FILE");
    app.add_option("--links", links_file_,
                   "write every link direction's bytes, busy time, utilization and peak concurrent flows as CSV "
                   "(row,data_size,link,kind,bytes,busy_us,utilization,peak_flows)")
        ->type_name("FILE");
    memory_limit_.declare(app);
    scenario_.declare(app);
    app.add_flag("--stats", stats_, "print wall time, tasks, events/s, peak memory and the 10 busiest links to stderr");
  }
  int run(CommandContext& ctx) override;

 private:
  std::string program_file_;
  TopologyOptions topology_;
  MemoryLimit memory_limit_;
  ScenarioOptions scenario_;
  std::string format_ = "table";
  std::string trace_file_;
  std::string baseline_file_;
  std::string links_file_;
  bool stats_ = false;
};

int RunCommand::run(CommandContext& ctx) {
  const std::string& program_file = program_file_;
  std::string topology_file;
  const TopologySpec spec = topology_.load(&topology_file);
  const std::string& format = format_;
  if (format != "table" && format != "json") {
    throw InputError("option --format", "unknown format '" + format + "'; expected table or json");
  }

  const std::optional<ScenarioSetup> scenario = scenario_.load(spec);
  const std::string too_large =
      footprint_problem(Footprint{0, static_cast<std::uint64_t>(spec.npus) * kPlatformBytesPerNpu},
                        "a platform of " + std::to_string(spec.npus) + " NPUs", memory_limit_.bytes());
  if (!too_large.empty()) throw InputError(topology_file, too_large);
  Program program(spec);
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
  // Outputs are opened before the run: a bad path fails now, not after it.
  std::optional<OutputFile> trace_out;
  std::optional<BaselineOutput> baseline;
  std::optional<OutputFile> links_out;
  if (!ctx.replay) {
    if (!trace_file_.empty()) trace_out.emplace("--trace", trace_file_);
    if (!links_file_.empty()) links_out.emplace("--links", links_file_);
    if (!baseline_file_.empty()) baseline.emplace(baseline_file_);
  }
  WallClock clock;
  Platform& platform = platform_kept_until_exit(spec);
  Scheduler scheduler(platform);
  LinkMeter meter(platform);
  // Under a scenario: healthy, then each draw; what follows (handles,
  // critical path, trace, links) is the p50 draw, run once more.
  std::optional<ScenarioOutcome> outcome;
  if (scenario) {
    outcome = run_scenario(platform, *scenario, [&] {
      meter.start();
      const RunResult r = scheduler.run(built.graph);
      const LinkSummary busiest = meter.summary(r.elapsed());
      return ScenarioPoint{r.elapsed(), bottleneck_label(busiest.busiest, busiest.busiest_utilization)};
    });
    set_scenario_draw(platform, *scenario, outcome->p50_draw);
  }
  meter.start();
  RunResult result = scheduler.run(built.graph);
  if (outcome) {
    // Run after the others, later in simulated time: its times from its own start, as a run alone.
    const Time begin = result.begin;
    for (TaskTiming& t : result.timings) {
      if (t.started) t.start = t.start - begin;
      if (t.finished) t.end = t.end - begin;
    }
    result.end = result.end - begin;
    result.begin = Time{};
  }
  const std::vector<LinkUsage> links = meter.stop(result.elapsed());
  if (links_out) {
    write_links_csv_header(links_out->stream());
    write_links_csv(links_out->stream(), "0", "", links);
    links_out->close();
  }
  if (trace_out) {
    TraceWriter trace;
    trace.add_run(built.graph, result, platform, loaded.name);
    trace.write(trace_out->stream());
    trace_out->close();
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
  // MoE calls: the name given in the file, else the op (numbered by call
  // when a program makes several of one op).
  auto moe_name = [&](std::size_t call) {
    const auto found = loaded.moe_names.find(call);
    if (found != loaded.moe_names.end()) return found->second;
    const std::string& op = built.moe_calls[call].op;
    int same = 0;
    for (const Program::MoeCallInfo& c : built.moe_calls) same += c.op == op ? 1 : 0;
    return same > 1 ? op + "#" + std::to_string(call) : op;
  };
  auto moe_ranks = [&](const Program::MoeCallInfo& c) {
    std::map<int, std::vector<std::vector<TaskId>>> by_rank;
    for (TaskId id : c.tasks) {
      auto& per = by_rank[built.graph.rank_of(id)];
      if (per.empty()) per.emplace_back();
      per.front().push_back(id);
    }
    return by_rank;
  };
  const std::vector<PathStep> path = critical_path(built.graph, result);
  std::ostream& out = *ctx.out;
  RunRecord record{"run", {}};
  for (const Program::HandleInfo& h : built.handles) {
    const Span s = span_of(h.tasks);
    record.items.push_back(handle_item(handle_name(h.domain, h.handle), h.domain, h.repeat, h.op,
                                       static_cast<double>((s.end - s.start).ps) / 1e6));
  }
  record.items.push_back(total_item(static_cast<double>(result.elapsed().ps) / 1e6));

  if (format == "json") {
    nlohmann::json doc{{"program", loaded.name}, {"topology", spec.name}, {"ranks", spec.npus},
                       {"total_us", std::stod(format_us(result.elapsed(), 6))},
                       {"links", link_summary_json(meter.summary(result.elapsed()))},
                       {"assumed", assumed_constants_used(result.constants, spec)}};
    if (outcome) doc["scenario"] = scenario_json(*outcome);
    doc["handles"] = nlohmann::json::array();
    for (const Program::HandleInfo& h : built.handles) {
      const Span s = span_of(h.tasks);
      nlohmann::json item{{"domain", h.domain}, {"handle", h.handle}, {"name", handle_name(h.domain, h.handle)},
                          {"op", h.op}, {"executor", h.executor}, {"ranks", h.ranks}, {"repeat", h.repeat},
                          {"start_us", std::stod(format_us(s.start, 6))},
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
      doc["handles"].push_back(item);
    }
    doc["moe"] = nlohmann::json::array();
    for (std::size_t i = 0; i < built.moe_calls.size(); ++i) {
      const Program::MoeCallInfo& c = built.moe_calls[i];
      const Span s = span_of({c.tasks});
      nlohmann::json item{{"call", i}, {"name", moe_name(i)}, {"op", c.op}, {"kernel", c.kernel},
                          {"mode", c.params.mode == MoeMode::Normal ? "normal" : "low_latency"},
                          {"ep", c.params.ep}, {"tokens", c.params.tokens}, {"hidden", c.params.hidden},
                          {"topk", c.params.topk}, {"experts", c.params.experts},
                          {"dtype", c.op == "moe_dispatch" && c.params.int8 ? "int8" : "bf16"},
                          {"routing", c.params.routing}, {"seed", c.params.seed},
                          {"start_us", std::stod(format_us(s.start, 6))}, {"end_us", std::stod(format_us(s.end, 6))},
                          {"duration_us", std::stod(format_us(s.end - s.start, 6))}};
      item["ranks"] = nlohmann::json::array();
      for (const auto& [rank, ids] : moe_ranks(c)) {
        const Span rs = span_of(ids);
        item["ranks"].push_back({{"rank", rank}, {"start_us", std::stod(format_us(rs.start, 6))},
                                 {"end_us", std::stod(format_us(rs.end, 6))}});
      }
      doc["moe"].push_back(item);
    }
    doc["queries"] = nlohmann::json::array();
    for (const auto& q : built.queries) {
      doc["queries"].push_back({{"rank", q.rank}, {"domain", q.domain}, {"handle", q.handle},
                                {"at_us", std::stod(format_us(result.timings[q.task].start, 6))},
                                {"completed_repeats", completed_at(q)}});
    }
    doc["critical_path"] = nlohmann::json::array();
    for (const PathStep& step : path) {
      const Task& t = built.graph.task(step.task);
      doc["critical_path"].push_back({{"rank", built.graph.rank_of(step.task)},
                                      {"thread", built.graph.thread(t.thread).name},
                                      {"task", task_kind_name(t.kind)}, {"label", built.graph.label(t)}, {"via", step.via},
                                      {"start_us", std::stod(format_us(result.timings[step.task].start, 6))},
                                      {"end_us", std::stod(format_us(result.timings[step.task].end, 6))}});
    }
    out << doc.dump(2) << "\n";
  } else {
    out << "# program " << loaded.name << " on " << spec.name << " (" << spec.npus << " ranks)\n";
    out << "total_time_us " << format_us(result.elapsed()) << "\n\n";
    out << line("%-12s %6s %-12s %7s %14s %14s %14s\n", "handle", "domain", "op", "repeat", "start_us", "end_us",
                "duration_us");
    for (const Program::HandleInfo& h : built.handles) {
      const Span s = span_of(h.tasks);
      out << line("%-12s %6d %-12s %7d %14s %14s %14s", handle_name(h.domain, h.handle).c_str(), h.domain,
                  h.op.c_str(), h.repeat, format_us(s.start).c_str(), format_us(s.end).c_str(),
                  format_us(s.end - s.start).c_str());
      out << (h.executor.empty() ? std::string() : "  " + h.executor + " on " + std::to_string(h.ranks) + " ranks") << "\n";
    }
    for (std::size_t i = 0; i < built.moe_calls.size(); ++i) {
      const Program::MoeCallInfo& c = built.moe_calls[i];
      const Span s = span_of({c.tasks});
      out << line("%-12s %6s %-12s %7s %14s %14s %14s  %s on %d ranks\n", moe_name(i).c_str(), "-", c.op.c_str(), "-",
                  format_us(s.start).c_str(), format_us(s.end).c_str(), format_us(s.end - s.start).c_str(),
                  c.kernel.c_str(), c.params.ep);
    }
    out << assumed_footnote(assumed_constants_used(result.constants, spec), spec.profile_file);
    if (outcome) out << scenario_footnote({&*outcome}, {loaded.name}, "program", "total_time_us");
    for (const auto& q : built.queries) {
      out << "query: rank " << q.rank << " domain " << q.domain << " handle " << handle_name(q.domain, q.handle)
                << " at " << format_us(result.timings[q.task].start) << " us: " << completed_at(q)
                << " repeat(s) completed\n";
    }
    out << "\ncritical path (" << path.size() << " tasks, times in us):\n";
    for (const PathStep& step : path) {
      out << "  [" << step.via << "] " << task_line(built.graph, result, step.task, platform) << "\n";
    }
  }
  out.flush();
  if (stats_ && !ctx.replay) {
    print_stats(clock, built.graph.tasks().size(), result.activations);
    std::cerr << format_busiest_links(links, 10, "stats: busiest links");
  }
  if (ctx.record) *ctx.record = record;
  if (baseline) baseline->write(ctx.words, record);
  return 0;
}


}  // namespace

std::unique_ptr<Command> make_run_command() { return std::make_unique<RunCommand>(); }

}  // namespace hcclsim
