#include "base/input_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace hcclsim {
namespace {
std::vector<InputFile>& log() {
  static std::vector<InputFile> files;
  return files;
}
}  // namespace

std::string fnv1a64_hex(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV offset basis
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;  // FNV prime
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

void note_input_file(const std::string& path, std::string_view bytes) {
  auto& files = log();
  if (std::any_of(files.begin(), files.end(), [&](const InputFile& f) { return f.path == path; })) return;
  files.push_back({path, "fnv1a64:" + fnv1a64_hex(bytes)});
}

std::string read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw InputError(path, std::string("cannot read file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                                              : "not a regular file";
    throw InputError(path, std::string("cannot read it: it is ") + kind + "; expected a regular file");
  }
  const auto too_large = [&](std::uint64_t bytes) {
    return InputError(path, "the file is " + std::to_string(bytes) + " bytes, more than the limit of " +
                                std::to_string(max_bytes) + " bytes");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw too_large(static_cast<std::uint64_t>(st.st_size));
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw InputError(path, std::string("cannot read file: ") + std::strerror(errno));
    if (got == 0) break;
    bytes.append(buffer, static_cast<std::size_t>(got));
    if (bytes.size() > max_bytes) throw too_large(bytes.size());  // it grew while read
  }
  note_input_file(path, bytes);
  return bytes;
}

std::vector<InputFile> input_files_read() { return log(); }
void clear_input_files() { log().clear(); }

}  // namespace hcclsim
