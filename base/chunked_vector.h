// A growable array that never moves its elements: fixed-size chunks, so
// appending millions of tasks costs no reallocation (a std::vector doubling
// to 200 MiB copies and re-faults every element a few times over) and memory
// grows in step with use. Indexing is one shift and one mask.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <vector>

namespace hcclsim {

template <class T, unsigned ChunkShift = 14>
class ChunkedVector {
 public:
  static constexpr std::size_t kChunk = std::size_t{1} << ChunkShift;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](std::size_t i) const { return chunks_[i >> ChunkShift][i & (kChunk - 1)]; }
  T& operator[](std::size_t i) { return chunks_[i >> ChunkShift][i & (kChunk - 1)]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T value) {
    if (chunks_.empty() || chunks_.back().size() == kChunk) chunks_.emplace_back();
    std::vector<T>& last = chunks_.back();
    if (last.capacity() < kChunk) last.reserve(kChunk);  // a new chunk, or the last one of a copy
    last.push_back(std::move(value));
    ++size_;
  }

  // Gives back the memory of every chunk that lies wholly below `end`; the
  // elements there must not be read again (size() is unchanged). A reader
  // done with a prefix frees it, so what it builds next can reuse the pages.
  void release_before(std::size_t end) {
    for (std::size_t c = 0; c < chunks_.size() && std::min((c + 1) * kChunk, size_) <= end; ++c) {
      std::vector<T>().swap(chunks_[c]);
    }
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator(const ChunkedVector* owner, std::size_t at) : owner_(owner), at_(at) {}
    const T& operator*() const { return (*owner_)[at_]; }
    const T* operator->() const { return &(*owner_)[at_]; }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return at_ == o.at_; }
    bool operator!=(const const_iterator& o) const { return at_ != o.at_; }

   private:
    const ChunkedVector* owner_;
    std::size_t at_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  std::vector<std::vector<T>> chunks_;   // every chunk full but the last
  std::size_t size_ = 0;
};

}  // namespace hcclsim
