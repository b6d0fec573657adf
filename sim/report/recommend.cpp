#include "sim/report/recommend.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "sim/executors/hccl_algo.h"
#include "base/error.h"
#include "sim/estimate/estimate.h"
#include "base/units.h"

namespace hcclsim {

std::vector<Expansion> supported_expansions(const HcclApiLimits& api) {
  // HCCL_OP_EXPANSION_MODE (CANN environment variable reference): the
  // product's default (A2 HOST, A3 AI_CPU) and AIV.
  return {default_expansion(api), Expansion::Aiv};
}

std::string expansion_env_value(Expansion expansion) {
  switch (expansion) {
    case Expansion::Host: return "HOST";
    case Expansion::AiCpu: return "AI_CPU";
    case Expansion::Aiv: return "AIV";
  }
  return "HOST";
}

std::vector<RecommendCandidate> recommend_candidates(const Hierarchy& h, const HcclApiLimits& api) {
  std::vector<std::pair<std::string, std::vector<std::string>>> levels{{"level0", {"NA", "fullmesh", "ring"}}};
  if (h.servers() > 1) levels.push_back({"level1", {"NA", "ring", "H-D_R", "NHR", "NB", "pairwise", "pipeline"}});
  if (h.pods > 1) levels.push_back({"level2", {"NA", "ring", "H-D_R", "NHR", "NB", "pairwise"}});
  std::vector<std::string> algos{""};
  for (const auto& [level, names] : levels) {
    std::vector<std::string> longer;
    for (const std::string& prefix : algos) {
      for (const std::string& name : names) longer.push_back(prefix + (prefix.empty() ? "" : ";") + level + ":" + name);
    }
    algos = std::move(longer);
  }
  const Expansion by_default = default_expansion(api);
  std::vector<RecommendCandidate> out;
  for (std::size_t a = 0; a < algos.size(); ++a) {
    for (const Expansion e : supported_expansions(api)) {
      RecommendCandidate c;
      c.algo = algos[a];
      c.request = parse_hccl_algo(algos[a], CollOp::AllReduce);
      c.expansion = e;
      c.is_default = a == 0 && e == by_default;  // the first string is every level NA
      out.push_back(std::move(c));
    }
  }
  return out;
}

double gain_pct(Time default_time, Time best_time) {
  if (best_time.ps == 0) return 0;
  return (static_cast<double>(default_time.ps) / static_cast<double>(best_time.ps) - 1.0) * 100.0;
}

namespace {

// What a candidate runs at one size: the executor and every field of its
// plan, which fix the time.
struct Selected {
  std::string executor;
  std::string key;
};

std::string plan_key(const ExecutorChoice& choice) {
  const AlgoPlan& p = choice.plan;
  return choice.executor + "|" + std::to_string(static_cast<int>(p.level0)) + "," +
         std::to_string(static_cast<int>(p.level1)) + "," + std::to_string(static_cast<int>(p.level2)) + "," +
         std::to_string(p.pipeline) + std::to_string(p.flat) + std::to_string(p.one_shot);
}

struct Measured {
  std::optional<Time> time;   // nullopt: the run refused it
  std::string executor;
  std::string levels;
  std::vector<std::string> assumed;  // the assumed constants its tasks used
};

PerfRequest candidate_request(const PerfRequest& base, const RecommendCandidate& c) {
  PerfRequest req = base;
  req.algo = c.request;
  // The default is perf with neither --algo nor --expansion.
  req.expansion = c.is_default ? std::nullopt : std::optional<Expansion>(c.expansion);
  req.executor.clear();
  req.check = false;
  req.link_details = false;
  return req;
}

}  // namespace

RecommendOp recommend_op(const TopologySpec& topology, const PerfRequest& base,
                         const std::vector<std::uint64_t>& all_sizes, const std::vector<RecommendCandidate>& candidates,
                         RecommendModel model, const RecommendRunner& runner) {
  RecommendOp result;
  result.op = base.op;
  const std::size_t n = candidates.size();
  // What each candidate selects at each size (nullopt: HCCL or hcclsim refuses it).
  std::vector<std::vector<std::optional<Selected>>> selected(n);
  std::vector<std::uint64_t>& sizes = result.sizes;
  // (first at every swept size; then, in `selected`, at the sizes whose default runs)
  std::vector<std::vector<std::optional<Selected>>> all(n, std::vector<std::optional<Selected>>(all_sizes.size()));
  for (std::size_t c = 0; c < n; ++c) {
    const PerfRequest req = candidate_request(base, candidates[c]);
    for (std::size_t s = 0; s < all_sizes.size(); ++s) {
      try {
        const ExecutorChoice choice = perf_choice(topology, req, all_sizes[s]);
        all[c][s] = Selected{choice.executor, plan_key(choice)};
      } catch (const std::invalid_argument& e) {
        if (candidates[c].is_default) {
          result.notes.push_back(coll_op_name(base.op) + " of " + format_size(all_sizes[s]) +
                                 " left out: HCCL's default cannot be simulated (" + e.what() + ")");
        }
      }
    }
  }
  std::size_t def = 0;
  while (def < n && !candidates[def].is_default) ++def;
  if (def == n) throw std::logic_error("recommend: no default candidate");
  for (std::size_t s = 0; s < all_sizes.size(); ++s) {
    if (!all[def][s]) continue;
    sizes.push_back(all_sizes[s]);
    for (std::size_t c = 0; c < n; ++c) selected[c].push_back(all[c][s]);
  }

  // The model: the estimate where it has a closed form for every executor.
  bool estimate = model == RecommendModel::Estimate;
  if (model == RecommendModel::Auto) {
    estimate = true;
    for (const auto& per_size : selected) {
      for (const auto& sel : per_size) {
        if (sel && find_estimate(sel->executor) == nullptr) estimate = false;
      }
    }
  }
  if (estimate) {
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      if (find_estimate(selected[def][s]->executor) == nullptr) {
        throw std::invalid_argument("--model estimate has no closed form for " + selected[def][s]->executor +
                                    " (HCCL's choice for " + coll_op_name(base.op) + " of " + format_size(sizes[s]) +
                                    "); use --model detailed");
      }
      for (std::size_t c = 0; c < n; ++c) {
        if (selected[c][s] && find_estimate(selected[c][s]->executor) == nullptr) selected[c][s].reset();
      }
    }
  }
  result.model = estimate ? "estimate" : "detailed";

