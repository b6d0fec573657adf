// Unit tests for base/units: integer parsing and formatting of quantities.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "base/units.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

// ---------------------------------------------------------------- parse_time

TEST_CASE("parse_time reads each unit", "[units][time]") {
  CHECK(parse_time("10ps").ps == 10);
  CHECK(parse_time("700ns").ps == 700000);
  CHECK(parse_time("2us").ps == 2000000);
  CHECK(parse_time("2ms").ps == 2000000000ULL);
  CHECK(parse_time("1s").ps == 1000000000000ULL);
  CHECK(parse_time("0us").ps == 0);
}

TEST_CASE("parse_time accepts a decimal mantissa", "[units][time]") {
  CHECK(parse_time("1.5us") == Time{1500000});
  CHECK(parse_time("0.02us") == Time{20000});
  CHECK(parse_time("0.001ns") == Time{1});
  CHECK(parse_time("1.000000ps") == Time{1});
  CHECK(parse_time("0.000000000001s") == Time{1});
}

TEST_CASE("parse_time allows a single space before the unit", "[units][time]") {
  CHECK(parse_time("1.5 us") == Time{1500000});
  CHECK_THROWS_AS(parse_time("1.5  us"), UnitError);
  CHECK_THROWS_AS(parse_time("1.5 "), UnitError);
}

TEST_CASE("parse_time rejects fractions of a picosecond", "[units][time]") {
  REQUIRE_THROWS_WITH(parse_time("0.5ps"), Contains("is not a whole number of picoseconds"));
  REQUIRE_THROWS_WITH(parse_time("0.0001ns"), Contains("is not a whole number of picoseconds"));
  REQUIRE_THROWS_WITH(parse_time("0.0000000000001s"),
                      Contains("is not a whole number of picoseconds"));
}

TEST_CASE("parse_time requires a unit and lists the units", "[units][time]") {
  REQUIRE_THROWS_AS(parse_time("100"), UnitError);
  REQUIRE_THROWS_WITH(parse_time("100"), Contains("no unit"));
  REQUIRE_THROWS_WITH(parse_time("100"), Contains("ps, ns, us, ms, s"));
}

TEST_CASE("parse_time rejects unknown units and names them", "[units][time]") {
  REQUIRE_THROWS_WITH(parse_time("5sec"), Contains("unknown time unit \"sec\""));
  REQUIRE_THROWS_WITH(parse_time("5US"), Contains("ps, ns, us, ms, s"));
}

TEST_CASE("parse_time rejects empty, negative and malformed text", "[units][time]") {
  REQUIRE_THROWS_WITH(parse_time(""), Contains("empty time"));
  REQUIRE_THROWS_WITH(parse_time("-1us"), Contains("negative"));
  REQUIRE_THROWS_AS(parse_time("us"), UnitError);
  REQUIRE_THROWS_AS(parse_time(".5us"), UnitError);
  REQUIRE_THROWS_AS(parse_time("5.us"), UnitError);
  REQUIRE_THROWS_AS(parse_time("+5us"), UnitError);
  REQUIRE_THROWS_AS(parse_time(" 5us"), UnitError);
  REQUIRE_THROWS_AS(parse_time("1e3us"), UnitError);
}

