#include "sim/data_check.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace hcclsim {

RankSet RankSet::single(int rank) {
  RankSet s;
  s.add(rank);
  return s;
}

RankSet RankSet::all(int ranks) {
  RankSet s;
  for (int r = 0; r < ranks; ++r) s.add(r);
  return s;
}

void RankSet::add(int rank) {
  const std::size_t word = static_cast<std::size_t>(rank) / 64;
  if (words_.size() <= word) words_.resize(word + 1, 0);
  words_[word] |= 1ULL << (rank % 64);
}

bool RankSet::contains(int rank) const {
  const std::size_t word = static_cast<std::size_t>(rank) / 64;
  return rank >= 0 && word < words_.size() && (words_[word] >> (rank % 64) & 1);
}

bool RankSet::empty() const {
  return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
}

bool RankSet::intersects(const RankSet& o) const {
  const std::size_t n = std::min(words_.size(), o.words_.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (words_[i] & o.words_[i]) return true;
  }
  return false;
}

void RankSet::unite(const RankSet& o) {
  if (words_.size() < o.words_.size()) words_.resize(o.words_.size(), 0);
  for (std::size_t i = 0; i < o.words_.size(); ++i) words_[i] |= o.words_[i];
}

bool operator==(const RankSet& a, const RankSet& b) {
  const std::size_t n = std::max(a.words_.size(), b.words_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t x = i < a.words_.size() ? a.words_[i] : 0;
    const std::uint64_t y = i < b.words_.size() ? b.words_[i] : 0;
    if (x != y) return false;
  }
  return true;
}

std::string RankSet::to_string() const {
  std::ostringstream os;
  os << "{";
  bool first = true;
  const int limit = static_cast<int>(words_.size() * 64);
  for (int r = 0; r < limit;) {
    if (!(words_[r / 64] >> (r % 64) & 1)) {
      ++r;
      continue;
    }
    int end = r;
    while (end + 1 < limit && (words_[(end + 1) / 64] >> ((end + 1) % 64) & 1)) ++end;
    os << (first ? "" : ",") << r;
    if (end > r) os << "-" << end;
    first = false;
    r = end + 1;
  }
  os << "}";
  return os.str();
}

Piece Piece::value(std::uint64_t length, std::uint64_t origin, RankSet from) {
  Piece p;
  p.length = length;
  p.state = State::Value;
  p.origin = origin;
  p.from = std::move(from);
  return p;
}

std::string Piece::to_string() const {
  std::ostringstream os;
  switch (state) {
    case State::Uninitialized: os << length << " uninitialized bytes"; break;
    case State::Corrupt: os << length << " corrupt bytes (inconsistent reduction)"; break;
    case State::Value:
      os << length << " bytes of rank(s) " << from.to_string() << " input from offset " << origin;
      break;
  }
  return os.str();
}

// ---- RankSetTable ----