  // Each (size, executor and plan) runs once, for the first candidate that selects it.
  std::vector<std::map<std::string, Measured>> measured(sizes.size());
  auto record = [&](std::size_t s, const std::string& key, const PerfRow& row) {
    measured[s][key] = Measured{row.time, row.executor, row.algo, row.assumed};
  };
  for (std::size_t c = 0; c < n; ++c) {
    std::vector<std::size_t> todo;
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      if (selected[c][s] && measured[s].count(selected[c][s]->key) == 0) todo.push_back(s);
    }
    if (todo.empty()) continue;
    PerfRequest req = candidate_request(base, candidates[c]);
    auto run = [&](const std::vector<std::size_t>& which) {
      req.sizes.clear();
      for (const std::size_t s : which) req.sizes.push_back(sizes[s]);
      const std::vector<PerfRow> rows = runner(req, estimate);
      for (std::size_t i = 0; i < which.size(); ++i) record(which[i], selected[c][which[i]]->key, rows.at(i));
    };
    try {
      run(todo);
    } catch (const std::exception& e) {
      // (the run's refusals: std::invalid_argument, InputError; a run that
      // does not finish, GraphError, is a fault and goes on)
      if (dynamic_cast<const GraphError*>(&e) != nullptr) throw;
      for (const std::size_t s : todo) {
        try {
          run({s});
        } catch (const GraphError&) {
          throw;
        } catch (const std::exception& one) {
          if (candidates[c].is_default) {
            throw std::invalid_argument(coll_op_name(base.op) + " of " + format_size(sizes[s]) +
                                        ", HCCL's default: " + one.what());
          }
          measured[s][selected[c][s]->key] = Measured{};
        }
      }
    }
  }

  result.times.assign(n, std::vector<std::optional<Time>>(sizes.size()));
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    RecommendRow row;
    row.op = coll_op_name(base.op);
    row.data_size = sizes[s];
    row.ranks = base.ranks;
    row.dtype = data_type_name(base.dtype);
    row.model = result.model;
    auto choice_of = [&](std::size_t c) {
      const Measured& m = measured[s].at(selected[c][s]->key);
      RecommendChoice out;
      out.executor = m.executor;
      out.algo = candidates[c].algo;
      out.levels = m.levels;
      out.expansion = candidates[c].expansion;
      out.time = *m.time;
      out.is_default = candidates[c].is_default;
      out.candidate = c;
      out.assumed = m.assumed;
      return out;
    };
    for (std::size_t c = 0; c < n; ++c) {
      if (!selected[c][s]) continue;
      const Measured& m = measured[s].at(selected[c][s]->key);
      if (!m.time) continue;
      result.times[c][s] = m.time;
      ++row.evaluated;
    }
    // The default first: a candidate must be strictly faster to replace it.
    std::size_t best = def;
    for (std::size_t c = 0; c < n; ++c) {
      if (result.times[c][s] && result.times[c][s]->ps < result.times[best][s]->ps) best = c;
    }
    row.skipped = n - row.evaluated;
    row.by_default = choice_of(def);
    row.best = choice_of(best);
    row.gain = gain_pct(row.by_default.time, row.best.time);
    result.rows.push_back(std::move(row));
  }
  return result;
}

