#pragma once

// glibc's heap settings for large runs (tools/systemc_main.cpp says why):
// the heap on transparent huge pages, large arrays kept in it when freed.
// glibc reads them only when a process starts, so they are put in the
// environment before the program is executed: by the `hcclsim` launcher
// (tools/launcher.cpp) before it executes the simulator, or by a program
// started directly, which then executes itself again. C library calls
// only: the launcher links nothing else.
#include <cstdlib>
#include <cstring>

namespace hcclsim {

inline constexpr const char* kHeapTunables =
    "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295:"
    "glibc.malloc.mmap_max=0:glibc.malloc.top_pad=16777216";

// HCCLSIM_HUGE_PAGES=0 turns the settings off.
inline bool heap_settings_off() {
  const char* off = std::getenv("HCCLSIM_HUGE_PAGES");
  return off != nullptr && std::strcmp(off, "0") == 0;
}

// Adds the settings to GLIBC_TUNABLES; false when they are off, already
// there (or the user set hugetlb otherwise), or the environment is full.
inline bool add_heap_settings() {
  if (heap_settings_off()) return false;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return false;
  const std::size_t had = tunables == nullptr ? 0 : std::strlen(tunables);
  char* wanted = static_cast<char*>(std::malloc(had + 1 + std::strlen(kHeapTunables) + 1));
  if (wanted == nullptr) return false;
  wanted[0] = '\0';
  if (had > 0) {
    std::strcat(wanted, tunables);
    std::strcat(wanted, ":");
  }
  std::strcat(wanted, kHeapTunables);
  const bool set = setenv("GLIBC_TUNABLES", wanted, 1) == 0;
  std::free(wanted);
  return set;
}

}  // namespace hcclsim
