// Strict, located reading of JSON configs.
#include "base/json_reader.h"

#include "base/input_files.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>

namespace hcclsim {
namespace {

using json = nlohmann::json;

// "string \"abc\"", "number 2.5", "boolean true", "null", "array", "object".
std::string describe_value(const json& v) {
  if (v.is_object() || v.is_array() || v.is_null()) return v.type_name();
  std::string text = v.dump();
  constexpr std::size_t kMaxShown = 40;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return std::string(v.type_name()) + " " + text;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

// The part of a nlohmann parse_error message after its "... line L, column C: "
// prefix, e.g. "syntax error while parsing value - invalid literal; ...".
std::string parse_error_detail(const std::string& what) {
  const std::size_t head = what.find("parse error");
  if (head != std::string::npos) {
    const std::size_t colon = what.find(": ", head);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  return what;
}

std::int64_t to_int64(const json& v, const JsonLocation& loc) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      loc.fail("integer " + std::to_string(u) + " is too large (at most " +
               std::to_string(std::numeric_limits<std::int64_t>::max()) + ")");
    }
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_float()) {
    // Integral floats such as 4.0 or 1e3 are accepted; fractions are not.
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      loc.fail("expected an integer, got " + describe_value(v));
    }
    // [-2^63, 2^63) is exactly representable at both ends.
    if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) {
      loc.fail("integer " + v.dump() + " is out of the 64-bit range");
    }
    return static_cast<std::int64_t>(d);
  }
  loc.fail("expected an integer, got " + describe_value(v));
}

