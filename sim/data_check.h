// The functional check (hccl_test's check_result): instead of bytes, every
// buffer holds symbolic pieces saying which ranks' input reached it and from
// which input offset. Copies move pieces, reductions merge them; after the run
// each rank's output is compared with what the collective must produce. A
// missing or misplaced synchronisation shows as stale or mixed pieces.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/task_graph.h"

namespace hcclsim {

// A set of ranks (the contributors of a reduced value).
class RankSet {
 public:
  RankSet() = default;
  static RankSet single(int rank);
  static RankSet all(int ranks);
  void add(int rank);
  bool empty() const;
  bool intersects(const RankSet& o) const;
  void unite(const RankSet& o);
  std::string to_string() const;  // "{0,1,5-7}"
  friend bool operator==(const RankSet& a, const RankSet& b);
  friend bool operator!=(const RankSet& a, const RankSet& b) { return !(a == b); }

 private:
  std::vector<std::uint64_t> words_;
};

struct Piece {
  enum class State : std::uint8_t { Uninitialized, Value, Corrupt };
  std::uint64_t length = 0;
  State state = State::Uninitialized;
  std::uint64_t origin = 0;  // input offset of the piece's first byte
  RankSet from;              // whose input it holds (several after a reduction)

  static Piece value(std::uint64_t length, std::uint64_t origin, RankSet from);
  std::string to_string() const;
};

class BufferContents {
 public:
  explicit BufferContents(std::uint64_t size = 0);
  std::uint64_t size() const { return size_; }
  std::vector<Piece> read(std::uint64_t offset, std::uint64_t length) const;
  void write(std::uint64_t offset, const std::vector<Piece>& pieces);
  // Element-wise reduction into this buffer. `overlap_ok`: the reduction is
  // idempotent (max, min), so a rank counted twice is not an error.
  void reduce(std::uint64_t offset, const std::vector<Piece>& pieces, bool overlap_ok);
  // Pieces in order, neighbours merged where they continue each other.
  std::vector<Piece> normalized(std::uint64_t offset, std::uint64_t length) const;

 private:
  void split_at(std::uint64_t pos);
  void merge_around(std::uint64_t begin, std::uint64_t end);
  std::uint64_t size_;
  std::map<std::uint64_t, Piece> pieces_;  // keyed by offset; covers [0, size)
};

class DataTracker {
 public:
  DataTracker(int ranks, std::uint64_t input_bytes, std::uint64_t output_bytes, std::uint64_t scratch_bytes,
              bool idempotent_reduction);
  // Rank r's input holds its own data; everything else is uninitialized.
  std::vector<Piece> read(const BufferRef& ref, std::uint64_t bytes) const;
  void write(const BufferRef& ref, const std::vector<Piece>& pieces);
  void reduce(const BufferRef& ref, const std::vector<Piece>& pieces);
  const BufferContents& buffer(int rank, BufferKind kind) const;
  // "" when the access is within the buffer, else a description of the overrun.
  std::string bounds_error(const BufferRef& ref, std::uint64_t bytes) const;

 private:
  BufferContents& mutable_buffer(int rank, BufferKind kind);
  std::vector<BufferContents> buffers_;  // rank * 3 + kind
  bool idempotent_;
};

// Compares `got` with the expected pieces (normalized); "" when equal, else the
// first difference in words.
std::string compare_pieces(const std::vector<Piece>& got, const std::vector<Piece>& expected);

}  // namespace hcclsim