ProcessSetting choose_process_setting(const std::vector<RecommendOp>& ops,
                                      const std::vector<RecommendCandidate>& candidates, const HcclApiLimits& api) {
  std::size_t def = 0;
  while (def < candidates.size() && !candidates[def].is_default) ++def;
  // A candidate's time summed over an op's sizes; nullopt when it is refused at one.
  auto total = [&](const RecommendOp& op, std::size_t c) -> std::optional<Time> {
    Time sum;
    for (const std::optional<Time>& t : op.times[c]) {
      if (!t) return std::nullopt;
      sum = sum + *t;
    }
    return sum;
  };
  std::optional<ProcessSetting> best;
  std::vector<std::pair<Expansion, std::string>> unusable;
  for (const Expansion e : supported_expansions(api)) {
    ProcessSetting setting;
    setting.expansion = e;
    setting.expansion_is_default = e == default_expansion(api);
    bool feasible = true;
    for (const RecommendOp& op : ops) {
      ProcessSetting::PerOp per;
      per.default_total = *total(op, def);
      std::optional<Time> least;
      // The default (or, for another mode, that mode with every level NA) comes first.
      for (std::size_t c = 0; c < candidates.size(); ++c) {
        if (candidates[c].expansion != e) continue;
        const std::optional<Time> t = total(op, c);
        if (t && (!least || t->ps < least->ps)) {
          least = t;
          per.candidate = c;
        }
      }
      if (!least) {
        feasible = false;
        unusable.push_back({e, coll_op_name(op.op)});
        break;
      }
      per.total = *least;
      setting.expansion_total = setting.expansion_total + per.total;
      setting.default_total = setting.default_total + per.default_total;
      setting.ops.push_back(per);
    }
    if (!feasible) continue;
    if (!best || setting.expansion_total.ps < best->expansion_total.ps) best = setting;
  }
  // (the default mode is always feasible: its default candidate ran at every size)
  best->unusable = unusable;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    ProcessSetting::PerOp& per = best->ops[i];
    per.alone = def;
    per.alone_total = per.default_total;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      const std::optional<Time> t = total(ops[i], c);
      if (t && t->ps < per.alone_total.ps) {
        per.alone = c;
        per.alone_total = *t;
      }
    }
  }
  return *best;
}

