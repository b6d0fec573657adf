// Requests and collectives for the estimate tests, built as `hcclsim perf`
// builds them (sim/perf/perf.cpp), so that a form called directly answers the
// same question as perf's row.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/perf/perf.h"
#include "topologies/platform_spec.h"

namespace hcclsim::testing {

// `op` over every NPU of `spec`, with its HCCL buffer, at `sizes`.
inline PerfRequest request_on(const TopologySpec& spec, CollOp op, const std::vector<std::uint64_t>& sizes) {
  PerfRequest request;
  request.op = op;
  request.ranks = spec.npus;
  request.buffer_bytes = spec.npu.hccl_buffer_bytes;
  request.sizes = sizes;
  return request;
}

// The fp16 collective `request` asks for at `size` bytes (hccl_test's data_size).
inline CollectiveSpec collective_of(const PerfRequest& request, std::uint64_t size) {
  CollectiveSpec collective;
  collective.op = request.op;
  collective.ranks = request.ranks;
  collective.dtype = DataType::Fp16;
  collective.buffer_bytes = request.buffer_bytes;
  collective.count = count_for_size(request.op, collective.ranks, collective.dtype, size);
  return collective;
}

}  // namespace hcclsim::testing