namespace {

constexpr std::size_t kMaxUnionsRemembered = std::size_t{1} << 22;

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

RankSetTable::RankSetTable(int ranks)
    : ranks_(ranks), width_(ranks > 0 ? (static_cast<std::size_t>(ranks) + 63) / 64 : 1) {
  std::size_t slots = 64;
  while (slots < 4 * static_cast<std::size_t>(std::max(ranks, 1))) slots *= 2;
  index_.assign(slots, kNone);
  words_.reserve(static_cast<std::size_t>(std::max(ranks, 1)) * width_);
  scratch_.assign(width_, 0);
  for (int r = 0; r < ranks; ++r) {  // id r is {r}
    std::fill(scratch_.begin(), scratch_.end(), 0);
    scratch_[static_cast<std::size_t>(r) / 64] = 1ULL << (r % 64);
    insert(scratch_.data(), hash(scratch_.data()));
  }
}

std::uint64_t RankSetTable::hash(const std::uint64_t* w) const {
  std::uint64_t h = 0x6a09e667f3bcc909ULL;
  for (std::size_t i = 0; i < width_; ++i) h = mix(h ^ w[i]);
  return h;
}

RankSetTable::Id RankSetTable::lookup(const std::uint64_t* w, std::uint64_t h) const {
  const std::size_t mask = index_.size() - 1;
  for (std::size_t slot = h & mask;; slot = (slot + 1) & mask) {
    const Id id = index_[slot];
    if (id == kNone) return kNone;
    if (std::equal(w, w + width_, words(id))) return id;
  }
}

void RankSetTable::grow_index() {
  std::vector<Id> old(index_.size() * 2, kNone);
  old.swap(index_);
  const std::size_t mask = index_.size() - 1;
  for (Id id = 0; id < count_; ++id) {
    std::size_t slot = hash(words(id)) & mask;
    while (index_[slot] != kNone) slot = (slot + 1) & mask;
    index_[slot] = id;
  }
}

RankSetTable::Id RankSetTable::insert(const std::uint64_t* w, std::uint64_t h) {
  if (count_ >= (std::size_t{1} << 31)) throw std::length_error("data check: more than 2^31 distinct rank sets");
  words_.insert(words_.end(), w, w + width_);
  const Id id = static_cast<Id>(count_++);
  if (2 * count_ > index_.size()) {
    grow_index();
    return id;
  }
  const std::size_t mask = index_.size() - 1;
  std::size_t slot = h & mask;
  while (index_[slot] != kNone) slot = (slot + 1) & mask;
  index_[slot] = id;
  return id;
}

void RankSetTable::widen(const RankSet& set, std::vector<std::uint64_t>& out) const {
  out.assign(width_, 0);
  for (std::size_t i = 0; i < set.words_.size(); ++i) {
    if (i < width_) {
      out[i] = set.words_[i];
    } else if (set.words_[i] != 0) {
      throw std::out_of_range("data check: rank set " + set.to_string() + " names a rank beyond " +
                              std::to_string(ranks_ - 1));
    }
  }
  const int spare = static_cast<int>(width_ * 64) - ranks_;
  if (spare > 0 && ranks_ > 0 && (out[width_ - 1] >> (64 - spare)) != 0) {
    throw std::out_of_range("data check: rank set " + set.to_string() + " names a rank beyond " +
                            std::to_string(ranks_ - 1));
  }
}

RankSetTable::Id RankSetTable::intern(const RankSet& set) {
  widen(set, scratch_);
  const std::uint64_t h = hash(scratch_.data());
  const Id found = lookup(scratch_.data(), h);
  return found != kNone ? found : insert(scratch_.data(), h);
}

RankSetTable::Id RankSetTable::find(const RankSet& set) const {
  try {
    widen(set, scratch_);
  } catch (const std::out_of_range&) {
    return kNone;
  }
  return lookup(scratch_.data(), hash(scratch_.data()));
}

RankSet RankSetTable::get(Id id) const {
  RankSet s;
  const std::uint64_t* w = words(id);
  std::size_t used = width_;
  while (used > 0 && w[used - 1] == 0) --used;
  s.words_.assign(w, w + used);
  return s;
}

RankSetTable::Id RankSetTable::unite(Id a, Id b, bool& overlap) {
  if (a > b) std::swap(a, b);
  const std::uint64_t key = static_cast<std::uint64_t>(a) << 32 | b;
  const auto found = unions_.find(key);
  if (found != unions_.end()) {
    overlap = (found->second >> 31) != 0;
    return found->second & 0x7fffffffu;
  }
  const std::uint64_t* x = words(a);
  const std::uint64_t* y = words(b);
  overlap = false;
  for (std::size_t i = 0; i < width_; ++i) {
    overlap = overlap || (x[i] & y[i]) != 0;
    scratch_[i] = x[i] | y[i];
  }
  const std::uint64_t h = hash(scratch_.data());
  Id id = lookup(scratch_.data(), h);
  if (id == kNone) id = insert(scratch_.data(), h);
  // Only a cache: forgetting it changes no result.
  if (unions_.size() >= kMaxUnionsRemembered) unions_.clear();
  unions_.emplace(key, id | (overlap ? 0x80000000u : 0u));
  return id;
}

// ---- BufferContents ----

namespace {

using State = Piece::State;

// The set of element k of a value run.
RankSetTable::Id set_of(const DataSpan& s, std::uint64_t k) {
  return static_cast<RankSetTable::Id>(static_cast<std::int64_t>(s.from) +
                                       static_cast<std::int64_t>(k) * static_cast<std::int64_t>(s.step));
}

// Bytes [skip, skip + n) of element k of `s`, as a span of one element (n
// within the element).
DataSpan part_of(const DataSpan& s, std::uint64_t k, std::uint64_t skip, std::uint64_t n) {
  DataSpan e = s;
  e.unit = n;
  e.count = 1;
  e.step = 0;
  if (s.state == State::Value) {
    e.from = set_of(s, k);
    e.origin = s.origin_at(k) + skip;
    e.origin_step = 0;
  }
  return e;
}

// Merges `b` into `a` when the bytes of b follow a's as one span can say:
// uninitialized or corrupt after the same; one element continuing another
// of the same set (the next input offsets); or elements of one unit whose
// sets step evenly and whose origins step evenly (a run). False when they
// cannot.
bool merge(DataSpan& a, const DataSpan& b) {
  if (a.state != b.state) return false;
  if (a.state != State::Value) {
    a.unit += b.unit;
    return true;
  }
  if (a.count == 1 && b.count == 1 && a.from == b.from && a.origin + a.unit == b.origin) {
    a.unit += b.unit;
    return true;
  }
  if (a.unit != b.unit) return false;
  const auto unit = static_cast<std::int64_t>(a.unit);
  const std::int64_t step = a.count > 1   ? a.step
                            : b.count > 1 ? b.step
                                          : static_cast<std::int64_t>(b.from) - static_cast<std::int64_t>(a.from);
  std::int64_t origin_step = a.origin_step;
  if (a.count == 1) {
    if (b.count > 1) {
      origin_step = b.origin_step;
    } else {
      const std::int64_t apart = static_cast<std::int64_t>(b.origin) - static_cast<std::int64_t>(a.origin);
      if (apart % unit != 0) return false;
      origin_step = apart / unit;
    }
  }
  if (b.count > 1 && (b.step != step || b.origin_step != origin_step)) return false;
  if (step < INT32_MIN || step > INT32_MAX) return false;
  if (origin_step < -DataSpan::kMaxOriginStep || origin_step > DataSpan::kMaxOriginStep) return false;
  const auto count = static_cast<std::int64_t>(a.count);
  if (static_cast<std::int64_t>(a.from) + count * step != static_cast<std::int64_t>(b.from)) return false;
  if (static_cast<std::int64_t>(a.origin) + count * origin_step * unit != static_cast<std::int64_t>(b.origin)) {
    return false;
  }
  if (static_cast<std::uint64_t>(a.count) + b.count > UINT32_MAX) return false;
  a.step = static_cast<std::int32_t>(step);
  a.origin_step = static_cast<std::int32_t>(origin_step);
  a.count += b.count;
  return true;
}

// Appends `s` to `out`, merged with the last span where it can be (and that
// one with the one before, when the merge made them fit).
void push_merged(std::vector<DataSpan>& out, const DataSpan& s) {
  if (s.bytes() == 0) return;
  if (out.empty() || !merge(out.back(), s)) {
    out.push_back(s);
    return;
  }
  while (out.size() >= 2 && merge(out[out.size() - 2], out.back())) out.pop_back();
}

// Appends bytes [skip, skip + n) of `s` to `out`: a partial first element,
// the whole elements as a run, a partial last element.
void clip_into(std::vector<DataSpan>& out, const DataSpan& s, std::uint64_t skip, std::uint64_t n) {
  if (n == 0) return;
  if (s.state != State::Value) {
    DataSpan c = s;
    c.unit = n;
    push_merged(out, c);
    return;
  }
  std::uint64_t k = skip / s.unit;
  const std::uint64_t inside = skip % s.unit;
  if (inside > 0) {
    const std::uint64_t m = std::min(s.unit - inside, n);
    push_merged(out, part_of(s, k, inside, m));
    n -= m;
    ++k;
  }
  const std::uint64_t whole = n / s.unit;
  if (whole > 0) {
    DataSpan run = s;
    run.from = set_of(s, k);
    run.origin = s.origin_at(k);
    run.count = static_cast<std::uint32_t>(whole);
    if (whole == 1) {
      run.step = 0;
      run.origin_step = 0;
    }
    push_merged(out, run);
    k += whole;
    n -= whole * s.unit;
  }
  if (n > 0) push_merged(out, part_of(s, k, 0, n));
}

// One element per span, merged only where one continues another (the form
// pieces are compared in).
void expand_into(std::vector<DataSpan>& out, const DataSpan& s) {
  for (std::uint64_t k = 0; k < s.count; ++k) {
    const DataSpan e = part_of(s, k, 0, s.unit);
    DataSpan* last = out.empty() ? nullptr : &out.back();
    if (last != nullptr && last->state == e.state &&
        (e.state != State::Value || (last->from == e.from && last->origin + last->unit == e.origin))) {
      last->unit += e.unit;
    } else {
      out.push_back(e);
    }
  }
}

// Element k of `s` as a piece.
Piece piece_of(const DataSpan& s, std::uint64_t k, const RankSetTable& sets) {
  Piece p;
  p.length = s.unit;
  p.state = s.state;
  if (s.state == State::Value) {
    p.origin = s.origin_at(k);
    p.from = sets.get(set_of(s, k));
  }
  return p;
}

bool continues(const Piece& a, const Piece& b) {
  if (a.state != b.state) return false;
  if (a.state != Piece::State::Value) return true;
  return a.from == b.from && a.origin + a.length == b.origin;
}

void append_merged(std::vector<Piece>& out, const Piece& p) {
  if (!out.empty() && continues(out.back(), p)) {
    out.back().length += p.length;
  } else {
    out.push_back(p);
  }
}

DataSpan corrupt(std::uint64_t length) {
  DataSpan s;
  s.unit = length;
  s.state = State::Corrupt;
  return s;
}

// A block of BufferContents holds at most 2 * kBlock entries (split in two
// beyond); one left with fewer than kBlock / 4 joins a neighbour when together
// they fit in kBlock. 32 entries (1 KiB) measured fastest on a 1024-NPU
// AllGather (16 and 64 were 2-8% slower).
constexpr std::size_t kBlock = 32;

// Walks over many entries fetch them this many entries ahead. What a replay
// reads was mostly written long before (its lines are cold), and a walk
// that loads one entry at a time waits for each line in turn: the last step
// of a 1024-NPU ReduceScatter reads and reduces 7,168 copies of 128
// entries, and took a third of the check's time waiting on them.
constexpr std::size_t kWalkAhead = 8;

// How many entries past the finger locate looks before searching.
constexpr std::size_t kFingerReach = 4;

// The spans replacing a range, built by write and reduce (one run at a time).
thread_local std::vector<DataSpan> replacement;

}  // namespace

BufferContents::Entry::Entry(std::uint64_t begin, const DataSpan& span) {
  if (begin > kLow || span.origin > kLow || span.unit > kUnit) {
    throw std::length_error("data check: a buffer offset of 2^45 bytes (32 TiB) or more is not tracked");
  }
  if (span.origin_step < -DataSpan::kMaxOriginStep || span.origin_step > DataSpan::kMaxOriginStep) {
    throw std::logic_error("data check: a run's origin step beyond 22 bits");  // merge() never makes one
  }
  const auto step = static_cast<std::uint32_t>(span.step);
  const auto origin_step = static_cast<std::uint32_t>(span.origin_step) & 0x3fffffu;
  begin_state_ = begin | static_cast<std::uint64_t>(span.state) << kBits | static_cast<std::uint64_t>(step & 0x1ffffu) << 47;
  unit_ostep_ = span.unit | static_cast<std::uint64_t>(origin_step & 0x3ffffu) << 46;
  origin_step_ = span.origin | static_cast<std::uint64_t>(origin_step >> 18) << 45 | static_cast<std::uint64_t>(step >> 17) << 49;
  from_count_ = span.from | static_cast<std::uint64_t>(span.count) << 32;
}

DataSpan BufferContents::Entry::span() const {
  DataSpan s;
  s.unit = unit();
  // The origin step's 22 bits, sign-extended.
  const auto origin_step = static_cast<std::uint32_t>(unit_ostep_ >> 46) |
                           static_cast<std::uint32_t>((origin_step_ >> 45) & 0xf) << 18;
  s.origin_step = static_cast<std::int32_t>(origin_step << 10) >> 10;
  s.origin = origin_step_ & kLow;
  s.from = static_cast<RankSetTable::Id>(from_count_);
  s.step = static_cast<std::int32_t>(static_cast<std::uint32_t>(begin_state_ >> 47) |
                                     static_cast<std::uint32_t>(origin_step_ >> 49) << 17);
  s.count = static_cast<std::uint32_t>(from_count_ >> 32);
  s.state = static_cast<Piece::State>((begin_state_ >> kBits) & 3);
  return s;
}

BufferContents::BufferContents(const RankSetTable* sets, std::uint64_t size) : size_(size), sets_(sets) {
  if (size > 0) {
    DataSpan s;
    s.unit = size;
    blocks_.push_back({Entry{0, s}});
    views_.emplace_back();
    view(0);
    count_ = 1;
  }
}

BufferContents::BufferContents(const BufferContents& o)
    : views_(o.views_), finger_(o.finger_), size_(o.size_), sets_(o.sets_), count_(o.count_), blocks_(o.blocks_) {
  for (std::size_t b = 0; b < blocks_.size(); ++b) view(b);  // the copy's own entries
}

BufferContents& BufferContents::operator=(const BufferContents& o) {
  if (this != &o) *this = BufferContents(o);
  return *this;
}

BufferContents::Pos BufferContents::locate(std::uint64_t pos) const {
  auto holds = [pos](const Entry& e) { return e.begin() <= pos && pos - e.begin() < e.bytes(); };
  std::size_t b = finger_.block;
  if (b < views_.size() && finger_.index < views_[b].size) {
    const BlockView& v = views_[b];
    const std::size_t i = finger_.index;
    if (holds(v.data[i])) return finger_;
    // A few entries on: the next block of a strided pattern (an AllGather
    // filling every 8th block, then every 8th plus one) is a couple ahead.
    if (pos >= v.data[i].begin()) {
      for (std::size_t k = i + 1; k < v.size && k <= i + kFingerReach; ++k) {
        if (holds(v.data[k])) return finger_ = Pos{b, k};
      }
    } else if (i > 0 && holds(v.data[i - 1])) {
      return finger_ = Pos{b, i - 1};
    }
    if (pos < v.start || (b + 1 < views_.size() && pos >= views_[b + 1].start)) b = views_.size();
  } else {
    b = views_.size();
  }
  if (b == views_.size()) {  // not in the finger's block
    const auto it = std::upper_bound(views_.begin(), views_.end(), pos,
                                     [](std::uint64_t p, const BlockView& v) { return p < v.start; });
    b = static_cast<std::size_t>(it - views_.begin()) - 1;
  }
  const BlockView& v = views_[b];
  const Entry* e = std::upper_bound(v.data, v.data + v.size, pos, [](std::uint64_t p, const Entry& x) { return p < x.begin(); });
  finger_ = Pos{b, static_cast<std::size_t>(e - v.data) - 1};
  return finger_;
}

bool BufferContents::step_back(Pos& p) const {
  if (p.index > 0) {
    --p.index;
    return true;
  }
  if (p.block == 0) return false;
  --p.block;
  p.index = views_[p.block].size - 1;
  return true;
}

bool BufferContents::step_forward(Pos& p) const {
  if (p.index + 1 < views_[p.block].size) {
    ++p.index;
    return true;
  }
  if (p.block + 1 == views_.size()) return false;
  ++p.block;
  p.index = 0;
  return true;
}

void BufferContents::prefetch_ahead(Pos p, bool burst) const {
  for (std::size_t k = burst ? 1 : kWalkAhead; k <= kWalkAhead; ++k) {
    std::size_t b = p.block;
    std::size_t i = p.index + k;
    if (i >= views_[b].size) {
      i -= views_[b].size;
      if (++b == views_.size() || i >= views_[b].size) return;
    }
    __builtin_prefetch(views_[b].data + i);
  }
}

void BufferContents::read(std::uint64_t offset, std::uint64_t length, std::vector<DataSpan>& out) const {
  out.clear();
  if (length == 0) return;
  const std::uint64_t end = offset + length;
  Pos p = locate(offset);
  bool first = true;
  do {
    const Entry& e = at(p);
    const std::uint64_t e_begin = e.begin();
    if (e_begin >= end) break;
    const std::uint64_t e_end = e_begin + e.bytes();
    if (e_end < end) {  // the read goes on past this entry
      prefetch_ahead(p, first);
      first = false;
    }
    const std::uint64_t p_begin = std::max(e_begin, offset);
    const std::uint64_t p_end = std::min(e_end, end);
    clip_into(out, e.span(), p_begin - e_begin, p_end - p_begin);
  } while (step_forward(p));
}

BufferContents::Range BufferContents::range(std::uint64_t offset, std::uint64_t end) const {
  Range r;
  r.first = locate(offset);
  r.last = r.first;  // most writes cover few entries: walk to the last rather than search
  for (bool first = true; at(r.last).begin() + at(r.last).bytes() < end; first = false) {
    prefetch_ahead(r.last, first);
    step_forward(r.last);
  }
  r.lo = r.first;
  for (r.before = 0; r.before < 2 && step_back(r.lo); ++r.before) {
  }
  r.hi = r.last;
  for (r.after = 0; r.after < 2 && step_forward(r.hi); ++r.after) {
  }
  return r;
}

void BufferContents::replace(Pos first, Pos last, const std::vector<DataSpan>& spans) {
  std::uint64_t at_byte = at(first).begin();
  if (first.block == last.block) {
    std::vector<Entry>& blk = blocks_[first.block];
    const std::size_t old_count = last.index - first.index + 1;
    if (spans.size() < old_count) {
      blk.erase(blk.begin() + static_cast<std::ptrdiff_t>(first.index + spans.size()),
                blk.begin() + static_cast<std::ptrdiff_t>(last.index + 1));
    } else if (spans.size() > old_count) {
      blk.insert(blk.begin() + static_cast<std::ptrdiff_t>(last.index + 1), spans.size() - old_count, Entry{});
    }
    for (std::size_t i = 0; i < spans.size(); ++i) {
      blk[first.index + i] = Entry{at_byte, spans[i]};
      at_byte += spans[i].bytes();
    }
    count_ = count_ - old_count + spans.size();
    const std::size_t b = first.block;
    view(b);
    if (blk.size() > 2 * kBlock) {  // split in two
      std::vector<Entry> upper(blk.begin() + static_cast<std::ptrdiff_t>(blk.size() / 2), blk.end());
      blk.resize(blk.size() / 2);
      blk.shrink_to_fit();  // the lower half had room for twice its entries
      blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1), std::move(upper));
      views_.insert(views_.begin() + static_cast<std::ptrdiff_t>(b + 1), BlockView{});
      view(b);
      view(b + 1);
    } else if (blk.size() < kBlock / 4 && blocks_.size() > 1) {  // join a small neighbour
      const std::size_t left = b + 1 < blocks_.size() ? b : b - 1;
      std::vector<Entry>& a = blocks_[left];
      std::vector<Entry>& c = blocks_[left + 1];
      if (a.size() + c.size() <= kBlock) {
        a.insert(a.end(), c.begin(), c.end());
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(left + 1));
        views_.erase(views_.begin() + static_cast<std::ptrdiff_t>(left + 1));
        view(left);
      }
    }
    return;
  }
  // Across blocks with as many entries as before (a write that only moves
  // the boundary between neighbours, the common case): in place.
  std::size_t old_count = views_[first.block].size - first.index + last.index + 1;
  for (std::size_t b = first.block + 1; b < last.block; ++b) old_count += views_[b].size;
  if (spans.size() == old_count) {
    Pos p = first;
    for (const DataSpan& s : spans) {
      blocks_[p.block][p.index] = Entry{at_byte, s};
      at_byte += s.bytes();
      step_forward(p);
    }
    for (std::size_t b = first.block + 1; b <= last.block; ++b) view(b);  // their first entries may have moved
    return;
  }
  // Otherwise gather what stays of the first and last blocks around the new
  // entries, then cut it into blocks of kBlock again.
  std::vector<Entry> merged(blocks_[first.block].begin(),
                            blocks_[first.block].begin() + static_cast<std::ptrdiff_t>(first.index));
  for (const DataSpan& s : spans) {
    merged.push_back(Entry{at_byte, s});
    at_byte += s.bytes();
  }
  const std::vector<Entry>& tail = blocks_[last.block];
  merged.insert(merged.end(), tail.begin() + static_cast<std::ptrdiff_t>(last.index + 1), tail.end());
  for (std::size_t b = first.block; b <= last.block; ++b) count_ -= blocks_[b].size();
  count_ += merged.size();
  const std::size_t pieces = std::max<std::size_t>(1, (merged.size() + kBlock - 1) / kBlock);
  std::vector<std::vector<Entry>> cut(pieces);
  for (std::size_t k = 0; k < pieces; ++k) {
    const std::size_t from = merged.size() * k / pieces;
    const std::size_t to = merged.size() * (k + 1) / pieces;
    cut[k].assign(merged.begin() + static_cast<std::ptrdiff_t>(from), merged.begin() + static_cast<std::ptrdiff_t>(to));
  }
  const auto b0 = static_cast<std::ptrdiff_t>(first.block);
  const auto b1 = static_cast<std::ptrdiff_t>(last.block) + 1;
  blocks_.erase(blocks_.begin() + b0, blocks_.begin() + b1);
  blocks_.insert(blocks_.begin() + b0, std::make_move_iterator(cut.begin()), std::make_move_iterator(cut.end()));
  views_.erase(views_.begin() + b0, views_.begin() + b1);
  views_.insert(views_.begin() + b0, pieces, BlockView{});
  for (std::size_t k = 0; k < pieces; ++k) view(first.block + k);
}

