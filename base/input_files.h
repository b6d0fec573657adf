// Which files a command read, with a hash of their bytes: a baseline
// (sim/report/baseline.h) records them so that `hcclsim check` can say which
// inputs changed since. Every JSON file goes through load_json_file, and
// every other input (hcclsim import's logs) through read_regular_file, which
// note it here; nothing else reads input files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hcclsim {

struct InputFile {
  std::string path;   // as it was opened
  std::string hash;   // "fnv1a64:<16 hex digits>" of the file's bytes
};

// 64-bit FNV-1a of `bytes`, as 16 lowercase hex digits.
std::string fnv1a64_hex(std::string_view bytes);

// The process-wide log: note_input_file adds a file once (the first read of a path wins).
void note_input_file(const std::string& path, std::string_view bytes);

// The bytes of `path`, which must be a regular file of at most `max_bytes`
// (noted as read). A FIFO, a device (/dev/zero), a directory or a larger
// file is refused (InputError naming the file): reading it could block,
// never end or exhaust memory.
std::string read_regular_file(const std::string& path, std::uint64_t max_bytes);
std::vector<InputFile> input_files_read();
void clear_input_files();

}  // namespace hcclsim
