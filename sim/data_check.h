// The functional check (hccl_test's check_result): instead of bytes, every
// buffer holds symbolic pieces saying which ranks' input reached it and from
// which input offset. Copies move pieces, reductions merge them; after the run
// each rank's output is compared with what the collective must produce. A
// missing or misplaced synchronisation shows as stale or mixed pieces.
//
// Cost (issue 9): a tracker interns every set of contributors once
// (RankSetTable) and its buffers hold 32-byte spans naming a set by a 32-bit
// id, in one sorted flat vector per buffer; a union of two sets is computed
// once per pair and remembered. Set equality is id equality. Nothing is
// approximated: an id stands for exactly one set of ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
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
  bool contains(int rank) const;
  bool empty() const;
  bool intersects(const RankSet& o) const;
  void unite(const RankSet& o);
  std::string to_string() const;  // "{0,1,5-7}"
  friend bool operator==(const RankSet& a, const RankSet& b);
  friend bool operator!=(const RankSet& a, const RankSet& b) { return !(a == b); }

 private:
  friend class RankSetTable;
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

// Interned rank sets of one tracker: id r < ranks is {r}; every other set is
// stored once, as `ranks` bits. Ids are given in order of first appearance,
// so a deterministic run numbers them the same way every time.
class RankSetTable {
 public:
  using Id = std::uint32_t;
  explicit RankSetTable(int ranks);
  int ranks() const { return ranks_; }
  Id single(int rank) const { return static_cast<Id>(rank); }
  // The id of `set` (added when new). Ranks outside [0, ranks) are refused.
  Id intern(const RankSet& set);
  // The id of `set` if it is interned, else `kNone`.
  Id find(const RankSet& set) const;
  RankSet get(Id id) const;
  // The union of a and b; `overlap` tells whether they share a rank.
  Id unite(Id a, Id b, bool& overlap);
  std::size_t size() const { return count_; }
  static constexpr Id kNone = 0xffffffffu;

 private:
  const std::uint64_t* words(Id id) const { return &words_[static_cast<std::size_t>(id) * width_]; }
  std::uint64_t hash(const std::uint64_t* w) const;
  Id lookup(const std::uint64_t* w, std::uint64_t h) const;
  Id insert(const std::uint64_t* w, std::uint64_t h);
  void grow_index();
  void widen(const RankSet& set, std::vector<std::uint64_t>& out) const;

  int ranks_;
  std::size_t width_;                  // words per set
  std::size_t count_ = 0;              // sets stored
  std::vector<std::uint64_t> words_;   // set i at [i * width_, (i + 1) * width_)
  std::vector<Id> index_;              // open addressing on the words' hash; kNone = empty slot
  std::unordered_map<std::uint64_t, std::uint32_t> unions_;  // (a << 32 | b), a < b -> id | overlap << 31
  mutable std::vector<std::uint64_t> scratch_;
};

// A run of `count` elements of `unit` bytes inside a tracker: element k
// holds the input of set `from + k * step` from input offset
// `origin + k * origin_step * unit` (count 1: an ordinary piece of `unit`
// bytes, its set by id). So an AllGather's or AlltoAll's output, rank j's
// block in j's place, is one run however many ranks there are, and so is a
// hierarchical ReduceScatter's staging copy of a rank's input (input block
// s * 8 + j, block j of server s, in place j * servers + s: neighbouring
// places' origins step by 8 blocks). Uninitialized and corrupt runs have
// count 1.
struct DataSpan {
  // Origin steps a tracker keeps (in units, either way: 22 bits, Entry).
  static constexpr std::int32_t kMaxOriginStep = (std::int32_t{1} << 21) - 1;
  std::uint64_t unit = 0;
  std::uint64_t origin = 0;
  RankSetTable::Id from = 0;
  std::int32_t step = 0;
  std::uint32_t count = 1;
  Piece::State state = Piece::State::Uninitialized;
  std::int32_t origin_step = 0;
  std::uint64_t bytes() const { return unit * count; }
  // The input offset element k starts at.
  std::uint64_t origin_at(std::uint64_t k) const {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(origin) + static_cast<std::int64_t>(k) * origin_step *
                                                                           static_cast<std::int64_t>(unit));
  }
};