void BufferContents::keep_head(const Range& r, std::uint64_t offset, std::vector<DataSpan>& out) const {
  out.clear();
  Pos p = r.lo;
  for (int i = 0; i < r.before; ++i, step_forward(p)) push_merged(out, at(p).span());
  const Entry& head = at(r.first);
  clip_into(out, head.span(), 0, offset - head.begin());
}

void BufferContents::keep_tail_and_replace(const Range& r, std::uint64_t end, std::vector<DataSpan>& out) {
  const Entry& tail = at(r.last);
  clip_into(out, tail.span(), end - tail.begin(), tail.begin() + tail.bytes() - end);
  Pos p = r.last;
  for (int i = 0; i < r.after; ++i) {
    step_forward(p);
    push_merged(out, at(p).span());
  }
  replace(r.lo, r.hi, out);
}

void BufferContents::write(std::uint64_t offset, const std::vector<DataSpan>& spans) {
  std::uint64_t length = 0;
  for (const DataSpan& s : spans) length += s.bytes();
  if (length == 0) return;
  const std::uint64_t end = offset + length;
  const Range r = range(offset, end);
  std::vector<DataSpan>& out = replacement;
  keep_head(r, offset, out);
  for (const DataSpan& s : spans) push_merged(out, s);
  keep_tail_and_replace(r, end, out);
}

