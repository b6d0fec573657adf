// Moving perf rows between processes (sweep workers, MPI ranks) and putting
// them back in order. A row travels as one line of JSON that holds every
// field exactly (times in picoseconds, doubles with round-trip precision), so
// the process that writes the output formats it exactly as if it had run it.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/perf/perf.h"

namespace hcclsim {

std::string serialize_perf_row(const PerfRow& row);    // one line, no '\n'
PerfRow deserialize_perf_row(const std::string& text);  // throws std::invalid_argument

// Processes working on one job: rank 0 writes the output, the others send it
// what they compute. A single process is a group of one.
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Messages are delivered in order between each pair of processes.
  virtual void send_to_root(const std::string& message) = 0;  // rank != 0
  virtual std::string receive_from(int rank) = 0;              // rank 0 only
};

class SingleProcess : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void send_to_root(const std::string&) override;
  std::string receive_from(int) override;
};

// Which process runs item i of n: contiguous blocks of nearly equal length
// (keeps a process's items on few topologies) or round robin (spreads a
// sweep of growing sizes).
std::vector<int> assign_blocks(std::size_t n, int processes);
std::vector<int> assign_round_robin(std::size_t n, int processes);

// Delivers the items of a job to `emit` on rank 0 in item order, whichever
// process computed them. Each process calls local() for its own items in
// increasing order, then finish(). A process that fails calls fail() instead
// of going on: rank 0 then stops emitting, collects the others' ends so no one
// is left blocked, and finish() (or fail() on rank 0) reports the first
// failure as a FailedItem. Items are opaque strings.
class OrderedGather {
 public:
  struct Failure {
    int exit_code = 1;
    std::string message;
  };
  OrderedGather(ProcessGroup& group, std::vector<int> owner, std::function<void(std::size_t, const std::string&)> emit);
  void local(std::size_t index, const std::string& item);
  // Returns the first failure of any process (rank 0), if any.
  std::optional<Failure> finish();
  std::optional<Failure> fail(int exit_code, const std::string& message);

 private:
  void receive_until(std::size_t index);  // rank 0: emit every remote item before `index`
  void drain();                           // rank 0: read every other process to its end
  ProcessGroup& group_;
  std::vector<int> owner_;
  std::function<void(std::size_t, const std::string&)> emit_;
  std::size_t next_ = 0;                  // rank 0: the next index to emit
  std::vector<bool> ended_;               // rank 0: which processes sent their end
  std::optional<Failure> failure_;
};

}  // namespace hcclsim
