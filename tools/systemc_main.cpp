// Entry point for every hcclsim executable: SystemC's banner would otherwise
// go to stderr on each run, so it is turned off before SystemC starts; then
// SystemC calls the program's sc_main as usual.
//
// With HCCLSIM_HEAP_SETTINGS (the simulator built with the CMake option
// HCCLSIM_SPEED_TRICKS; never the tests) the heap is tuned first:
//
// Large runs hold millions of tasks (hundreds of MiB touched once each), and
// on 4 KiB pages a third of their time went to page faults and TLB misses.
// glibc's tunables, read only when a process starts, fix that: the heap on
// transparent huge pages (hugetlb=1), and large arrays taken from the heap
// and kept there when freed (mmap_threshold, trim_threshold) so the next
// run's arrays reuse pages already faulted in instead of new zeroed ones.
// So the program re-executes itself once with them set (same pid, same
// arguments). Results are identical either way; HCCLSIM_HUGE_PAGES=0 turns
// this off. Where the kernel offers no huge pages hugetlb does nothing.
// glibc ignores an mmap_threshold above half its heap size (32 MiB on 64-bit
// hosts): a larger value left every array of 128 KiB..32 MiB to mmap, freed
// with munmap and faulted in anew (1.2-2.5 s of kernel time in a 1 GiB
// CloudMatrix384 AllReduce, against 0.1-0.3 s with 32 MiB). Arrays above
// 32 MiB still went to mmap, so the temporaries of graph checking (152 MiB
// on CloudMatrix384) were unmapped when freed and the scheduler's compiled
// tasks faulted in fresh pages after them; with mmap_max=0 every array comes
// from the heap and reuses them (1 GiB CloudMatrix384 AllReduce: 592 MiB
// faulted in against 749 MiB, half the page faults). glibc still falls back
// to mmap when the heap cannot grow.
//
// Faulting a fresh page in zeroes it, in the kernel, on the thread that
// touches it first: 17% of a 1 GiB CloudMatrix384 AllReduce on this
// project's 2-core VM, all while the task graph is built. So the heap
// grows 16 MiB ahead of its use (top_pad), and a second thread faults in
// each new stretch as soon as the heap has grown (MADV_POPULATE_WRITE:
// page tables filled as for a write, the memory left as it is), so that
// the zeroing runs on the other core, once the heap is past its first
// 32 MiB (the runs whose zeroing costs). At most the 16 MiB ahead are
// faulted in without being used. Without the call (kernels before 5.14)
// the thread ends at once.
#include <cstdlib>
#include <systemc>

#ifdef HCCLSIM_HEAP_SETTINGS
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr const char* kHeapTunables =
    "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295:"
    "glibc.malloc.mmap_max=0:glibc.malloc.top_pad=16777216";

// HCCLSIM_HUGE_PAGES=0 turns the settings off.
bool heap_settings_off() {
  const char* off = std::getenv("HCCLSIM_HUGE_PAGES");
  return off != nullptr && std::strcmp(off, "0") == 0;
}

// Adds the settings to GLIBC_TUNABLES; false when they are off, already
// there (or the user set hugetlb otherwise), or the environment is full.
bool add_heap_settings() {
  if (heap_settings_off()) return false;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.hugetlb") != nullptr) return false;
  std::string wanted = tunables == nullptr ? "" : std::string(tunables) + ":";
  wanted += kHeapTunables;
  return setenv("GLIBC_TUNABLES", wanted.c_str(), 1) == 0;
}

void reexec_with_huge_pages(char* argv[]) {
  // (Once executed with them, the settings are there already.)
  if (!add_heap_settings()) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with ordinary pages; the tunable left in
  // the environment only reaches child processes, which is harmless.
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

// The program's own code, mapped in at once: each first call into a page
// of it otherwise faults on the thread making it (a 4 KiB fault costs
// about 10 us on this project's VM; one traced first estimate point took
// 7 on its caller's thread, registries and forms run for the first time).
void map_in_code() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void*) -> int {
        const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
          const std::uintptr_t from = (info->dlpi_addr + segment.p_vaddr) & ~(page - 1);
          const std::uintptr_t to = info->dlpi_addr + segment.p_vaddr + segment.p_memsz;
          madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_READ);  // (fails harmlessly before 5.14)
        }
        return 1;  // the program comes first: done
      },
      nullptr);
}

void fault_in_heap_ahead() {
  std::thread([] {
    map_in_code();
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    // Only once the heap has grown by 32 MiB: a small run (a test, an
    // estimate) would have its last stretch zeroed for nothing.
    constexpr std::uintptr_t kSmallRun = std::uintptr_t{32} << 20;
    auto faulted = reinterpret_cast<std::uintptr_t>(sbrk(0)) + kSmallRun;
    auto idle = std::chrono::microseconds(200);
    for (;;) {
      const auto end = reinterpret_cast<std::uintptr_t>(sbrk(0));  // (reads the break; never moves it)
      if (end > faulted) {
        const std::uintptr_t from = faulted & ~(page - 1);
        if (madvise(reinterpret_cast<void*>(from), end - from, MADV_POPULATE_WRITE) != 0 && errno != EAGAIN) return;
        faulted = end;
        idle = std::chrono::microseconds(200);
      } else {
        std::this_thread::sleep_for(idle);
        idle = std::min<std::chrono::microseconds>(idle * 2, std::chrono::milliseconds(5));
      }
    }
  }).detach();
}

}  // namespace
#endif  // HCCLSIM_HEAP_SETTINGS

int main(int argc, char* argv[]) {
#ifdef HCCLSIM_HEAP_SETTINGS
  reexec_with_huge_pages(argv);
  if (!heap_settings_off()) fault_in_heap_ahead();
#else
  (void)argv;
#endif
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
