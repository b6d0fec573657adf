// `hcclsim`: puts glibc's heap settings in the environment
// (tools/heap_settings.h) and executes the simulator, hcclsim-core, from
// the same directory, with the same arguments. The simulator would
// otherwise execute itself again to take them, loading its libraries and
// running SystemC's start-up twice (about 15 ms of every command on the
// project's 2-core host). It links the C library only.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "tools/heap_settings.h"

int main(int, char* argv[]) {
  hcclsim::add_heap_settings();
  constexpr const char kCore[] = "hcclsim-core";
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  std::size_t dir = 0;  // the length of the directory, with its '/'
  if (n > 0) {
    path[n] = '\0';
  } else {  // no /proc: where argv[0] says
    std::snprintf(path, sizeof path, "%s", argv[0]);
  }
  if (const char* slash = std::strrchr(path, '/')) dir = static_cast<std::size_t>(slash - path) + 1;
  if (dir + sizeof kCore > sizeof path) {
    std::fprintf(stderr, "hcclsim: the path of %s is too long\n", kCore);
    return 127;
  }
  std::memcpy(path + dir, kCore, sizeof kCore);
  execv(path, argv);
  std::fprintf(stderr, "hcclsim: cannot run %s: %s (it is built next to hcclsim: cmake --build build)\n", path,
               std::strerror(errno));
  return 127;
}