void BufferContents::reduce(std::uint64_t offset, const std::vector<DataSpan>& spans, bool overlap_ok,
                            RankSetTable& sets) {
  std::uint64_t length = 0;
  for (const DataSpan& s : spans) length += s.bytes();
  if (length == 0) return;
  const std::uint64_t end = offset + length;
  const Range r = range(offset, end);
  std::vector<DataSpan>& out = replacement;
  keep_head(r, offset, out);
  // Walk the destination's elements and the source's together, one part
  // per stretch where neither changes.
  std::uint64_t pos = offset;
  Pos d_pos = r.first;
  std::size_t si = 0;
  std::uint64_t src_skip = 0;
  while (pos < end) {
    while (spans[si].bytes() == src_skip) {
      ++si;
      src_skip = 0;
    }
    const Entry& d = at(d_pos);
    const DataSpan d_span = d.span();
    const std::uint64_t d_begin = d.begin();
    const DataSpan& s = spans[si];
    const std::uint64_t d_off = pos - d_begin;
    const std::uint64_t d_inside = d_off % d_span.unit;
    const std::uint64_t s_inside = src_skip % s.unit;
    const std::uint64_t n = std::min(d_span.unit - d_inside, s.unit - s_inside);
    const DataSpan dst = part_of(d_span, d_off / d_span.unit, d_inside, n);
    const DataSpan src = part_of(s, src_skip / s.unit, s_inside, n);
    if (dst.state != State::Value || src.state != State::Value || dst.origin != src.origin) {
      push_merged(out, corrupt(n));
    } else {
      bool overlap = false;
      const RankSetTable::Id id = sets.unite(dst.from, src.from, overlap);
      if (overlap && !overlap_ok) {
        push_merged(out, corrupt(n));
      } else {
        DataSpan sum = dst;
        sum.from = id;
        push_merged(out, sum);
      }
    }
    pos += n;
    src_skip += n;
    if (pos == d_begin + d_span.bytes()) step_forward(d_pos);
  }
  keep_tail_and_replace(r, end, out);
}

