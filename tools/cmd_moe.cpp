// `hcclsim moe dispatch|combine|both`: MoE expert-parallel dispatch and
// combine as the Ascend AIV kernels run them (sim/moe/moe.h).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "sim/link_usage.h"
#include "sim/moe/moe.h"
#include "sim/report/row_writer.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

class MoeCommand : public Command {
 public:
  std::string name() const override { return "moe"; }
  std::string summary() const override {
    return "MoE expert-parallel dispatch / combine (DeepEP on Ascend, MC2 MoeDistribute*) on AIV cores; normal mode "
           "across A2 servers runs the A2 kernels (notify_dispatch_a2, dispatch_normal_a2, moe_distribute_combine_a2)";
  }
  void declare(CommandOptions& app) override {
    app.add_option("phase", phase_, "dispatch | combine | both")->required();
    app.add_option("--ep", p_.ep, "ranks taking part (expert parallelism)")->required()->type_name("N");
    app.add_option("--tokens", p_.tokens, "tokens per rank")->required()->type_name("T");
    app.add_option("--hidden", p_.hidden, "hidden size (a multiple of 128)")->required()->type_name("H");
    app.add_option("--topk", p_.topk, "experts per token")->required()->type_name("K");
    app.add_option("--experts", p_.experts, "routed experts in all (a multiple of --ep)")->required()->type_name("E");
    app.add_option("--mode", mode_, "normal (default) | low_latency")->type_name("M");
    app.add_option("--dtype", dtype_, "dispatch payload: int8 (default, per-token scale) | bf16")->type_name("D");
    app.add_option("--routing", p_.routing, "uniform (default) | balanced | zipf:S | file:F (expert ids per token)")
        ->type_name("R");
    app.add_option("--seed", seed_, "seed of the uniform and zipf routings, and of --scenario's draws (default 1)")->type_name("S");
    topology_.declare(app);
    scenario_.declare(app, false);  // --seed above seeds the draws too
    app.add_option("--format", format_,
                   "table | json | csv (default table); a json row's \"assumed\" lists the profile's assumed "
                   "constants its tasks used, a table ends with them")
        ->type_name("F");
    app.add_option("--trace", trace_file_, "Chrome trace: AIV cores' copies, flag sets and flag waits per rank")
        ->type_name("FILE");
    app.add_flag("--stats", stats_, "print wall time, tasks, events/s and peak memory to stderr");
  }

