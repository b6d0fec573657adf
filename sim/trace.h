// Chrome trace-event JSON (opens in Perfetto and MindStudio Insight): one
// process per rank, one track per thread, one slice per task with its size,
// peer and link; flow arrows from each notify record to the wait it released.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/platform.h"

namespace hcclsim {

class TraceWriter {
 public:
  // Adds every task of a finished (or failed) run; `run_label` goes into args.
  void add_run(const TaskGraph& graph, const RunResult& result, Platform& platform, const std::string& run_label);
  void write(std::ostream& out) const;

 private:
  int track(int rank, const std::string& name);
  std::vector<std::string> events_;            // serialized, in insertion order
  std::map<std::pair<int, std::string>, int> tracks_;
  std::map<int, int> tracks_per_rank_;
  int next_flow_id_ = 1;
};

}  // namespace hcclsim
