// Integer-only parsing and formatting of times, sizes and bandwidths.
//
// A quantity "<mantissa><unit>" is read as N / 10^f (N the digits of the
// mantissa without the decimal point, f the number of significant fraction
// digits) and the unit as an exact rational M / D of the base unit. The result
// N * M / (10^f * D) must be a whole number; it is computed after cancelling
// common factors so nothing is rounded and nothing silently overflows.
#include "base/units.h"

#include <cstddef>
#include <cstdio>
#include <limits>

namespace hcclsim {
namespace {

using u128 = unsigned __int128;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
// Mantissas are limited to this many significant digits (10^36 < 2^128 / 2^8),
// which keeps every intermediate product below 2^128.
constexpr int kMaxDigits = 36;

// One accepted unit: value in base units = mantissa * mul / div.
struct UnitDef {
  std::string_view name;
  std::uint64_t mul;
  std::uint64_t div;
};

constexpr std::uint64_t kKi = 1ULL << 10;
constexpr std::uint64_t kMi = 1ULL << 20;
constexpr std::uint64_t kGi = 1ULL << 30;
constexpr std::uint64_t kTi = 1ULL << 40;

constexpr UnitDef kTimeUnits[] = {
    {"ps", 1, 1},
    {"ns", 1000ULL, 1},
    {"us", 1000000ULL, 1},
    {"ms", 1000000000ULL, 1},
    {"s", 1000000000000ULL, 1},
};

constexpr UnitDef kSizeUnits[] = {
    {"B", 1, 1},
    {"KB", 1000ULL, 1},
    {"MB", 1000000ULL, 1},
    {"GB", 1000000000ULL, 1},
    {"TB", 1000000000000ULL, 1},
    {"KiB", kKi, 1},
    {"MiB", kMi, 1},
    {"GiB", kGi, 1},
    {"TiB", kTi, 1},
    {"K", kKi, 1},
    {"M", kMi, 1},
    {"G", kGi, 1},
    {"T", kTi, 1},
};

constexpr UnitDef kBandwidthUnits[] = {
    {"Bps", 1, 1},
    {"B/s", 1, 1},
    {"KBps", 1000ULL, 1},
    {"KB/s", 1000ULL, 1},
    {"MBps", 1000000ULL, 1},
    {"MB/s", 1000000ULL, 1},
    {"GBps", 1000000000ULL, 1},
    {"GB/s", 1000000000ULL, 1},
    {"TBps", 1000000000000ULL, 1},
    {"TB/s", 1000000000000ULL, 1},
    {"bps", 1, 8},
    {"b/s", 1, 8},
    {"Kbps", 1000ULL, 8},
    {"Kb/s", 1000ULL, 8},
    {"Mbps", 1000000ULL, 8},
    {"Mb/s", 1000000ULL, 8},
    {"Gbps", 1000000000ULL, 8},
    {"Gb/s", 1000000000ULL, 8},
    {"Tbps", 1000000000000ULL, 8},
    {"Tb/s", 1000000000000ULL, 8},
};

constexpr UnitDef kFlopsUnits[] = {
    {"FLOPS", 1, 1},
    {"GFLOPS", 1000000000ULL, 1},
    {"TFLOPS", 1000000000000ULL, 1},
    {"PFLOPS", 1000000000000000ULL, 1},
};

// What is being parsed, for messages.
struct Kind {
  std::string_view noun;       // "time"
  std::string_view whole_of;   // "picoseconds"
  std::string_view example;    // "1.5us"
  std::string_view unit_list;  // "ps, ns, us, ms, s"
};

constexpr Kind kTimeKind{"time", "picoseconds", "1.5us", "ps, ns, us, ms, s"};
constexpr Kind kSizeKind{"size", "bytes", "64KiB",
                         "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, K, M, G, T (K/M/G/T = KiB/MiB/GiB/TiB)"};
constexpr Kind kBandwidthKind{"bandwidth", "bytes per second", "56GBps",
                              "Bps, KBps, MBps, GBps, TBps (bytes/s; also written GB/s), "
                              "bps, Kbps, Mbps, Gbps, Tbps (bits/s; also written Gb/s)"};

constexpr Kind kFlopsKind{"compute rate", "floating-point operations per second", "8TFLOPS",
                          "FLOPS, GFLOPS, TFLOPS, PFLOPS"};

std::string quoted(std::string_view text) {
  std::string out = "\"";
  out.append(text.data(), text.size());
  out += '"';
  return out;
}

u128 gcd128(u128 a, u128 b) {
  while (b != 0) {
    u128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A mantissa as N / 10^frac_digits, trailing fraction zeros removed.
struct Mantissa {
  u128 digits = 0;
  int frac_digits = 0;
};

// Parses `text` against `units`. A null `bare_unit` means a bare number is an
// error; otherwise it is read in that unit.
std::uint64_t parse_quantity(std::string_view text, const Kind& kind, const UnitDef* units,
                             std::size_t unit_count, const UnitDef* bare_unit) {
  const std::string shown = quoted(text);
  const std::string expected_form = std::string("expected a number with a unit such as \"") +
                                    std::string(kind.example) + "\" (units: " +
                                    std::string(kind.unit_list) + ")";
  if (text.empty()) {
    throw UnitError("empty " + std::string(kind.noun) + "; " + expected_form);
  }
  if (text.front() == '-') {
    throw UnitError(shown + " is negative; a " + std::string(kind.noun) + " must not be negative");
  }

  // Mantissa: digits, optionally '.' and more digits; at least one digit on
  // each side of the point.
  std::size_t pos = 0;
  const std::size_t int_begin = pos;
  while (pos < text.size() && is_digit(text[pos])) ++pos;
  const std::size_t int_end = pos;
  std::size_t frac_begin = pos;
  std::size_t frac_end = pos;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    frac_begin = pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    frac_end = pos;
    if (frac_end == frac_begin) {
      throw UnitError(shown + " is not a valid " + std::string(kind.noun) +
                      ": a digit must follow the decimal point; " + expected_form);
    }
  }
  if (int_end == int_begin) {
    throw UnitError(shown + " is not a valid " + std::string(kind.noun) + "; " + expected_form);
  }

  // Drop leading zeros of the integer part and trailing zeros of the fraction.
  std::size_t lead = int_begin;
  while (lead < int_end && text[lead] == '0') ++lead;
  while (frac_end > frac_begin && text[frac_end - 1] == '0') --frac_end;
  const std::size_t int_digits = int_end - lead;
  const std::size_t frac_digits = frac_end - frac_begin;

  const std::string too_large = shown + " is too large (it does not fit in 64 bits of " +
                                std::string(kind.whole_of) + ")";
  if (int_digits > 20) throw UnitError(too_large);
  if (int_digits + frac_digits > static_cast<std::size_t>(kMaxDigits)) {
    throw UnitError(shown + " has too many digits (at most " + std::to_string(kMaxDigits) +
                    " significant digits)");
  }
  Mantissa m;
  for (std::size_t i = lead; i < int_end; ++i) m.digits = m.digits * 10 + (text[i] - '0');
  for (std::size_t i = frac_begin; i < frac_end; ++i) m.digits = m.digits * 10 + (text[i] - '0');
  m.frac_digits = static_cast<int>(frac_digits);

  // Unit: after at most one space.
  std::size_t unit_pos = pos;
  if (unit_pos < text.size() && text[unit_pos] == ' ') ++unit_pos;
  const std::string_view unit = text.substr(unit_pos);
  const UnitDef* def = nullptr;
  if (unit.empty()) {
    if (unit_pos != pos) {
      throw UnitError(shown + " has a space but no unit; " + expected_form);
    }
    if (bare_unit == nullptr) {
      throw UnitError(shown + " has no unit; a " + std::string(kind.noun) +
                      " needs one of the units " + std::string(kind.unit_list) + ", e.g. \"" +
                      std::string(kind.example) + "\"");
    }
    def = bare_unit;
  } else {
    for (std::size_t i = 0; i < unit_count; ++i) {
      if (units[i].name == unit) {
        def = &units[i];
        break;
      }
    }
    if (def == nullptr) {
      throw UnitError(shown + ": unknown " + std::string(kind.noun) + " unit " + quoted(unit) +
                      "; expected one of: " + std::string(kind.unit_list));
    }
  }

  // value = N * mul / (10^f * div), exactly.
  u128 den = def->div;
  for (int i = 0; i < m.frac_digits; ++i) den *= 10;  // <= 8 * 10^36 < 2^128
  u128 mul = def->mul;
  const u128 g = gcd128(mul, den);
  mul /= g;
  den /= g;
  if (m.digits % den != 0) {
    throw UnitError(shown + " is not a whole number of " + std::string(kind.whole_of));
  }
  const u128 q = m.digits / den;
  if (q != 0 && mul > static_cast<u128>(kU64Max) / q) throw UnitError(too_large);
  const u128 value = q * mul;
  if (value > static_cast<u128>(kU64Max)) throw UnitError(too_large);
  return static_cast<std::uint64_t>(value);
}

template <std::size_t N>
constexpr std::size_t count_of(const UnitDef (&)[N]) {
  return N;
}

}  // namespace

std::string time_limit_problem(double ps) {
  if (ps < static_cast<double>(kTimeLimit.ps)) return {};
  return "the simulated time reaches hcclsim's limit of 2^62 ps (about 53 days): the sizes are too large for the "
         "profile's rates; use smaller sizes or check the profile's bandwidths";
}

std::string time_limit_problem(Time t) { return time_limit_problem(static_cast<double>(t.ps)); }

Time Bandwidth::transfer_time(std::uint64_t bytes) const {
  if (bytes_per_s == 0) {
    throw UnitError("cannot compute a transfer time at a bandwidth of zero");
  }
  const u128 num = static_cast<u128>(bytes) * 1000000000000ULL;
  const u128 ps = (num + bytes_per_s - 1) / bytes_per_s;
  if (ps > static_cast<u128>(kU64Max)) {
    throw UnitError("transfer time of " + std::to_string(bytes) + " bytes at " +
                    std::to_string(bytes_per_s) + " B/s does not fit in 64 bits of picoseconds");
  }
  return Time{static_cast<std::uint64_t>(ps)};
}

Time parse_time(std::string_view text) {
  return Time{parse_quantity(text, kTimeKind, kTimeUnits, count_of(kTimeUnits), nullptr)};
}

std::uint64_t parse_size(std::string_view text, bool allow_bare_bytes) {
  return parse_quantity(text, kSizeKind, kSizeUnits, count_of(kSizeUnits),
                        allow_bare_bytes ? &kSizeUnits[0] : nullptr);
}

Bandwidth parse_bandwidth(std::string_view text) {
  const std::uint64_t v =
      parse_quantity(text, kBandwidthKind, kBandwidthUnits, count_of(kBandwidthUnits), nullptr);
  if (v == 0) {
    throw UnitError(quoted(text) + " is zero; a bandwidth must be greater than zero");
  }
  return Bandwidth{v};
}

std::uint64_t parse_flops(std::string_view text) {
  const std::uint64_t v = parse_quantity(text, kFlopsKind, kFlopsUnits, count_of(kFlopsUnits), nullptr);
  if (v == 0) throw UnitError(quoted(text) + " is zero; a compute rate must be greater than zero");
  return v;
}

std::string format_size(std::uint64_t bytes) {
  if (bytes != 0) {
    static constexpr struct {
      std::uint64_t factor;
      const char* suffix;
    } kUnits[] = {{kTi, "T"}, {kGi, "G"}, {kMi, "M"}, {kKi, "K"}};
    for (const auto& u : kUnits) {
      if (bytes % u.factor == 0) return std::to_string(bytes / u.factor) + u.suffix;
    }
  }
  return std::to_string(bytes);
}

std::string format_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string format_us(Time t, int decimals) {
  if (decimals < 0) decimals = 0;
  constexpr std::uint64_t kPsPerUs = 1000000ULL;
  if (decimals >= 6) {
    std::string frac = std::to_string(t.ps % kPsPerUs);
    frac.insert(0, 6 - frac.size(), '0');
    frac.append(static_cast<std::size_t>(decimals - 6), '0');
    return std::to_string(t.ps / kPsPerUs) + "." + frac;
  }
  std::uint64_t step = 1;  // picoseconds per last printed digit
  for (int i = decimals; i < 6; ++i) step *= 10;
  // Round half up; 128 bits so the largest Time cannot overflow.
  const u128 units = (static_cast<u128>(t.ps) + step / 2) / step;
  std::uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const std::uint64_t whole = static_cast<std::uint64_t>(units / scale);
  std::string out = std::to_string(whole);
  if (decimals > 0) {
    std::string frac = std::to_string(static_cast<std::uint64_t>(units % scale));
    frac.insert(0, static_cast<std::size_t>(decimals) - frac.size(), '0');
    out += "." + frac;
  }
  return out;
}

}  // namespace hcclsim