std::vector<Piece> BufferContents::normalized(std::uint64_t offset, std::uint64_t length) const {
  std::vector<DataSpan> spans;
  read(offset, length, spans);
  std::vector<Piece> out;
  for (const DataSpan& s : spans) {
    for (std::uint64_t k = 0; k < s.count; ++k) {
      append_merged(out, piece_of(s, k, *sets_));
    }
  }
  return out;
}

// ---- DataTracker ----

DataTracker::DataTracker(int ranks, std::uint64_t input_bytes, std::uint64_t output_bytes,
                         std::uint64_t scratch_bytes, bool idempotent_reduction)
    : sets_(std::make_unique<RankSetTable>(ranks)), idempotent_(idempotent_reduction) {
  buffers_.reserve(static_cast<std::size_t>(ranks) * 3);
  for (int r = 0; r < ranks; ++r) {
    BufferContents input(sets_.get(), input_bytes);
    if (input_bytes > 0) {
      DataSpan own;
      own.unit = input_bytes;
      own.state = Piece::State::Value;
      own.from = sets_->single(r);
      input.write(0, {own});
    }
    buffers_.push_back(std::move(input));
    buffers_.emplace_back(sets_.get(), output_bytes);
    buffers_.emplace_back(sets_.get(), scratch_bytes);
  }
}