namespace {

// What AIV expansion's times rest on: the assumed constants the AIV rows
// used (none where the profile's AIV constants are fitted), and on A2 the
// scope HCCL documents for it.
std::string aiv_caveat(const std::vector<RecommendOp>& ops) {
  std::set<std::string> assumed;   // over the rows whose best setting expands on AIV
  for (const RecommendOp& op : ops) {
    for (const RecommendRow& r : op.rows) {
      if (r.best.expansion == Expansion::Aiv) assumed.insert(r.best.assumed.begin(), r.best.assumed.end());
    }
  }
  std::string out = "# AIV: ";
  if (assumed.empty()) {
    out += "no assumed constant in these rows";
  } else {
    out += "these rows rest on assumed constants (docs/calibration.md: Assumed constants): ";
    for (auto it = assumed.begin(); it != assumed.end(); ++it) out += (it == assumed.begin() ? "" : ", ") + *it;
  }
  return out + "; on A2 HCCL documents AIV expansion for inference features only\n";
}

std::string fixed(double v, int decimals = 2) { return format_fixed(v, decimals); }

// HCCL_ALGO's op names for the per-op form ("allreduce=...").
std::string hccl_algo_op(CollOp op) {
  static const char* names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"};
  return names[static_cast<std::size_t>(op)];
}

void write_columns(std::ostream& out, const std::vector<std::vector<std::string>>& lines,
                   const std::vector<bool>& right) {
  std::vector<std::size_t> width(right.size(), 0);
  for (const auto& line : lines) {
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  for (const auto& line : lines) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const std::string pad(width[i] - line[i].size(), ' ');
      text += (i ? "  " : "") + (right[i] ? pad + line[i] : line[i] + (i + 1 < line.size() ? pad : ""));
    }
    out << text << "\n";
  }
}

bool sets_levels(const RecommendCandidate& c) {
  return c.request.level0 || c.request.level1 || c.request.level2 || c.request.pipeline;
}

// "level0:ring with HOST", "HCCL's levels with AIV", "HCCL's default".
std::string setting_name(const RecommendCandidate& c) {
  if (c.is_default) return "HCCL's default";
  return (sets_levels(c) ? c.algo : std::string("HCCL's levels")) + " with " + expansion_env_value(c.expansion);
}

std::string size_range(const std::vector<std::uint64_t>& sizes) {
  if (sizes.empty()) return "no sizes";
  return sizes.front() == sizes.back() ? format_size(sizes.front())
                                       : format_size(sizes.front()) + ".." + format_size(sizes.back());
}

nlohmann::json choice_json(const RecommendChoice& c) {
  return nlohmann::json{{"executor", c.executor}, {"algo", c.algo},        {"levels", c.levels},
                        {"expansion", expansion_name(c.expansion)},       {"time_us", c.time.us()}};
}

}  // namespace

void write_recommend_table(std::ostream& out, const std::string& heading, const std::vector<RecommendOp>& ops,
                           std::size_t candidates) {
  out << "# Recommended HCCL settings for " << heading << " (" << candidates
      << " candidates: HCCL_ALGO x HCCL_OP_EXPANSION_MODE)\n";
  std::vector<std::vector<std::string>> lines{{"op", "data_size", "model", "default_executor", "default_us", "best_HCCL_ALGO",
                                               "expansion", "best_executor", "best_us", "gain_%", "tried"}};
  for (const RecommendOp& op : ops) {
    for (const RecommendRow& r : op.rows) {
      lines.push_back({r.op, std::to_string(r.data_size), r.model, r.by_default.executor, fixed(r.by_default.time.us()),
                       r.best.is_default ? "(default)" : r.best.algo,
                       r.best.is_default ? "(default)" : expansion_name(r.best.expansion), r.best.executor,
                       fixed(r.best.time.us()), fixed(r.gain), std::to_string(r.evaluated)});
    }
  }
  write_columns(out, lines, {false, true, false, false, true, false, false, false, true, true, true});
  out << "# gain_% = default_us / best_us - 1; a setting must be strictly faster to replace HCCL's default; tried = "
         "candidates that run for the op and size (HCCL accepts them and hcclsim models the executor; the others "
         "are skipped)\n";
  if (std::any_of(ops.begin(), ops.end(), [](const RecommendOp& op) {
        return std::any_of(op.rows.begin(), op.rows.end(),
                           [](const RecommendRow& r) { return !r.best.is_default && r.best.expansion == Expansion::Aiv; });
      })) {
    out << aiv_caveat(ops);
  }
  for (const RecommendOp& op : ops) {
    for (const std::string& note : op.notes) out << "# " << note << "\n";
  }
}

