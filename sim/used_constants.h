// The profile constants a task graph's run pays, told from the graph before
// it runs: each task classified as the scheduler compiles it (a record to
// another SDMA domain is an RDMA notify, a copy across one an RDMA write)
// and mapped by add_charged_constants (models/npu/task_costs.h), plus the
// streams' launch and dispatch gaps and what the graph's builders noted.
// Reports list the assumed ones (assumed_constants_used).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/npu/task_costs.h"
#include "sim/task_graph.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

class Platform;
class RouteFinder;

// What a flow from one rank to another crosses: link kinds as bits
// (1 << LinkKind), and of those the kinds with a write_bandwidth.
struct PathClass {
  std::uint8_t kinds = 0;
  std::uint8_t write_limited_kinds = 0;
  bool aiv_ports = false;   // between two NPUs whose AIV moves pass their ports (npu.aiv.remote_bandwidth)
};

// Where ranks are, for classifying tasks: from a platform's routes, or from a
// topology alone (the estimate, which has no platform).
class RankPaths {
 public:
  virtual ~RankPaths() = default;
  virtual bool rdma_between(int a, int b) const = 0;
  virtual bool same_chip(int a, int b) const = 0;
  virtual PathClass path(int src, int dst) = 0;
};

class PlatformPaths final : public RankPaths {
 public:
  explicit PlatformPaths(Platform& platform) : platform_(platform) {}
  bool rdma_between(int a, int b) const override;
  bool same_chip(int a, int b) const override;
  PathClass path(int src, int dst) override;  // through the platform's route cache

 private:
  Platform& platform_;
};

class TopologyPaths final : public RankPaths {
 public:
  explicit TopologyPaths(const TopologySpec& spec);
  ~TopologyPaths() override;
  bool rdma_between(int a, int b) const override;
  bool same_chip(int a, int b) const override;
  PathClass path(int src, int dst) override;  // each pair's found once

 private:
  const TopologySpec& spec_;
  std::unique_ptr<RouteFinder> finder_;
  std::unordered_map<std::uint64_t, PathClass> memo_;
};

// Graph rank r on NPU r.
UsedConstants used_constants(const TaskGraph& graph, RankPaths& paths);

// `used` ∩ the profile's assumed constants (TopologySpec::assumed_constants), sorted.
std::vector<std::string> assumed_constants_used(const UsedConstants& used, const TopologySpec& spec);

}  // namespace hcclsim