  int run(CommandContext& ctx) override {
    if (phase_ != "dispatch" && phase_ != "combine" && phase_ != "both") {
      throw InputError("<phase>", "unknown phase '" + phase_ + "'; expected dispatch, combine or both");
    }
    if (mode_ != "normal" && mode_ != "low_latency") {
      throw InputError("option --mode", "unknown mode '" + mode_ + "'; expected normal or low_latency");
    }
    p_.mode = mode_ == "normal" ? MoeMode::Normal : MoeMode::LowLatency;
    if (dtype_ != "int8" && dtype_ != "bf16") throw InputError("option --dtype", "expected int8 or bf16, got '" + dtype_ + "'");
    p_.int8 = dtype_ == "int8";
    p_.seed = parse_seed(seed_);
    if (format_ != "table" && format_ != "json" && format_ != "csv") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected table, json or csv");
    }
    std::string topology_file;
    TopologySpec spec = topology_.load(&topology_file);
    if (!topology_.flow_quantum_given()) spec.flow_batching.quantum_ps = moe_flow_quantum(p_).ps;
    check_moe_params(p_, spec.npus);
    std::optional<OutputFile> trace_out;
    if (!trace_file_.empty()) trace_out.emplace("--trace", trace_file_);
    std::vector<MoePhase> phases;
    if (phase_ != "combine") phases.push_back(MoePhase::Dispatch);
    if (phase_ != "dispatch") phases.push_back(MoePhase::Combine);
    const std::optional<ScenarioSetup> scenario = scenario_.load(spec, p_.seed);
    if (scenario && format_ == "csv") {
      throw InputError("option --format", "--scenario's figures are in the table's footnote and json's \"scenario\"; "
                                          "csv has no place for them: give --format table or json");
    }
    if (scenario && trace_out) {
      throw InputError("option --trace", "--scenario runs each phase several times (healthy, then each draw); a "
                                         "trace of one of them is not written: leave --trace out");
    }
    WallClock clock;
    Platform platform(spec);
    TraceWriter trace;
    std::vector<MoeRun> runs;
    std::vector<ScenarioOutcome> outcomes;  // per phase, under --scenario
    if (!scenario) {
      runs = run_moe(platform, p_, phases, trace_out ? &trace : nullptr);
    } else {
      LinkMeter meter(platform);
      for (const MoePhase phase : phases) {
        std::vector<MoeRun> draws;  // the healthy run, then each draw
        outcomes.push_back(run_scenario(platform, *scenario, [&] {
          meter.start();
          draws.push_back(run_moe(platform, p_, {phase}, nullptr).front());
          const Time time{static_cast<std::uint64_t>(std::llround(draws.back().time_us * 1e6))};
          const LinkSummary busiest = meter.summary(time);
          return ScenarioPoint{time, bottleneck_label(busiest.busiest, busiest.busiest_utilization)};
        }));
        runs.push_back(draws.at(1 + static_cast<std::size_t>(outcomes.back().p50_draw)));
      }
    }
    std::ostream& out = *ctx.out;
    auto phase_name = [](MoePhase ph) { return ph == MoePhase::Dispatch ? "dispatch" : "combine"; };
    if (format_ == "json") {
      nlohmann::json rows = nlohmann::json::array();
      for (const MoeRun& r : runs) {
        nlohmann::json links = nlohmann::json::object();
        for (const auto& [kind, bytes] : r.link_bytes) links[kind] = bytes;
        rows.push_back({{"phase", phase_name(r.phase)}, {"mode", mode_}, {"ep", p_.ep}, {"tokens", p_.tokens},
                        {"hidden", p_.hidden}, {"topk", p_.topk}, {"experts", p_.experts},
                        {"dtype", r.phase == MoePhase::Dispatch ? dtype_ : "bf16"}, {"time_us", round3(r.time_us)},
                        {"time_min_us", round3(r.time_min_us)}, {"time_mean_us", round3(r.time_mean_us)},
                        {"bandwidth_GBps", round3(r.bandwidth_gbps)}, {"bytes_per_rank", round3(r.bytes_per_rank)},
                        {"link_bytes", links}, {"expert_imbalance", round3(r.expert_imbalance)}, {"kernel", r.kernel},
                        {"routing", p_.routing}, {"topology", spec.name}, {"assumed", r.assumed}});
        // A normal-mode dispatch: its data kernel alone (a profiler's kernel time), mean over ranks.
        if (r.kernel_time_us > 0) rows.back()["kernel_time_us"] = round3(r.kernel_time_us);
        if (!outcomes.empty()) rows.back()["scenario"] = scenario_json(outcomes[rows.size() - 1]);
      }
      out << rows.dump(2) << "\n";
    } else if (format_ == "csv") {
      out << "phase,mode,ep,tokens,hidden,topk,experts,dtype,time_us,time_min_us,time_mean_us,bandwidth_GBps,"
             "bytes_per_rank,expert_imbalance,kernel\n";
      for (const MoeRun& r : runs) {
        out << phase_name(r.phase) << "," << mode_ << "," << p_.ep << "," << p_.tokens << "," << p_.hidden << ","
            << p_.topk << "," << p_.experts << "," << (r.phase == MoePhase::Dispatch ? dtype_ : "bf16") << ","
            << fmt(r.time_us) << "," << fmt(r.time_min_us) << "," << fmt(r.time_mean_us) << "," << fmt(r.bandwidth_gbps)
            << "," << fmt(r.bytes_per_rank) << "," << fmt(r.expert_imbalance) << "," << r.kernel << "\n";
      }
    } else {
      out << "# MoE " << mode_ << " on " << p_.ep << " ranks of " << spec.name << ": " << p_.tokens
          << " tokens per rank, hidden " << p_.hidden << ", top-" << p_.topk << " of " << p_.experts
          << " experts, routing " << p_.routing << "\n";
      char line[256];
      std::snprintf(line, sizeof line, "%-9s %12s %12s %12s %14s %16s %10s  %s\n", "phase", "time_us", "min_us",
                    "mean_us", "bandwidth_GBps", "bytes_per_rank", "imbalance", "kernel");
      out << line;
      for (const MoeRun& r : runs) {
        std::snprintf(line, sizeof line, "%-9s %12.3f %12.3f %12.3f %14.3f %16.0f %10.3f  %s\n", phase_name(r.phase),
                      r.time_us, r.time_min_us, r.time_mean_us, r.bandwidth_gbps, r.bytes_per_rank, r.expert_imbalance,
                      r.kernel.c_str());
        out << line;
        out << "          link bytes:";
        for (const auto& [kind, bytes] : r.link_bytes) out << " " << kind << " " << bytes;
        out << "\n";
      }
      std::set<std::string> assumed;
      for (const MoeRun& r : runs) assumed.insert(r.assumed.begin(), r.assumed.end());
      out << assumed_footnote({assumed.begin(), assumed.end()}, spec.profile_file);
      std::vector<const ScenarioOutcome*> rows;
      std::vector<std::string> labels;
      for (std::size_t i = 0; i < outcomes.size(); ++i) {
        rows.push_back(&outcomes[i]);
        labels.push_back(phase_name(runs[i].phase));
      }
      out << scenario_footnote(rows, labels, "phase", "time_us");
    }
    if (trace_out) {
      trace.write(trace_out->stream());
      trace_out->close();
    }
    if (stats_) {
      std::uint64_t tasks = 0;
      std::uint64_t events = 0;
      for (const MoeRun& r : runs) {
        tasks += r.tasks;
        events += r.events;
      }
      print_stats(clock, tasks, events);
    }
    return 0;
  }

 private:
  static double round3(double v) { return std::round(v * 1000.0) / 1000.0; }
  static std::string fmt(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
  }
  std::string phase_;
  MoeParams p_;
  std::string mode_ = "normal";
  std::string dtype_ = "int8";
  std::string seed_ = "1";
  TopologyOptions topology_;
  ScenarioOptions scenario_;
  std::string format_ = "table";
  std::string trace_file_;
  bool stats_ = false;
};

}  // namespace

std::unique_ptr<Command> make_moe_command() { return std::make_unique<MoeCommand>(); }

}  // namespace hcclsim