nlohmann::json recommend_json(const std::vector<RecommendOp>& ops) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RecommendOp& op : ops) {
    for (const RecommendRow& r : op.rows) {
      rows.push_back(nlohmann::json{{"op", r.op},
                                    {"data_size", r.data_size},
                                    {"ranks", r.ranks},
                                    {"dtype", r.dtype},
                                    {"model", r.model},
                                    {"default", choice_json(r.by_default)},
                                    {"best", choice_json(r.best)},
                                    {"gain_pct", r.gain},
                                    {"candidates_tried", r.evaluated},
                                    {"candidates_skipped", r.skipped}});
    }
  }
  return rows;
}

void write_recommend_env(std::ostream& out, const std::string& heading, const std::vector<RecommendOp>& ops,
                         const std::vector<RecommendCandidate>& candidates, const HcclApiLimits& api) {
  const ProcessSetting setting = choose_process_setting(ops, candidates, api);
  out << "# hcclsim recommend: " << heading << "\n"
      << "# HCCL_ALGO and HCCL_OP_EXPANSION_MODE hold one setting per process: one expansion mode serves every op\n"
      << "# (the one with the least time summed over the ops and sizes), and each op takes the HCCL_ALGO with the\n"
      << "# least time summed over its swept sizes (per-op form: op=levels, joined by /).\n";
  std::string algo;  // the per-op HCCL_ALGO so far
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const RecommendOp& op = ops[i];
    const ProcessSetting::PerOp& per = setting.ops[i];
    const RecommendCandidate& c = candidates[per.candidate];
    if (op.rows.empty()) {
      out << "\n# " << coll_op_name(op.op) << ": no size could be simulated; nothing to export\n";
      continue;
    }
    const bool sets_algo = sets_levels(c);
    out << "\n# " << coll_op_name(op.op) << ", data_size " << size_range(op.sizes) << " on " << ops[i].rows.front().ranks
        << " ranks: ";
    // What the op alone would take, when the process-wide mode keeps it from that.
    const RecommendCandidate& alone = candidates[per.alone];
    const std::string alone_note =
        per.alone_total.ps < per.total.ps
            ? "# (alone, " + setting_name(alone) +
                  " would take " + fixed(per.alone_total.us()) + " us, gain " +
                  fixed(gain_pct(per.default_total, per.alone_total)) + "%: see --ops " + coll_op_name(op.op) + ")\n"
            : "";
    if (!sets_algo && setting.expansion_is_default) {
      out << "HCCL's default is already best for the process (" << fixed(per.default_total.us())
          << " us summed); nothing to export\n" << alone_note;
      continue;
    }
    out << setting_name(c) << ": "
        << fixed(per.total.us()) << " us summed against " << fixed(per.default_total.us()) << " us by default (gain "
        << fixed(gain_pct(per.default_total, per.total)) << "%)\n" << alone_note;
    if (sets_algo) {
      algo += (algo.empty() ? "" : "/") + hccl_algo_op(op.op) + "=" + c.algo;
      if (algo.find('/') != std::string::npos) out << "# (with the ops above: HCCL_ALGO is one variable)\n";
      out << "export HCCL_ALGO=\"" << algo << "\"\n";
    }
  }
  for (const auto& [mode, op] : setting.unusable) {
    out << "\n# HCCL_OP_EXPANSION_MODE " << expansion_env_value(mode) << " left out: hcclsim cannot simulate " << op
        << " with it at every swept size (HCCL refuses it, or hcclsim does not model the executor HCCL would run)\n";
  }
  if (!setting.expansion_is_default) {
    out << "\n# every op above: HCCL_OP_EXPANSION_MODE " << expansion_env_value(setting.expansion) << ": "
        << fixed(setting.expansion_total.us()) << " us summed over the ops against " << fixed(setting.default_total.us())
        << " us with HCCL's defaults (gain " << fixed(gain_pct(setting.default_total, setting.expansion_total)) << "%)\n"
        << (setting.expansion == Expansion::Aiv ? aiv_caveat(ops) : "")
        << "export HCCL_OP_EXPANSION_MODE=" << expansion_env_value(setting.expansion) << "\n";
  }
}

}  // namespace hcclsim
