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

[[noreturn]] inline void unmodelled(const std::string& name, const std::string& rule) {
  throw std::invalid_argument("HCCL runs " + name + " here (" + rule +
                              "); hcclsim does not model that executor's task structure");
}

}  // namespace hcclsim::selection