class alignas(64) BufferContents {
 public:
  BufferContents(const RankSetTable* sets, std::uint64_t size);
  BufferContents(const BufferContents& o);  // views its own copy of the entries
  BufferContents& operator=(const BufferContents& o);
  BufferContents(BufferContents&&) noexcept = default;  // entries stay where they are
  BufferContents& operator=(BufferContents&&) noexcept = default;
  std::uint64_t size() const { return size_; }
  // Sets `out` to the spans of [offset, offset + length).
  void read(std::uint64_t offset, std::uint64_t length, std::vector<DataSpan>& out) const;
  void write(std::uint64_t offset, const std::vector<DataSpan>& spans);
  // Element-wise reduction into this buffer. `overlap_ok`: the reduction is
  // idempotent (max, min), so a rank counted twice is not an error.
  void reduce(std::uint64_t offset, const std::vector<DataSpan>& spans, bool overlap_ok, RankSetTable& sets);
  // Pieces in order, neighbours merged where they continue each other.
  std::vector<Piece> normalized(std::uint64_t offset, std::uint64_t length) const;
  std::size_t span_count() const { return count_; }
  // A hint: stage 1 fetches the block view the finger is in, stage 2 its
  // entry (each reading only what the stage before fetched).
  void prefetch(int stage) const {
    if (finger_.block >= views_.size()) return;
    const BlockView* v = views_.data() + finger_.block;
    if (stage == 1) {
      __builtin_prefetch(v);
    } else if (finger_.index < v->size) {
      __builtin_prefetch(v->data + finger_.index);
    }
  }

 private:
  // Entries live in blocks of a few dozen (data_check.cpp), so that a write
  // into a buffer of thousands of pieces (an AllGather's or AlltoAll's
  // output) moves a block's tail, not the whole buffer's.
  // An entry is where its span begins and the span, in 32 bytes, not 40
  // (a 1024-NPU ReduceScatter keeps 1.25 M of them: 52 MiB, the check's
  // largest part): the begin and the origin are below 2^45 bytes (a
  // checked run's buffers are under 32 TiB, Scheduler::kMaxCheckedOffset),
  // so the state and the step ride in their top bits, and the origin step
  // (22 bits) above the unit (at most 2^45, 46 bits) and the origin.
  class Entry {
   public:
    Entry() = default;
    Entry(std::uint64_t begin, const DataSpan& span);  // std::length_error at 2^45 bytes or beyond
    std::uint64_t begin() const { return begin_state_ & kLow; }
    std::uint64_t bytes() const { return unit() * (from_count_ >> 32); }
    std::uint64_t unit() const { return unit_ostep_ & kUnit; }
    DataSpan span() const;

   private:
    static constexpr unsigned kBits = 45;
    static constexpr std::uint64_t kLow = (std::uint64_t{1} << kBits) - 1;
    static constexpr std::uint64_t kUnit = (std::uint64_t{1} << 46) - 1;
    std::uint64_t begin_state_ = 0;   // begin | state << 45 | step's low 17 bits << 47
    std::uint64_t unit_ostep_ = 0;    // unit | origin step's low 18 bits << 46
    std::uint64_t origin_step_ = 0;   // origin | origin step's high 4 bits << 45 | step's high 15 bits << 49
    std::uint64_t from_count_ = 0;    // from | count << 32
  };
  struct Pos {
    std::size_t block;
    std::size_t index;
  };
  Pos locate(std::uint64_t pos) const;  // the entry holding pos < size_
  const Entry& at(Pos p) const { return views_[p.block].data[p.index]; }
  bool step_back(Pos& p) const;     // to the previous entry; false at the first
  bool step_forward(Pos& p) const;  // to the next entry; false at the last
  // Fetches the entry kWalkAhead after p (the next block's, past the end of
  // p's); `burst` fetches every entry up to it, as a walk starts.
  void prefetch_ahead(Pos p, bool burst) const;
  // Replaces entries first..last (inclusive) with `spans`, which cover the same bytes.
  void replace(Pos first, Pos last, const std::vector<DataSpan>& spans);
  // The range of a write or reduction: its first and last entries, widened
  // by up to two neighbours each side (so that the new spans merge with them:
  // a half block completed by the other half may then join the run before it).
  struct Range {
    Pos first, last, lo, hi;
    int before, after;  // neighbours taken in: lo is `before` entries before first
  };
  Range range(std::uint64_t offset, std::uint64_t end) const;
  // A write or reduction over [offset, end) rebuilds its range in `out`:
  // first what it keeps before offset (the neighbours and the head entry's
  // part), then the new spans (the caller's), then what it keeps after end,
  // and puts `out` in place of the range.
  void keep_head(const Range& r, std::uint64_t offset, std::vector<DataSpan>& out) const;
  void keep_tail_and_replace(const Range& r, std::uint64_t end, std::vector<DataSpan>& out);

