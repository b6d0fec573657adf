// Shared pieces of the level-0 algorithms: slicing data into loops that fit
// the HCCL buffer, splitting a slice into per-rank chunks, and naming buffers
// in elements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/executors/collective.h"

namespace hcclsim {

// A range of elements.
struct Span {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
};

// Small integer helpers of the rank schedules.
inline int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}
inline int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}
inline int mod(int a, int p) { return ((a % p) + p) % p; }

// AllReduceLocalReduce (the deterministic mid-count loop), in elements of
// `esz` bytes: a loop holds the buffer less p x 16 KiB of room for the
// slots' alignment; a slot is n/p rounded up to 16 KiB, else 512 B, else
// one element, the first that lets p - 1 slots fit n (PrepareSlice).
inline std::uint64_t local_reduce_loop(std::uint64_t buffer, int p, std::uint64_t esz) {
  const std::uint64_t reserve = static_cast<std::uint64_t>(p) * std::max<std::uint64_t>(1, 16 * 1024 / esz);
  return buffer > 2 * reserve ? buffer - reserve : buffer;
}
inline std::uint64_t local_reduce_slot(std::uint64_t n, int p, std::uint64_t esz) {
  const std::uint64_t pp = static_cast<std::uint64_t>(p);
  std::uint64_t slot = 1;
  for (const std::uint64_t bytes : {std::uint64_t{16 * 1024}, std::uint64_t{512}, std::uint64_t{0}}) {
    const std::uint64_t a = std::max<std::uint64_t>(1, bytes / esz);
    slot = ((n + pp - 1) / pp + a - 1) / a * a;
    if (slot * (pp - 1) <= n) break;
  }
  return slot;
}

// Chunk j of `parts` over n elements: sizes differ by at most one, larger ones first.
inline Span chunk_span(std::uint64_t n, int parts, int j) {
  const std::uint64_t base = n / static_cast<std::uint64_t>(parts);
  const std::uint64_t rem = n % static_cast<std::uint64_t>(parts);
  const std::uint64_t uj = static_cast<std::uint64_t>(j);
  return Span{uj * base + std::min(uj, rem), base + (uj < rem ? 1 : 0)};
}

class PlanBuilder {
 public:
  explicit PlanBuilder(const CollectiveSpec& spec)
      : spec_(spec), p_(spec.ranks), esz_(data_type_size(spec.dtype)) {}

 protected:
  // Loops of at most `per_loop` elements each over `count` elements (at least one loop).
  static std::vector<Span> loops(std::uint64_t count, std::uint64_t per_loop) {
    if (count == 0) return {Span{0, 0}};
    per_loop = std::max<std::uint64_t>(per_loop, 1);
    std::vector<Span> out;
    for (std::uint64_t first = 0; first < count; first += per_loop) {
      out.push_back(Span{first, std::min(per_loop, count - first)});
    }
    return out;
  }
  // Chunk j of this collective's ranks.
  Span chunk(std::uint64_t n, int j) const { return chunk_span(n, p_, j); }
  // Elements one HCCL buffer area holds.
  std::uint64_t buffer_elements() const { return spec_.buffer_bytes / esz_; }

  BufferRef input(int rank, std::uint64_t elem) const {
    return {rank, spec_.input_buffer, spec_.input_offset + elem * esz_};
  }
  BufferRef output(int rank, std::uint64_t elem) const {
    return {rank, spec_.output_buffer, spec_.output_offset + elem * esz_};
  }
  BufferRef ccl_in(int rank, std::uint64_t elem) const {
    return {rank, BufferKind::Scratch, spec_.scratch_offset + elem * esz_};
  }
  BufferRef ccl_out(int rank, std::uint64_t elem) const {
    return {rank, BufferKind::Scratch, spec_.scratch_offset + spec_.buffer_bytes + elem * esz_};
  }
  // Copies or reduces `elems` elements; nothing for zero elements.
  void move(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t elems, bool reduce, const std::string& label) {
    if (elems == 0) return;
    // A stage whose data already sits in the HCCL buffer copies nothing.
    if (!reduce && src.rank == dst.rank && src.buffer == dst.buffer && src.offset() == dst.offset()) return;
    if (reduce) {
      graph_.reduce(thread, src, dst, elems * esz_, label);
    } else {
      graph_.copy(thread, src, dst, elems * esz_, label);
    }
  }

  CollectiveSpec spec_;
  int p_;
  std::uint64_t esz_;
  TaskGraph graph_;
};

TaskGraph build_mesh(const CollectiveSpec& spec);
TaskGraph build_ring(const CollectiveSpec& spec, int rings);

}  // namespace hcclsim