const BufferContents& DataTracker::buffer(int rank, BufferKind kind) const { return buffers_[buffer_index(rank, kind)]; }

BufferContents& DataTracker::mutable_buffer(int rank, BufferKind kind) { return buffers_[buffer_index(rank, kind)]; }

std::string DataTracker::bounds_error(const BufferRef& ref, std::uint64_t bytes) const {
  const std::uint64_t size = buffer(ref.rank, ref.buffer).size();
  if (ref.offset() <= size && bytes <= size - ref.offset()) return {};
  std::ostringstream os;
  os << "rank " << ref.rank << " " << buffer_kind_name(ref.buffer) << " [" << ref.offset() << ", "
     << ref.offset() + bytes << ") overruns the buffer of " << size << " bytes";
  return os.str();
}

void DataTracker::read(const BufferRef& ref, std::uint64_t bytes, std::vector<DataSpan>& out) const {
  buffer(ref.rank, ref.buffer).read(ref.offset(), bytes, out);
}

void DataTracker::write(const BufferRef& ref, const std::vector<DataSpan>& spans) {
  mutable_buffer(ref.rank, ref.buffer).write(ref.offset(), spans);
}

void DataTracker::reduce(const BufferRef& ref, const std::vector<DataSpan>& spans) {
  mutable_buffer(ref.rank, ref.buffer).reduce(ref.offset(), spans, idempotent_, *sets_);
}

