// An allocator whose resize leaves new plain numbers as they are (default-
// initialized, not zeroed): for arrays a caller fills right after growing
// them, where zeroing first costs a pass over memory for nothing.
#pragma once

#include <memory>
#include <new>
#include <utility>

namespace hcclsim {

template <class T>
struct UnzeroedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UnzeroedAllocator<U>;
  };
  UnzeroedAllocator() = default;
  template <class U>
  UnzeroedAllocator(const UnzeroedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* at) noexcept {
    ::new (static_cast<void*>(at)) U;  // (default-initialized: a plain number is left as it is)
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};

}  // namespace hcclsim
