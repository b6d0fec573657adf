#include "sim/data_check.h"

#include <algorithm>
#include <sstream>

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

namespace {

Piece clip(const Piece& p, std::uint64_t skip, std::uint64_t length) {
  Piece out = p;
  out.length = length;
  if (p.state == Piece::State::Value) out.origin = p.origin + skip;
  return out;
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

}  // namespace

BufferContents::BufferContents(std::uint64_t size) : size_(size) {
  if (size > 0) {
    Piece p;
    p.length = size;
    pieces_.emplace(0, p);
  }
}

void BufferContents::split_at(std::uint64_t pos) {
  if (pos == 0 || pos >= size_) return;
  auto it = pieces_.upper_bound(pos);
  --it;
  if (it->first == pos) return;
  const std::uint64_t start = it->first;
  Piece whole = it->second;
  it->second = clip(whole, 0, pos - start);
  pieces_.emplace_hint(std::next(it), pos, clip(whole, pos - start, whole.length - (pos - start)));
}

void BufferContents::merge_around(std::uint64_t begin, std::uint64_t end) {
  auto it = pieces_.upper_bound(begin);
  if (it != pieces_.begin()) --it;
  if (it != pieces_.begin()) --it;
  while (it != pieces_.end()) {
    auto next = std::next(it);
    if (next == pieces_.end() || it->first > end) break;
    if (continues(it->second, next->second)) {
      it->second.length += next->second.length;
      pieces_.erase(next);
    } else {
      it = next;
    }
  }
}

std::vector<Piece> BufferContents::read(std::uint64_t offset, std::uint64_t length) const {
  std::vector<Piece> out;
  if (length == 0) return out;
  auto it = pieces_.upper_bound(offset);
  --it;
  const std::uint64_t end = offset + length;
  for (; it != pieces_.end() && it->first < end; ++it) {
    const std::uint64_t p_begin = std::max(it->first, offset);
    const std::uint64_t p_end = std::min(it->first + it->second.length, end);
    out.push_back(clip(it->second, p_begin - it->first, p_end - p_begin));
  }
  return out;
}

void BufferContents::write(std::uint64_t offset, const std::vector<Piece>& pieces) {
  std::uint64_t length = 0;
  for (const Piece& p : pieces) length += p.length;
  if (length == 0) return;
  split_at(offset);
  split_at(offset + length);
  pieces_.erase(pieces_.lower_bound(offset), pieces_.lower_bound(offset + length));
  std::uint64_t at = offset;
  for (const Piece& p : pieces) {
    pieces_.emplace(at, p);
    at += p.length;
  }
  merge_around(offset, offset + length);
}

void BufferContents::reduce(std::uint64_t offset, const std::vector<Piece>& pieces, bool overlap_ok) {
  std::uint64_t at = offset;
  for (const Piece& src : pieces) {
    split_at(at);
    split_at(at + src.length);
    for (auto it = pieces_.find(at); it != pieces_.end() && it->first < at + src.length; ++it) {
      Piece& dst = it->second;
      const Piece part = clip(src, it->first - at, dst.length);
      if (dst.state == Piece::State::Uninitialized || part.state != Piece::State::Value ||
          dst.state == Piece::State::Corrupt || dst.origin != part.origin ||
          (!overlap_ok && dst.from.intersects(part.from))) {
        dst.state = Piece::State::Corrupt;
      } else {
        dst.from.unite(part.from);
      }
    }
    at += src.length;
  }
  merge_around(offset, at);
}

std::vector<Piece> BufferContents::normalized(std::uint64_t offset, std::uint64_t length) const {
  std::vector<Piece> out;
  for (const Piece& p : read(offset, length)) append_merged(out, p);
  return out;
}

DataTracker::DataTracker(int ranks, std::uint64_t input_bytes, std::uint64_t output_bytes,
                         std::uint64_t scratch_bytes, bool idempotent_reduction)
    : idempotent_(idempotent_reduction) {
  buffers_.reserve(static_cast<std::size_t>(ranks) * 3);
  for (int r = 0; r < ranks; ++r) {
    BufferContents input(input_bytes);
    if (input_bytes > 0) input.write(0, {Piece::value(input_bytes, 0, RankSet::single(r))});
    buffers_.push_back(std::move(input));
    buffers_.emplace_back(output_bytes);
    buffers_.emplace_back(scratch_bytes);
  }
}

const BufferContents& DataTracker::buffer(int rank, BufferKind kind) const {
  return buffers_[static_cast<std::size_t>(rank) * 3 + static_cast<std::size_t>(kind)];
}

BufferContents& DataTracker::mutable_buffer(int rank, BufferKind kind) {
  return buffers_[static_cast<std::size_t>(rank) * 3 + static_cast<std::size_t>(kind)];
}

std::string DataTracker::bounds_error(const BufferRef& ref, std::uint64_t bytes) const {
  const std::uint64_t size = buffer(ref.rank, ref.buffer).size();
  if (ref.offset + bytes <= size) return {};
  std::ostringstream os;
  os << "rank " << ref.rank << " " << buffer_kind_name(ref.buffer) << " [" << ref.offset << ", "
     << ref.offset + bytes << ") overruns the buffer of " << size << " bytes";
  return os.str();
}

std::vector<Piece> DataTracker::read(const BufferRef& ref, std::uint64_t bytes) const {
  return buffer(ref.rank, ref.buffer).read(ref.offset, bytes);
}

void DataTracker::write(const BufferRef& ref, const std::vector<Piece>& pieces) {
  mutable_buffer(ref.rank, ref.buffer).write(ref.offset, pieces);
}

void DataTracker::reduce(const BufferRef& ref, const std::vector<Piece>& pieces) {
  mutable_buffer(ref.rank, ref.buffer).reduce(ref.offset, pieces, idempotent_);
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
