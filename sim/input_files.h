// Which files a command read, with a hash of their bytes: a baseline
// (sim/report/baseline.h) records them so that `hcclsim check` can say which
// inputs changed since. Every JSON file goes through load_json_file, which
// notes it here; nothing else reads input files.
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
std::vector<InputFile> input_files_read();
void clear_input_files();

}  // namespace hcclsim
