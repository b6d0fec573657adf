// The AIV kernels' fixed sizes (sim/executors/aiv.cpp builds the kernels,
// sim/executors/aiv_estimate.cpp evaluates them in closed form; both read these).
#pragma once

#include <cstdint>

namespace hcclsim {

constexpr std::uint64_t kAivTileBytes = 760 * 1024;      // progress flags every 8 tiles of 95 KiB
constexpr std::uint64_t kAivBufferBytes = 32ULL << 20;   // AIV data buffer (two 16 MiB halves)
constexpr std::uint64_t kAivOneShotMax = 64 * 1024;      // AllReduce: one shot up to this size, two shot above
constexpr std::uint64_t kAivTiledAbove = 190 * 1024;     // ReduceScatter: tiles of kAivTileBytes above this size

}  // namespace hcclsim