bool DataTracker::holds(int rank, BufferKind kind, std::uint64_t offset, const std::vector<DataSpan>& expected) const {
  std::uint64_t length = 0;
  for (const DataSpan& s : expected) length += s.bytes();
  const BufferContents& buf = buffer(rank, kind);
  if (offset > buf.size() || length > buf.size() - offset) return false;
  std::vector<DataSpan> spans;
  buf.read(offset, length, spans);
  std::vector<DataSpan> got;
  for (const DataSpan& s : spans) expand_into(got, s);
  std::vector<DataSpan> want;
  for (const DataSpan& s : expected) expand_into(want, s);
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const DataSpan& g = got[i];
    const DataSpan& w = want[i];
    if (g.unit != w.unit || g.state != w.state ||
        (g.state == State::Value && (g.origin != w.origin || g.from != w.from))) {
      return false;
    }
  }
  return true;
}

std::string DataTracker::compare(int rank, BufferKind kind, std::uint64_t offset,
                                 const std::vector<Piece>& expected) {
  std::vector<DataSpan> spans;
  std::uint64_t length = 0;
  for (const Piece& p : expected) {
    DataSpan s;
    s.unit = p.length;
    s.state = p.state;
    if (p.state == State::Value) {
      s.origin = p.origin;
      s.from = sets_->find(p.from);  // kNone, held by no buffer, when no run made that set
    }
    spans.push_back(s);
    length += p.length;
  }
  if (holds(rank, kind, offset, spans)) return {};
  return compare_pieces(buffer(rank, kind).normalized(offset, length), expected);  // the difference in words
}