std::int64_t check_range(std::int64_t value, std::int64_t min, std::int64_t max,
                         const JsonLocation& loc) {
  if (value < min || value > max) {
    loc.fail("value " + std::to_string(value) + " is out of range; expected an integer in [" +
             std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

const std::string& as_string(const json& v, const JsonLocation& loc) {
  if (!v.is_string()) loc.fail("expected a string, got " + describe_value(v));
  return v.get_ref<const std::string&>();
}

std::string check_choice(const json& v, const std::vector<std::string>& allowed,
                         const JsonLocation& loc) {
  const std::string& s = as_string(v, loc);
  for (const auto& a : allowed) {
    if (a == s) return s;
  }
  loc.fail("invalid value \"" + printable(s) + "\"; expected one of: " + join(allowed));
}

// A quantity's magnitude in its base unit, to compare it with its bounds.
std::uint64_t magnitude(Time t) { return t.ps; }
std::uint64_t magnitude(Bandwidth b) { return b.bytes_per_s; }
std::uint64_t magnitude(std::uint64_t bytes) { return bytes; }

template <typename Parse, typename T = std::invoke_result_t<Parse, const std::string&>>
T parse_cited(const json& v, const JsonLocation& loc, const char* example, Parse parse);

// A quantity with a unit, "1.5us", or a cited constant (below).
template <typename Parse, typename T = std::invoke_result_t<Parse, const std::string&>>
T parse_unit(const json& v, const JsonLocation& loc, const char* example, Parse parse) {
  if (v.is_object()) return parse_cited(v, loc, example, parse);
  if (!v.is_string()) {
    loc.fail(std::string("expected a string with a unit such as \"") + example + "\", got " +
             describe_value(v));
  }
  try {
    return parse(v.get_ref<const std::string&>());
  } catch (const UnitError& e) {
    loc.fail(e.what());
  }
}

// A calibrated constant with its citation: {"value": "1.5us", "source":
// "...", "measured": ["A2-1/read/16K", ...]}, the ids of the rows of
// configs/calibration/measurements.json it was fitted to (a test checks
// that they resolve). A constant `hcclsim calibrate` may fit states its
// bounds in its own unit, "bounds": ["0.1us", "2us"] (low <= value <= high),
// and may say why in "bounds_reason".
template <typename Parse, typename T>
T parse_cited(const json& v, const JsonLocation& loc, const char* example, Parse parse) {
  ObjectReader cited(v, loc);
  cited.required_string("source");
  if (const json* ids = cited.optional_value("measured")) {
    const JsonLocation where = loc.key("measured");
    if (!ids->is_array() || ids->empty()) where.fail("expected a non-empty array of measurement ids");
    for (std::size_t i = 0; i < ids->size(); ++i) {
      if (!(*ids)[i].is_string()) where.index(i).fail("expected a measurement id (a string)");
    }
  }
  const json& inner = cited.required_value("value");
  if (inner.is_object()) {
    loc.key("value").fail("expected a string with a unit such as \"" + std::string(example) + "\", got object");
  }
  const T value = parse_unit(inner, loc.key("value"), example, parse);
  if (const json* bounds = cited.optional_value("bounds")) {
    const JsonLocation where = loc.key("bounds");
    if (!bounds->is_array() || bounds->size() != 2) {
      where.fail(std::string("expected [low, high], two values in the constant's unit such as \"") + example + "\"");
    }
    for (std::size_t i = 0; i < 2; ++i) {
      if (!(*bounds)[i].is_string()) {
        where.index(i).fail("expected a string with a unit such as \"" + std::string(example) + "\"");
      }
    }
    const T low = parse_unit((*bounds)[0], where.index(0), example, parse);
    const T high = parse_unit((*bounds)[1], where.index(1), example, parse);
    const std::string shown_low = printable((*bounds)[0].get<std::string>());
    const std::string shown_high = printable((*bounds)[1].get<std::string>());
    if (magnitude(low) > magnitude(high)) where.fail("the low bound " + shown_low + " is above the high bound " + shown_high);
    if (magnitude(value) < magnitude(low) || magnitude(value) > magnitude(high)) {
      where.fail("the value " + printable(inner.get<std::string>()) + " is outside its bounds [" + shown_low + ", " +
                 shown_high + "]");
    }
  }
  if (cited.optional_string("bounds_reason") && !cited.has("bounds")) {
    loc.key("bounds_reason").fail("a reason for bounds the constant does not state (\"bounds\": [low, high])");
  }
  cited.finish();
  return value;
}

Time read_time(const json& v, const JsonLocation& loc) {
  const Time t = parse_unit(v, loc, "1.5us", [](const std::string& s) { return parse_time(s); });
  if (t > kMaxInputTime) loc.fail("time " + v.dump() + " is longer than the limit of 1000000s (10^6 s)");
  return t;
}
std::uint64_t read_size(const json& v, const JsonLocation& loc) {
  return parse_unit(v, loc, "64KiB", [](const std::string& s) { return parse_size(s); });
}
Bandwidth read_bandwidth(const json& v, const JsonLocation& loc) {
  return parse_unit(v, loc, "56GBps", [](const std::string& s) { return parse_bandwidth(s); });
}

std::uint64_t read_flops(const json& v, const JsonLocation& loc) {
  return parse_unit(v, loc, "8TFLOPS", [](const std::string& s) { return parse_flops(s); });
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void JsonLocation::fail(const std::string& message) const { throw InputError(describe(), message); }

json load_json_file(const std::string& file) {
  // A regular file of bounded size only: a FIFO or a device (/dev/zero) would
  // be waited on or read without end.
  return parse_json_text(read_regular_file(file, kMaxJsonFileBytes), file);
}

namespace {

// nlohmann's parser keeps the last of two equal keys in an object; a config
// with one would silently lose the first. This parser callback refuses it
// (and nesting deeper than kMaxJsonDepth) naming the JSON path.
constexpr int kMaxJsonDepth = 256;

class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& file) : file_(file) {}

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw InputError(file_ + " at " + path(),
                           "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        frames_.push_back(Frame{event == json::parse_event_t::object_start, {}, {}, 0});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) {
          throw InputError(file_ + " at " + path(), "duplicate key '" + printable(f.key) +
                                                        "' (JSON parsers keep only one of them; give each key once)");
        }
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        value_done();
        break;
      case json::parse_event_t::value: value_done(); break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    std::size_t index;
  };
  void value_done() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  std::string path() const {
    std::string p = "$";
    for (const Frame& f : frames_) p += f.object ? "." + printable(f.key) : "[" + std::to_string(f.index) + "]";
    return p;
  }
  const std::string& file_;
  std::vector<Frame> frames_;
};

}  // namespace

json parse_json_text(const std::string& text, const std::string& file) {
  try {
    DuplicateKeyCheck check(file);
    return json::parse(text, [&check](int depth, json::parse_event_t event, json& parsed) {
      return check(depth, event, parsed);
    });
  } catch (const json::parse_error& e) {
    // e.byte is 1-based: the index of the last character read (n+1 at end of input).
    std::size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    if (offset > text.size()) offset = text.size();
    std::size_t line = 1;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < offset; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    const std::size_t column = offset - line_start + 1;
    throw InputError(file, "invalid JSON at line " + std::to_string(line) + ", column " +
                               std::to_string(column) + ": " + parse_error_detail(e.what()));
  } catch (const json::exception& e) {
    // Not a parse_error but out_of_range 406: a number such as 1e400 that no double holds (found by fuzzing).
    throw InputError(file, std::string("invalid JSON: ") + printable(e.what()));
  }
}

ObjectReader::ObjectReader(const json& value, JsonLocation where)
    : value_(value), where_(std::move(where)) {
  if (!value_.is_object()) where_.fail("expected an object, got " + describe_value(value_));
}

bool ObjectReader::has(const std::string& key) const {
  expected_.insert(key);
  return value_.contains(key);
}

const json& ObjectReader::get(const std::string& key) {
  expected_.insert(key);
  const auto it = value_.find(key);
  if (it == value_.end()) location_of(key).fail("missing required key '" + key + "'");
  return *it;
}

const json* ObjectReader::optional_value(const std::string& key) {
  expected_.insert(key);
  const auto it = value_.find(key);
  return it == value_.end() ? nullptr : &*it;
}

const json& ObjectReader::required_value(const std::string& key) { return get(key); }

std::string ObjectReader::required_string(const std::string& key) {
  return as_string(get(key), location_of(key));
}

std::optional<std::string> ObjectReader::optional_string(const std::string& key) {
  const json* v = optional_value(key);
  if (v == nullptr) return std::nullopt;
  return as_string(*v, location_of(key));
}

std::string ObjectReader::string_or(const std::string& key, const std::string& fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : as_string(*v, location_of(key));
}

std::string ObjectReader::required_choice(const std::string& key,
                                          const std::vector<std::string>& allowed) {
  return check_choice(get(key), allowed, location_of(key));
}

std::string ObjectReader::choice_or(const std::string& key, const std::vector<std::string>& allowed,
                                    const std::string& fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : check_choice(*v, allowed, location_of(key));
}

std::int64_t ObjectReader::required_int(const std::string& key) {
  return to_int64(get(key), location_of(key));
}

int ObjectReader::required_int32(const std::string& key) {
  const JsonLocation loc = location_of(key);
  return static_cast<int>(check_range(to_int64(get(key), loc), std::numeric_limits<int>::min(),
                                      std::numeric_limits<int>::max(), loc));
}

std::int64_t ObjectReader::int_or(const std::string& key, std::int64_t fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : to_int64(*v, location_of(key));
}

std::int64_t ObjectReader::required_int_in(const std::string& key, std::int64_t min,
                                           std::int64_t max) {
  const JsonLocation loc = location_of(key);
  return check_range(to_int64(get(key), loc), min, max, loc);
}

std::int64_t ObjectReader::int_in_or(const std::string& key, std::int64_t min, std::int64_t max,
                                     std::int64_t fallback) {
  const json* v = optional_value(key);
  if (v == nullptr) return fallback;
  const JsonLocation loc = location_of(key);
  return check_range(to_int64(*v, loc), min, max, loc);
}

bool ObjectReader::bool_or(const std::string& key, bool fallback) {
  const json* v = optional_value(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) location_of(key).fail("expected a boolean, got " + describe_value(*v));
  return v->get<bool>();
}

Time ObjectReader::required_time(const std::string& key) {
  return read_time(get(key), location_of(key));
}

Time ObjectReader::time_or(const std::string& key, Time fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : read_time(*v, location_of(key));
}

std::uint64_t ObjectReader::required_size(const std::string& key) {
  return read_size(get(key), location_of(key));
}

std::uint64_t ObjectReader::size_or(const std::string& key, std::uint64_t fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : read_size(*v, location_of(key));
}

Bandwidth ObjectReader::required_bandwidth(const std::string& key) {
  return read_bandwidth(get(key), location_of(key));
}

Bandwidth ObjectReader::bandwidth_or(const std::string& key, Bandwidth fallback) {
  const json* v = optional_value(key);
  return v == nullptr ? fallback : read_bandwidth(*v, location_of(key));
}

std::uint64_t ObjectReader::required_flops(const std::string& key) { return read_flops(get(key), location_of(key)); }

ObjectReader ObjectReader::required_object(const std::string& key) {
  return ObjectReader(get(key), location_of(key));
}

const json& ObjectReader::required_array(const std::string& key) {
  const json& v = get(key);
  if (!v.is_array()) location_of(key).fail("expected an array, got " + describe_value(v));
  return v;
}

void ObjectReader::finish() const {
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (expected_.count(it.key()) != 0) continue;
    std::string message = "unknown key '" + printable(it.key()) + "'; ";
    if (expected_.empty()) {
      message += "no keys are expected here";
    } else {
      message += "expected one of: " +
                 join(std::vector<std::string>(expected_.begin(), expected_.end()));
    }
    location_of(it.key()).fail(message);
  }
}

}  // namespace hcclsim
