// Chrome trace-event JSON (opens in Perfetto and MindStudio Insight): one
// process per rank, one track per thread, one slice per task with its size,
// peer and link; flow arrows from each notify record to the wait it released;
// and a process "links" with a counter track ("ph":"C") per link direction
// that carried data: its throughput in GB/s over the run, in at most
// kLinkBuckets time buckets per run (each transfer's bytes spread evenly over
// its task's span on every link of its route), for the kMaxTracedLinks links
// that carried the most bytes, so the trace stays bounded.
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
  // Adds one slice on `rank`'s track `track` (a model's timing without
  // tasks: the estimate's step operations).
  void add_slice(int rank, const std::string& track, const std::string& name, Time start, Time duration,
                 const std::map<std::string, std::string>& args);
  void write(std::ostream& out) const;

  static constexpr std::size_t kLinkBuckets = 200;
  static constexpr std::size_t kMaxTracedLinks = 512;
  static constexpr int kLinksPid = 1 << 30;  // the "links" process, after every rank

 private:
  void add_link_counters(const TaskGraph& graph, const RunResult& result, Platform& platform);
  int track(int rank, const std::string& name);
  std::vector<std::string> events_;            // serialized, in insertion order
  std::map<std::pair<int, std::string>, int> tracks_;
  std::map<int, int> tracks_per_rank_;
  int next_flow_id_ = 1;
  bool links_named_ = false;
};

}  // namespace hcclsim
