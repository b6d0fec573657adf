// Reading hardware profiles and topologies from JSON into typed parameters
// (the only place besides the program/workload readers that sees JSON).
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/params.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

// A profile's "calibration" object (docs/calibration.md): the constants
// `hcclsim calibrate` fitted together (dotted JSON paths, each with
// "bounds"), the measurement files (relative to the profile) and, if given,
// the row id prefixes it took.
// What `hcclsim calibrate` fitted: constants ("fit") to rows ("only"
// prefixes) of measurement files, then, in order, each later stage ("then")
// on the profile the stage before produced (the link constants from the
// point-to-point rows first, then the AIV constants from the MoE rows).
struct CalibrationStage {
  std::vector<std::string> fit;
  std::vector<std::string> only;
};
struct ProfileCalibration {
  std::vector<std::string> fit;
  std::vector<std::string> measurements;
  std::vector<std::string> only;
  std::vector<CalibrationStage> then;
};

struct HardwareProfile {
  std::string name;
  std::string file;
  NpuParams npu;
  std::map<std::string, ChannelParams> links;  // by link kind: "hccs", "sio", ...
  // Dotted paths ("npu.stream.task_dispatch", "links.roce.latency") of the
  // constants no measurement fixes, sorted: a cited constant whose "source"
  // starts with "assumed", and the plain values of kAssumedWhenPlain.
  std::vector<std::string> assumed;
  ProfileCalibration calibration;              // empty: the profile says nothing was fitted together
};

// Fields whose plain value (a number or string without a "source") counts
// as assumed: the shipped profiles' descriptions say so of sdma.engines
// (both) and local_memory.latency (A2). Other plain values are not: core
// counts from the platform info files, HCCL_BUFFSIZE's default, segment
// sizes (a simulation granularity, not a cost).
extern const std::vector<std::string> kAssumedWhenPlain;

HardwareProfile load_profile(const std::string& file);
// What a profile of `product` gets for the npu.hccl_api entries it leaves
// out: the product's documented limits and HCCL's build of its executors.
HcclApiLimits hccl_api_defaults(HcclRules rules);
// The same from a document already parsed (`file` names it in messages):
// `hcclsim calibrate` edits a copy of a profile and reads it again.
HardwareProfile read_profile(const nlohmann::json& doc, const std::string& file);

// A topology file names its profile (relative to itself); `profile_override`
// replaces it. Errors name the file and the JSON path.
//
// The hardware is either listed ("npus", "links", ...) or built from a
// "cluster" object (see topologies/cluster.h):
//   {"kind": "a2", "servers": N, "roce": {...}}
//   {"kind": "a3", "supernodes": N, "servers_per_supernode": M (48), "roce": {...}, "ub": {"l2_switches": K (7)}}
//   "roce": {"npus_per_leaf": 64, "spines": 8, "oversubscription": 1}, every key optional.
// `servers_override` (>= 1; -1 = none) replaces the number of servers of a
// cluster: A2 servers; A3 servers in all, one supernode if at most M, else
// whole supernodes of M. A listed topology refuses it.
TopologySpec load_topology(const std::string& file, const std::optional<std::string>& profile_override = {},
                           int servers_override = -1);
// The same with a profile already read; `blame` is where a profile of the
// wrong product is reported (default: the profile's file, or the topology's).
TopologySpec load_topology_with(const std::string& file, const HardwareProfile& profile, int servers_override,
                           const std::optional<std::string>& blame = std::nullopt);
// The profile a topology file names, resolved against the topology's directory.
std::string topology_profile_file(const std::string& topology_file);

}  // namespace hcclsim
