// What both products' selections share: the answer, and the refusal of an
// executor HCCL would run that hcclsim does not model.
#pragma once

#include <stdexcept>
#include <string>

#include "sim/executors/executor.h"

namespace hcclsim::selection {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

inline ExecutorChoice pick(const std::string& name, const AlgoPlan& plan, const std::string& rule) {
  return ExecutorChoice{name, plan, rule};
}

// One of the product's selection thresholds, by its name in the profile's
// npu.hccl_selection.
inline std::uint64_t threshold(const ExecContext& ctx, const std::string& name) {
  const auto it = ctx.hccl.selection_sizes.find(name);
  if (it == ctx.hccl.selection_sizes.end()) {
    const std::string& file = ctx.hccl.selection_file;
    throw std::invalid_argument((file.empty() ? "the profile" : file) + " at $.npu.hccl_selection: no size '" + name +
                                "', which HCCL's executor selection on this NPU compares with");
  }
  return it->second;
}

// How a rule quotes a threshold: "16 MiB", "700 KiB", "100 B".
inline std::string size_words(std::uint64_t bytes) {
  if (bytes != 0 && bytes % MiB == 0) return std::to_string(bytes / MiB) + " MiB";
  if (bytes != 0 && bytes % KiB == 0) return std::to_string(bytes / KiB) + " KiB";
  return std::to_string(bytes) + " B";
}

[[noreturn]] inline void unmodelled(const std::string& name, const std::string& rule) {
  throw std::invalid_argument("HCCL runs " + name + " here (" + rule +
                              "); hcclsim does not model that executor's task structure");
}

}  // namespace hcclsim::selection