TEST_CASE("parse_time accepts the uint64 maximum and rejects one more", "[units][time]") {
  CHECK(parse_time("18446744073709551615ps").ps == std::numeric_limits<std::uint64_t>::max());
  REQUIRE_THROWS_WITH(parse_time("18446744073709551616ps"), Contains("too large"));
  REQUIRE_THROWS_WITH(parse_time("18446745s"), Contains("too large"));
  REQUIRE_THROWS_WITH(parse_time("99999999999999999999999999ps"), Contains("too large"));
  CHECK(parse_time("18446744.073709551615s").ps == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("parse_time rejects absurdly long mantissas", "[units][time]") {
  REQUIRE_THROWS_WITH(parse_time("1.0000000000000000000000000000000000000001s"),
                      Contains("too many digits"));
  // Trailing zeros are not significant.
  CHECK(parse_time("1.0000000000000000000000000000000000000000s").ps == 1000000000000ULL);
}

// ---------------------------------------------------------------- parse_size

TEST_CASE("parse_size reads bytes and decimal units", "[units][size]") {
  CHECK(parse_size("0B") == 0);
  CHECK(parse_size("1B") == 1);
  CHECK(parse_size("64KB") == 64000);
  CHECK(parse_size("2MB") == 2000000);
  CHECK(parse_size("1GB") == 1000000000ULL);
  CHECK(parse_size("1TB") == 1000000000000ULL);
}

TEST_CASE("parse_size reads binary units", "[units][size]") {
  CHECK(parse_size("64KiB") == 65536);
  CHECK(parse_size("2MiB") == 2 * 1048576);
  CHECK(parse_size("1GiB") == (1ULL << 30));
  CHECK(parse_size("1TiB") == (1ULL << 40));
}

TEST_CASE("parse_size treats K/M/G/T without B as binary", "[units][size]") {
  CHECK(parse_size("8K") == 8192);
  CHECK(parse_size("64M") == 64ULL << 20);
  CHECK(parse_size("1G") == 1ULL << 30);
  CHECK(parse_size("2T") == 2ULL << 40);
}

TEST_CASE("parse_size accepts a decimal mantissa only for whole bytes", "[units][size]") {
  CHECK(parse_size("1.5KiB") == 1536);
  CHECK(parse_size("1.5KB") == 1500);
  CHECK(parse_size("0.5K") == 512);
  CHECK(parse_size("1.5 MiB") == 1572864);
  REQUIRE_THROWS_WITH(parse_size("1.3B"), Contains("is not a whole number of bytes"));
  REQUIRE_THROWS_WITH(parse_size("1.0001KB"), Contains("is not a whole number of bytes"));
}

TEST_CASE("parse_size rejects a bare number unless bare bytes are allowed", "[units][size]") {
  REQUIRE_THROWS_WITH(parse_size("1024"), Contains("no unit"));
  REQUIRE_THROWS_WITH(parse_size("1024"), Contains("KiB"));
  CHECK(parse_size("1024", true) == 1024);
  CHECK(parse_size("0", true) == 0);
  CHECK(parse_size("8K", true) == 8192);
  REQUIRE_THROWS_WITH(parse_size("1.5", true), Contains("is not a whole number of bytes"));
}

TEST_CASE("parse_size is case-sensitive about units", "[units][size]") {
  REQUIRE_THROWS_WITH(parse_size("8k"), Contains("unknown size unit \"k\""));
  REQUIRE_THROWS_AS(parse_size("1kib"), UnitError);
  REQUIRE_THROWS_AS(parse_size("1Kb"), UnitError);
}

TEST_CASE("parse_size rejects empty, negative and overflowing sizes", "[units][size]") {
  REQUIRE_THROWS_WITH(parse_size(""), Contains("empty size"));
  REQUIRE_THROWS_WITH(parse_size("", true), Contains("empty size"));
  REQUIRE_THROWS_WITH(parse_size("-1K"), Contains("negative"));
  CHECK(parse_size("16777215TiB") == 16777215ULL << 40);
  REQUIRE_THROWS_WITH(parse_size("16777216TiB"), Contains("too large"));
  REQUIRE_THROWS_WITH(parse_size("18446744073709551616", true), Contains("too large"));
}

// ----------------------------------------------------------- parse_bandwidth

TEST_CASE("parse_bandwidth reads decimal bytes per second", "[units][bandwidth]") {
  CHECK(parse_bandwidth("56GBps").bytes_per_s == 56000000000ULL);
  CHECK(parse_bandwidth("56GB/s").bytes_per_s == 56000000000ULL);
  CHECK(parse_bandwidth("500MBps").bytes_per_s == 500000000ULL);
  CHECK(parse_bandwidth("500MB/s").bytes_per_s == 500000000ULL);
  CHECK(parse_bandwidth("3KBps").bytes_per_s == 3000);
  CHECK(parse_bandwidth("1.5TBps").bytes_per_s == 1500000000000ULL);
  CHECK(parse_bandwidth("1.5 TB/s").bytes_per_s == 1500000000000ULL);
}

TEST_CASE("parse_bandwidth reads bits per second and divides by 8", "[units][bandwidth]") {
  CHECK(parse_bandwidth("200Gbps").bytes_per_s == 25000000000ULL);
  CHECK(parse_bandwidth("200Gb/s").bytes_per_s == 25000000000ULL);
  CHECK(parse_bandwidth("100Mbps").bytes_per_s == 12500000ULL);
  CHECK(parse_bandwidth("1Tbps").bytes_per_s == 125000000000ULL);
  CHECK(parse_bandwidth("8bps").bytes_per_s == 1);
}

TEST_CASE("parse_bandwidth requires whole bytes per second", "[units][bandwidth]") {
  REQUIRE_THROWS_WITH(parse_bandwidth("1bps"), Contains("is not a whole number of bytes per second"));
  REQUIRE_THROWS_WITH(parse_bandwidth("0.1Kbps"),
                      Contains("is not a whole number of bytes per second"));
  CHECK(parse_bandwidth("0.008Kbps").bytes_per_s == 1);
}

TEST_CASE("parse_bandwidth distinguishes B from b", "[units][bandwidth]") {
  CHECK(parse_bandwidth("8GBps").bytes_per_s == 8 * parse_bandwidth("8Gbps").bytes_per_s);
  REQUIRE_THROWS_WITH(parse_bandwidth("56gbps"), Contains("unknown bandwidth unit \"gbps\""));
  REQUIRE_THROWS_AS(parse_bandwidth("56GiBps"), UnitError);
}

TEST_CASE("parse_bandwidth rejects bare, empty, negative and zero", "[units][bandwidth]") {
  REQUIRE_THROWS_WITH(parse_bandwidth("56"), Contains("no unit"));
  REQUIRE_THROWS_WITH(parse_bandwidth("56"), Contains("GBps"));
  REQUIRE_THROWS_WITH(parse_bandwidth(""), Contains("empty bandwidth"));
  REQUIRE_THROWS_WITH(parse_bandwidth("-56GBps"), Contains("negative"));
  REQUIRE_THROWS_WITH(parse_bandwidth("0GBps"), Contains("greater than zero"));
}

// ------------------------------------------------------------- transfer_time

TEST_CASE("transfer_time is exact when the division is exact", "[units][bandwidth]") {
  const Bandwidth one_gbps{1000000000ULL};
  CHECK(one_gbps.transfer_time(1000) == Time::from_us(1));
  CHECK(one_gbps.transfer_time(1) == Time{1000});
  CHECK(one_gbps.transfer_time(0) == Time{0});
  CHECK(Bandwidth{25000000000ULL}.transfer_time(1ULL << 20) == Time{41943040});
}

TEST_CASE("transfer_time rounds up to the next picosecond", "[units][bandwidth]") {
  const Bandwidth three{3000000000000ULL};  // 3 bytes per ps
  CHECK(three.transfer_time(3) == Time{1});
  CHECK(three.transfer_time(4) == Time{2});
  CHECK(three.transfer_time(1) == Time{1});
  const Bandwidth b56 = parse_bandwidth("56GBps");
  // 1e12 / 56e9 = 17.857... ps -> 18.
  CHECK(b56.transfer_time(1) == Time{18});
  CHECK(b56.transfer_time(56) == Time{1000});
  CHECK(b56.transfer_time(57) == Time{1018});
}

TEST_CASE("transfer_time does not overflow 64 bits internally", "[units][bandwidth]") {
  const std::uint64_t big = std::numeric_limits<std::uint64_t>::max();
  // big * 1e12 needs 104 bits; the result fits.
  CHECK(Bandwidth{1000000000000ULL}.transfer_time(big) == Time{big});
  REQUIRE_THROWS_AS(Bandwidth{1}.transfer_time(big), UnitError);
}

TEST_CASE("transfer_time at zero bandwidth throws", "[units][bandwidth]") {
  REQUIRE_THROWS_AS(Bandwidth{0}.transfer_time(1), UnitError);
  REQUIRE_THROWS_AS(Bandwidth{}.transfer_time(0), UnitError);
}

// -------------------------------------------------------------- format_size

TEST_CASE("format_size uses the largest exact binary unit", "[units][format]") {
  CHECK(format_size(8192) == "8K");
  CHECK(format_size(1024) == "1K");
  CHECK(format_size(64ULL << 20) == "64M");
  CHECK(format_size(1ULL << 30) == "1G");
  CHECK(format_size(2ULL << 40) == "2T");
  CHECK(format_size(1536ULL << 20) == "1536M");
  CHECK(format_size(1ULL << 50) == "1024T");
}

TEST_CASE("format_size prints plain bytes when no unit is exact", "[units][format]") {
  CHECK(format_size(0) == "0");
  CHECK(format_size(1) == "1");
  CHECK(format_size(1000) == "1000");
  CHECK(format_size(1023) == "1023");
  CHECK(format_size(1536) == "1536");
}

TEST_CASE("format_size round-trips through parse_size", "[units][format]") {
  for (std::uint64_t b : {8ULL, 1024ULL, 3000ULL, 64ULL << 20, 5ULL << 30, 7ULL << 40}) {
    CHECK(parse_size(format_size(b), true) == b);
  }
}

// ---------------------------------------------------------------- format_us

TEST_CASE("format_us prints three decimals by default", "[units][format]") {
  CHECK(format_us(Time{1500000}) == "1.500");
  CHECK(format_us(Time{0}) == "0.000");
  CHECK(format_us(Time{1000}) == "0.001");
  CHECK(format_us(Time::from_us(12345)) == "12345.000");
}

TEST_CASE("format_us rounds half up", "[units][format]") {
  CHECK(format_us(Time{1234567}, 3) == "1.235");
  CHECK(format_us(Time{1234499}, 3) == "1.234");
  CHECK(format_us(Time{1234500}, 3) == "1.235");
  CHECK(format_us(Time{499}, 3) == "0.000");
  CHECK(format_us(Time{500}, 3) == "0.001");
  CHECK(format_us(Time{999999500}, 3) == "1000.000");
}

TEST_CASE("format_us honours the number of decimals", "[units][format]") {
  CHECK(format_us(Time{1500000}, 0) == "2");
  CHECK(format_us(Time{1499999}, 0) == "1");
  CHECK(format_us(Time{1234567}, 1) == "1.2");
  CHECK(format_us(Time{1234567}, 6) == "1.234567");
  CHECK(format_us(Time{1234567}, 8) == "1.23456700");
  CHECK(format_us(Time{7}, 6) == "0.000007");
}

TEST_CASE("format_us handles the largest time", "[units][format]") {
  const Time max{std::numeric_limits<std::uint64_t>::max()};  // 18446744073709.551615 us
  CHECK(format_us(max, 6) == "18446744073709.551615");
  CHECK(format_us(max, 3) == "18446744073709.552");
  CHECK(format_us(max, 0) == "18446744073710");
}

// ------------------------------------------------------------- parse_flops

TEST_CASE("parse_flops reads decimal operations per second", "[units][flops]") {
  CHECK(parse_flops("14.7TFLOPS") == 14700000000000ULL);
  CHECK(parse_flops("8.379TFLOPS") == 8379000000000ULL);
  CHECK(parse_flops("500GFLOPS") == 500000000000ULL);
  CHECK(parse_flops("1PFLOPS") == 1000000000000000ULL);
  CHECK(parse_flops("8379000000000FLOPS") == 8379000000000ULL);   // the fit's trial values
}

TEST_CASE("parse_flops refuses zero, a bare number and other units", "[units][flops]") {
  REQUIRE_THROWS_WITH(parse_flops("0TFLOPS"), Contains("greater than zero"));
  REQUIRE_THROWS_WITH(parse_flops("14.7"), Contains("TFLOPS"));
  REQUIRE_THROWS_AS(parse_flops("14.7TB"), UnitError);
  REQUIRE_THROWS_AS(parse_flops("0.5FLOPS"), UnitError);
}
