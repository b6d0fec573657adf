#include "sim/critical_path.h"

#include <algorithm>

namespace hcclsim {

std::vector<PathStep> critical_path(const TaskGraph& graph, const RunResult& result) {
  const auto& timings = result.timings;
  const std::size_t n = graph.tasks().size();
  std::vector<std::int64_t> previous(n, -1);  // previous task on the same thread
  for (const Thread& th : graph.threads()) {
    for (std::size_t i = 1; i < th.tasks.size(); ++i) previous[th.tasks[i]] = th.tasks[i - 1];
  }
  std::vector<std::vector<TaskId>> deps(n);
  for (const auto& [before, after] : graph.dependencies()) deps[after].push_back(before);

  std::int64_t current = -1;
  for (TaskId id = 0; id < n; ++id) {
    if (!timings[id].finished) continue;
    if (current < 0 || timings[id].end > timings[static_cast<TaskId>(current)].end) current = id;
  }
  std::vector<PathStep> path;
  std::string via;
  while (current >= 0) {
    const TaskId id = static_cast<TaskId>(current);
    path.push_back(PathStep{id, {}});
    std::int64_t best = -1;
    Time best_end;
    auto consider = [&](std::int64_t cand, const char* how) {
      if (cand < 0 || !timings[static_cast<TaskId>(cand)].finished) return;
      const Time end = timings[static_cast<TaskId>(cand)].end;
      if (best < 0 || end > best_end) {
        best = cand;
        best_end = end;
        via = how;
      }
    };
    consider(previous[id], "thread order");
    for (TaskId d : deps[id]) consider(d, "dependency");
    // A wait that blocked ended when its record landed: that record set it.
    if (timings[id].released_by >= 0 && timings[id].end > timings[id].start) consider(timings[id].released_by, "notify");
    if (best < 0) break;
    path.back().via = via;
    current = best;
  }
  std::reverse(path.begin(), path.end());
  // Each step's `via` says how the step before it released it.
  if (!path.empty()) path.front().via = "start";
  return path;
}

}  // namespace hcclsim
