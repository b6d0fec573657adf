#include <algorithm>
#include <map>
#include <stdexcept>

#include "sim/executors/executor.h"

namespace hcclsim {

std::string workflow_mode_name(WorkflowMode mode) { return mode == WorkflowMode::OpBase ? "opbase" : "graph"; }

std::optional<WorkflowMode> parse_workflow_mode(const std::string& name) {
  if (name == "opbase" || name == "op-base") return WorkflowMode::OpBase;
  if (name == "graph") return WorkflowMode::Graph;
  return std::nullopt;
}

std::string expansion_name(Expansion expansion) {
  switch (expansion) {
    case Expansion::Host: return "host";
    case Expansion::AiCpu: return "aicpu";
    case Expansion::Aiv: return "aiv";
  }
  return "?";
}

std::optional<Expansion> parse_expansion(const std::string& name) {
  if (name == "host") return Expansion::Host;
  if (name == "aicpu" || name == "ai_cpu") return Expansion::AiCpu;
  if (name == "aiv") return Expansion::Aiv;
  return std::nullopt;
}

Expansion default_expansion(const HcclApiLimits& api) {
  return api.expanding_engine == "AICPU" ? Expansion::AiCpu : Expansion::Host;
}

std::string ExecutorChoice::describe(const ExecContext& ctx, CollOp op) const { return plan.describe(ctx.hierarchy, op); }

const std::vector<Executor>& executors() {
  static const std::vector<Executor> all = [] {
    std::vector<Executor> out;
    register_mesh_executors(out);
    register_ring_executors(out);
    register_hierarchical_executors(out);
    register_aiv_executors(out);
    std::map<std::string, int> seen;
    for (const Executor& e : out) {
      if (seen[e.name]++ > 0) throw std::logic_error("executor " + e.name + " registered twice");
    }
    std::map<std::string, Executor::Estimate> forms;
    register_mesh_estimates(forms);
    register_level1_estimates(forms);
    register_hierarchical_estimates(forms);
    register_ring_estimates(forms);
    register_aiv_estimates(forms);
    for (auto& [name, form] : forms) {
      auto e = std::find_if(out.begin(), out.end(), [&](const Executor& x) { return x.name == name; });
      if (e == out.end()) throw std::logic_error("a closed form names " + name + ", which no executor registers");
      e->estimate = std::move(form);
    }
    return out;
  }();
  return all;
}

const Executor::Estimate* find_estimate(const std::string& name) {
  const Executor* e = find_executor(name);
  return e != nullptr && e->estimate ? &e->estimate : nullptr;
}

const Executor* find_executor(const std::string& name) {
  for (const Executor& e : executors()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TaskGraph build_executor(const CollectiveSpec& spec, const ExecContext& ctx, const ExecutorChoice& choice) {
  const Executor* e = find_executor(choice.executor);
  if (e == nullptr) {
    throw std::invalid_argument("executor '" + choice.executor +
                                "' is not modelled by hcclsim (hcclsim executors lists the ones it has)");
  }
  const std::string why = e->refuses(spec, ctx);
  if (!why.empty()) throw std::invalid_argument(e->name + " cannot run this collective: it " + why);
  return e->build(spec, ctx, choice.plan);
}

ExecutorChoice select_executor_a2(const CollectiveSpec& spec, const ExecContext& ctx);
AlgoPlan a2_plan(const CollectiveSpec& spec, const ExecContext& ctx);
ExecutorChoice select_executor_a3(const CollectiveSpec& spec, const ExecContext& ctx);
AlgoPlan a3_plan(CollOp op, const ExecContext& ctx);

namespace {

// HCCL's selection rules, one record per product (HCCL's own code branches
// on the device type: 910B in select_a2.cpp, 910_93 in select_a3.cpp). A
// new product adds its record here, beside its executors.
struct SelectionRules {
  HcclRules rules;
  ExecutorChoice (*select)(const CollectiveSpec&, const ExecContext&);
  AlgoPlan (*levels)(const CollectiveSpec&, const ExecContext&);
};

const SelectionRules kSelectionRules[] = {
    {HcclRules::A2, select_executor_a2, a2_plan},
    {HcclRules::A3, select_executor_a3, [](const CollectiveSpec& spec, const ExecContext& ctx) { return a3_plan(spec.op, ctx); }},
};

const SelectionRules& selection_rules(HcclRules key) {
  for (const SelectionRules& rules : kSelectionRules) {
    if (rules.rules == key) return rules;
  }
  throw std::logic_error("no HCCL selection rules for rule set " + std::to_string(static_cast<int>(key)));
}

}  // namespace

AlgoPlan default_levels(const CollectiveSpec& spec, const ExecContext& ctx) {
  return selection_rules(ctx.hccl_rules).levels(spec, ctx);
}

ExecutorChoice select_executor(const CollectiveSpec& spec, const ExecContext& ctx) {
  return selection_rules(ctx.hccl_rules).select(spec, ctx);
}

}  // namespace hcclsim
