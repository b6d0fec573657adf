// Strict reading of JSON configs into typed values. Every value is read
// through an ObjectReader that knows its file and JSON path, so every error
// names both; finish() refuses keys nobody asked for and lists the expected ones.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/units.h"

namespace hcclsim {

// The longest time an input may give (a duration, a timeout, a latency):
// 10^6 s. Every time and size in a run is bounded so that sums of simulated
// time stay far below 2^64 ps (about 1.8 x 10^7 s) and cannot wrap.
constexpr Time kMaxInputTime{1000000ULL * 1000000000000ULL};
// Matmul dimensions and element counts in program files: at most 2^40.
constexpr std::int64_t kMaxProgramDimension = std::int64_t{1} << 40;

// Parses a file; a syntax error names the file, line and column.
// Reads and parses a JSON input file: a regular file of at most
// kMaxJsonFileBytes (else InputError naming it), noted as read (base/input_files.h).
constexpr std::uint64_t kMaxJsonFileBytes = std::uint64_t{1} << 30;  // 1 GiB: far above any config or rank table
nlohmann::json load_json_file(const std::string& file);
// Same for text already in memory (`file` is only used in messages).
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

// `text` with control characters and DEL written as \n, \t, \xNN, so that a
// name from an input file cannot forge lines or terminal escape sequences
// when it is printed (headings, messages). Other bytes (UTF-8) are kept.
std::string printable(std::string_view text);

// Location of a JSON value: file + path like "$.links[3].bandwidth".
struct JsonLocation {
  std::string file;
  std::string path = "$";

  JsonLocation key(const std::string& k) const { return {file, path + "." + printable(k)}; }
  JsonLocation index(std::size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  std::string describe() const { return file + " at " + path; }
  [[noreturn]] void fail(const std::string& message) const;
};

// The value at a dotted path of object keys, "links.hccs.bandwidth", or
// nullptr when a key is missing or a step is not an object.
template <class Json>
Json* json_at_path(Json& doc, const std::string& dotted) {
  Json* at = &doc;
  for (std::size_t begin = 0; begin <= dotted.size();) {
    const std::size_t dot = std::min(dotted.find('.', begin), dotted.size());
    if (!at->is_object()) return nullptr;
    const auto it = at->find(dotted.substr(begin, dot - begin));
    if (it == at->end()) return nullptr;
    at = &*it;
    begin = dot + 1;
  }
  return at;
}

class ObjectReader {
 public:
  // Throws InputError if `value` is not an object.
  ObjectReader(const nlohmann::json& value, JsonLocation where);

  bool has(const std::string& key) const;

  std::string required_string(const std::string& key);
  std::optional<std::string> optional_string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  // One of `allowed` (error lists them).
  std::string required_choice(const std::string& key, const std::vector<std::string>& allowed);
  std::string choice_or(const std::string& key, const std::vector<std::string>& allowed,
                        const std::string& fallback);

  std::int64_t required_int(const std::string& key);
  // An integer that must fit an `int` (refused, not truncated, when it does not).
  int required_int32(const std::string& key);
  std::int64_t int_or(const std::string& key, std::int64_t fallback);
  // Integer within [min, max] inclusive.
  std::int64_t required_int_in(const std::string& key, std::int64_t min, std::int64_t max);
  std::int64_t int_in_or(const std::string& key, std::int64_t min, std::int64_t max,
                         std::int64_t fallback);
  bool bool_or(const std::string& key, bool fallback);

  // Quantities with units: the JSON value must be a string like "1.5us", or
  // a cited constant {"value": "1.5us", "source": "where it was measured"},
  // optionally with "measured": [row ids], and "bounds": ["0.1us", "2us"]
  // (low <= value <= high, what `hcclsim calibrate` may fit it within) with
  // "bounds_reason".
  Time required_time(const std::string& key);
  Time time_or(const std::string& key, Time fallback);
  std::uint64_t required_size(const std::string& key);
  std::uint64_t size_or(const std::string& key, std::uint64_t fallback);
  Bandwidth required_bandwidth(const std::string& key);
  Bandwidth bandwidth_or(const std::string& key, Bandwidth fallback);
  std::uint64_t required_flops(const std::string& key);   // "14.7TFLOPS": operations per second

  // Nested values. required_array checks the value is an array.
  ObjectReader required_object(const std::string& key);
  const nlohmann::json& required_array(const std::string& key);
  const nlohmann::json& required_value(const std::string& key);
  const nlohmann::json* optional_value(const std::string& key);

  JsonLocation location() const { return where_; }
  JsonLocation location_of(const std::string& key) const { return where_.key(key); }

  // Refuses keys that were never asked for: "unknown key 'bandwith'; expected
  // one of: bandwidth, latency". Call after reading every field.
  void finish() const;

 private:
  const nlohmann::json& get(const std::string& key);  // marks the key as expected
  const nlohmann::json& value_;
  JsonLocation where_;
  mutable std::set<std::string> expected_;  // has() is const but still marks the key
};

}  // namespace hcclsim