std::string DataTracker::compare(int rank, BufferKind kind, std::uint64_t offset,
                                 const std::vector<DataSpan>& expected) {
  if (holds(rank, kind, offset, expected)) return {};
  std::vector<Piece> pieces;
  std::uint64_t length = 0;
  for (const DataSpan& s : expected) {
    for (std::uint64_t k = 0; k < s.count; ++k) pieces.push_back(piece_of(s, k, *sets_));
    length += s.bytes();
  }
  return compare_pieces(buffer(rank, kind).normalized(offset, length), pieces);
}

std::string compare_pieces(const std::vector<Piece>& got, const std::vector<Piece>& expected) {
  std::vector<Piece> want;
  for (const Piece& p : expected) append_merged(want, p);
  std::uint64_t offset = 0;
  std::size_t i = 0;
  for (; i < got.size() && i < want.size(); ++i) {
    const Piece& g = got[i];
    const Piece& w = want[i];
    const bool same = g.length == w.length && g.state == w.state &&
                      (g.state != Piece::State::Value || (g.origin == w.origin && g.from == w.from));
    if (!same) {
      std::ostringstream os;
      os << "at offset " << offset << " found " << g.to_string() << ", expected " << w.to_string();
      return os.str();
    }
    offset += g.length;
  }
  if (i < got.size() || i < want.size()) return "the buffer's layout differs in length from the expected one";
  return {};
}

}  // namespace hcclsim
