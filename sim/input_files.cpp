#include "sim/input_files.h"

#include <algorithm>
#include <cstdio>

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

std::vector<InputFile> input_files_read() { return log(); }
void clear_input_files() { log().clear(); }

}  // namespace hcclsim
