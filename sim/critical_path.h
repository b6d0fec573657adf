// The chain of tasks that set a run's total: from the task that ended last,
// step back each time to the constraint that released it latest (the
// previous task of its thread, a task it depends on, or the record that
// released a wait).
#pragma once

#include <string>
#include <vector>

#include "sim/scheduler.h"
#include "sim/task_graph.h"

namespace hcclsim {

struct PathStep {
  TaskId task;
  std::string via;   // how it was reached: "start", "thread order", "notify", "dependency"
};

std::vector<PathStep> critical_path(const TaskGraph& graph, const RunResult& result);

}  // namespace hcclsim
