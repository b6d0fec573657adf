// Typed physical quantities. Parsed once from strings with units; all
// arithmetic is integer (picoseconds, bytes, bytes per second) so that runs
// are bit-for-bit deterministic.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace hcclsim {

// Thrown by the parse_* functions; the message says what was wrong and what
// was expected. Callers add the file / JSON path / option name.
class UnitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A point or span of simulated time, in picoseconds.
struct Time {
  std::uint64_t ps = 0;

  static constexpr Time from_ps(std::uint64_t v) { return Time{v}; }
  static constexpr Time from_ns(std::uint64_t v) { return Time{v * 1000ULL}; }
  static constexpr Time from_us(std::uint64_t v) { return Time{v * 1000000ULL}; }
  double us() const { return static_cast<double>(ps) / 1e6; }

  friend constexpr Time operator+(Time a, Time b) { return Time{a.ps + b.ps}; }
  friend constexpr Time operator-(Time a, Time b) { return Time{a.ps - b.ps}; }
  Time& operator+=(Time b) { ps += b.ps; return *this; }
  friend constexpr bool operator==(Time a, Time b) { return a.ps == b.ps; }
  friend constexpr bool operator!=(Time a, Time b) { return a.ps != b.ps; }
  friend constexpr bool operator<(Time a, Time b) { return a.ps < b.ps; }
  friend constexpr bool operator<=(Time a, Time b) { return a.ps <= b.ps; }
  friend constexpr bool operator>(Time a, Time b) { return a.ps > b.ps; }
  friend constexpr bool operator>=(Time a, Time b) { return a.ps >= b.ps; }
};

// The longest simulated time hcclsim reports: 2^62 ps, about 53 days. A
// run or a closed form that reaches it is refused (time_limit_problem),
// never printed as a result: beyond it the sums of 64-bit picoseconds
// would wrap. Drains of the flow model saturate here so that they cannot.
inline constexpr Time kTimeLimit = Time::from_ps(std::uint64_t{1} << 62);
// Empty when `t` lies below kTimeLimit; otherwise why the result is refused.
std::string time_limit_problem(Time t);
std::string time_limit_problem(double ps);

// Bytes per second (decimal: 1 GB/s = 1e9 B/s).
struct Bandwidth {
  std::uint64_t bytes_per_s = 0;

  // Time to move `bytes` at this rate, rounded up to the next picosecond.
  Time transfer_time(std::uint64_t bytes) const;
  double gbps() const { return static_cast<double>(bytes_per_s) / 1e9; }
  friend bool operator==(Bandwidth a, Bandwidth b) { return a.bytes_per_s == b.bytes_per_s; }
};

// "1.5us", "700ns", "2ms", "1s", "10ps". Decimal mantissa, must resolve to a
// whole number of picoseconds. A bare number is an error.
Time parse_time(std::string_view text);

// Sizes. "64KiB", "2MiB", "1GiB" are binary; "64KB", "2MB", "1GB" decimal;
// "B" bytes. hccl_test's habit "8K", "64M", "1G" (no B) is binary.
// A bare number is an error unless allow_bare_bytes (command-line sizes,
// where hccl_test takes plain byte counts).
std::uint64_t parse_size(std::string_view text, bool allow_bare_bytes = false);

// "56GBps", "56GB/s", "200Gbps", "200Gb/s" (bits), "1.5TBps", "500MBps".
Bandwidth parse_bandwidth(std::string_view text);

// Compute rates: "14.7TFLOPS", "500GFLOPS", "1PFLOPS", "8000000FLOPS"
// (decimal), in floating-point operations per second.
std::uint64_t parse_flops(std::string_view text);

// Human forms used in reports: "8K", "1M", "1G" when exact, else bytes.
std::string format_size(std::uint64_t bytes);
// Fixed 3-decimal microseconds from picoseconds, computed in integers.
std::string format_us(Time t, int decimals = 3);
// A number with `decimals` digits after the point ("%.*f"), for reports.
std::string format_fixed(double v, int decimals);

}  // namespace hcclsim