  // Per block: its first entry's begin, where its entries are and how many.
  // A search reads only these (one array), not the blocks' own headers,
  // which are each a cache miss in a buffer a copy has not touched lately.
  struct BlockView {
    std::uint64_t start;
    const Entry* data;
    std::size_t size;
  };
  // What a read or write of a cold buffer touches first shares one cache
  // line (the class is aligned to it): the views, the finger, the size.
  std::vector<BlockView> views_;
  // Where the last search ended: collectives often touch a buffer next to
  // where they last did (a ring's blocks arrive one after the other), so
  // locate tries it and its neighbours, then its block, before searching.
  mutable Pos finger_{0, 0};
  std::uint64_t size_;
  const RankSetTable* sets_;
  std::size_t count_ = 0;  // entries in all blocks
  // Sorted by begin, covering [0, size_), neighbours never continuing each other.
  std::vector<std::vector<Entry>> blocks_;  // none empty
  void view(std::size_t b) { views_[b] = BlockView{blocks_[b].front().begin(), blocks_[b].data(), blocks_[b].size()}; }
};

class DataTracker {
 public:
  DataTracker(int ranks, std::uint64_t input_bytes, std::uint64_t output_bytes, std::uint64_t scratch_bytes,
              bool idempotent_reduction);
  // Rank r's input holds its own data; everything else is uninitialized.
  // Sets `out` to what [ref, ref + bytes) holds now.
  void read(const BufferRef& ref, std::uint64_t bytes, std::vector<DataSpan>& out) const;
  void write(const BufferRef& ref, const std::vector<DataSpan>& spans);
  void reduce(const BufferRef& ref, const std::vector<DataSpan>& spans);
  // A hint that `ref`'s buffer is touched soon: stage 0 fetches its first
  // cache line, stages 1 and 2 what its next search starts from.
  void prefetch(const BufferRef& ref, int stage) const {
    const BufferContents& b = buffer(ref.rank, ref.buffer);
    if (stage == 0) {
      __builtin_prefetch(&b);
    } else {
      b.prefetch(stage);
    }
  }
  const BufferContents& buffer(int rank, BufferKind kind) const;
  // Where a buffer stands among the tracker's (rank * 3 + kind), below buffer_count().
  static std::size_t buffer_index(int rank, BufferKind kind) {
    return static_cast<std::size_t>(rank) * 3 + static_cast<std::size_t>(kind);
  }
  std::size_t buffer_count() const { return buffers_.size(); }
  // "" when the access is within the buffer, else a description of the overrun.
  std::string bounds_error(const BufferRef& ref, std::uint64_t bytes) const;
  // compare_pieces(buffer(rank, kind).normalized(offset, length of expected), expected),
  // without building the pieces of the buffer unless they differ.
  std::string compare(int rank, BufferKind kind, std::uint64_t offset, const std::vector<Piece>& expected);
  // The same with the expected contents as value spans over sets(), which
  // builds no pieces at all unless they differ.
  std::string compare(int rank, BufferKind kind, std::uint64_t offset, const std::vector<DataSpan>& expected);
  const RankSetTable& sets() const { return *sets_; }
  RankSetTable& sets() { return *sets_; }

 private:
  BufferContents& mutable_buffer(int rank, BufferKind kind);
  // Whether [offset, offset + bytes of expected) of the buffer holds `expected`, element by element.
  bool holds(int rank, BufferKind kind, std::uint64_t offset, const std::vector<DataSpan>& expected) const;
  std::unique_ptr<RankSetTable> sets_;   // the buffers point at it: stays put when the tracker moves
  std::vector<BufferContents> buffers_;  // rank * 3 + kind
  bool idempotent_;
};

// Compares `got` with the expected pieces (normalized); "" when equal, else the
// first difference in words.
std::string compare_pieces(const std::vector<Piece>& got, const std::vector<Piece>& expected);

}  // namespace hcclsim
