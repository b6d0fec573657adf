// What both products' selections share: the answer, and the refusal of an
// executor HCCL would run that hcclsim does not model.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "sim/executors/executor.h"

namespace hcclsim::selection {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

inline ExecutorChoice pick(const std::string& name, const AlgoPlan& plan, const std::string& rule) {
  return ExecutorChoice{name, plan, rule};
}

// A value a product's selection rules ask for by name, from `values` (the
// profile's npu.<object>); a name the profile lacks is the profile's error.
template <typename Value>
std::uint64_t named_rule_value(const ExecContext& ctx, const std::map<std::string, Value>& values, const std::string& name,
                               const char* object, const char* what) {
  const auto it = values.find(name);
  if (it == values.end()) {
    const std::string& file = ctx.hccl.selection_file;
    throw std::invalid_argument((file.empty() ? "the profile" : file) + " at $.npu." + object + ": no " + what + " '" +
                                name + "', which HCCL's executor selection on this NPU compares with");
  }
  return static_cast<std::uint64_t>(it->second);
}

// One of the product's selection thresholds (npu.hccl_selection), by name.
inline std::uint64_t threshold(const ExecContext& ctx, const std::string& name) {
  return named_rule_value(ctx, ctx.hccl.selection_sizes, name, "hccl_selection", "size");
}

// One of the communicator sizes the rules compare with (npu.hccl_selection_ranks), by name.
inline std::uint64_t rank_threshold(const ExecContext& ctx, const std::string& name) {
  return named_rule_value(ctx, ctx.hccl.selection_ranks, name, "hccl_selection_ranks", "rank count");
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
