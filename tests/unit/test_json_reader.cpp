// Unit tests for base/json_reader: located, strict reading of JSON configs.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/json_reader.h"

using namespace hcclsim;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

const JsonLocation kRoot{"cfg.json"};

// The InputError thrown by `f`, or fails the test.
template <typename F>
InputError input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  return InputError("", "");
}

std::string temp_path(const std::string& name) {
  return "/tmp/hcclsim_test_json_reader_" + name;
}

}  // namespace

// ---------------------------------------------------------------- locations

TEST_CASE("JsonLocation builds paths from keys and indices", "[json][location]") {
  const JsonLocation loc = kRoot.key("links").index(3).key("bandwidth");
  CHECK(loc.path == "$.links[3].bandwidth");
  CHECK(loc.describe() == "cfg.json at $.links[3].bandwidth");
}

TEST_CASE("JsonLocation::fail throws InputError naming the location", "[json][location]") {
  const InputError e = input_error_of([] { kRoot.key("npu").fail("bad thing"); });
  CHECK(e.where() == "cfg.json at $.npu");
  CHECK(e.message() == "bad thing");
  CHECK(std::string(e.what()) == "cfg.json at $.npu: bad thing");
}

// ------------------------------------------------------------------ parsing

TEST_CASE("parse_json_text parses valid JSON", "[json][parse]") {
  const json j = parse_json_text(R"({"a": 1, "b": [true, "x"]})", "mem.json");
  CHECK(j["a"] == 1);
  CHECK(j["b"][1] == "x");
}

TEST_CASE("parse_json_text names file, line and column of a syntax error", "[json][parse]") {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": tru\n}\n";
  const InputError e = input_error_of([&] { parse_json_text(text, "bad.json"); });
  CHECK(e.where() == "bad.json");
  CHECK_THAT(e.what(), Contains("bad.json"));
  CHECK_THAT(e.message(), Contains("line 3"));
  CHECK_THAT(e.message(), Contains("column"));
}

TEST_CASE("parse_json_text reports the column of a stray character", "[json][parse]") {
  // The stray '@' is on line 2, column 8.
  const std::string text = "{\n  \"a\": @\n}";
  const InputError e = input_error_of([&] { parse_json_text(text, "bad.json"); });
  CHECK_THAT(e.message(), Contains("line 2, column 8"));
}

TEST_CASE("parse_json_text reports a truncated document", "[json][parse]") {
  REQUIRE_THROWS_WITH(parse_json_text("{\"a\": 1,", "cut.json"), Contains("cut.json"));
  REQUIRE_THROWS_WITH(parse_json_text("", "empty.json"), Contains("line 1"));
}

TEST_CASE("parse_json_text rejects a trailing comma", "[json][parse]") {
  REQUIRE_THROWS_AS(parse_json_text("{\"a\": 1,}", "t.json"), InputError);
}

TEST_CASE("load_json_file reads a file", "[json][file]") {
  const std::string path = temp_path("ok.json");
  {
    std::ofstream out(path);
    out << "{\"x\": \"1.5us\"}\n";
  }
  const json j = load_json_file(path);
  std::remove(path.c_str());
  CHECK(j["x"] == "1.5us");
}

TEST_CASE("load_json_file reports a syntax error with file and line", "[json][file]") {
  const std::string path = temp_path("bad.json");
  {
    std::ofstream out(path);
    out << "{\n\"x\": 1\n\"y\": 2\n}\n";
  }
  const InputError e = input_error_of([&] { load_json_file(path); });
  std::remove(path.c_str());
  CHECK(e.where() == path);
  CHECK_THAT(e.message(), Contains("line 3"));
}

TEST_CASE("load_json_file reports a missing file", "[json][file]") {
  const std::string path = temp_path("does_not_exist.json");
  REQUIRE_THROWS_WITH(load_json_file(path), Contains("cannot open"));
  REQUIRE_THROWS_WITH(load_json_file(path), Contains(path));
}

TEST_CASE("load_json_file refuses a directory and a device, naming what they are", "[json][file]") {
  REQUIRE_THROWS_WITH(load_json_file("/tmp"), Contains("it is a directory") && Contains("expected a regular file"));
  REQUIRE_THROWS_WITH(load_json_file("/dev/zero"), Contains("it is a character device"));
  REQUIRE_THROWS_WITH(load_json_file("/no/such/file.json"), Contains("cannot open file"));
}

// ----------------------------------------------------------- object reader

TEST_CASE("ObjectReader refuses a value that is not an object", "[json][reader]") {
  const json arr = json::array({1, 2});
  const InputError e = input_error_of([&] { ObjectReader r(arr, kRoot.key("npu")); });
  CHECK(e.where() == "cfg.json at $.npu");
  CHECK_THAT(e.message(), Contains("expected an object, got array"));
  REQUIRE_THROWS_WITH(ObjectReader(json("x"), kRoot), Contains("got string"));
}

TEST_CASE("missing required key names the key and its path", "[json][reader]") {
  const json j = json::parse(R"({"a": 1})");
  ObjectReader r(j, kRoot.key("npu"));
  const InputError e = input_error_of([&] { r.required_int("engines"); });
  CHECK(e.where() == "cfg.json at $.npu.engines");
  CHECK(e.message() == "missing required key 'engines'");
}

TEST_CASE("string getters", "[json][reader]") {
  const json j = json::parse(R"({"name": "hccs", "n": 5})");
  ObjectReader r(j, kRoot);
  CHECK(r.required_string("name") == "hccs");
  CHECK(r.optional_string("name") == std::optional<std::string>("hccs"));
  CHECK_FALSE(r.optional_string("absent").has_value());
  CHECK(r.string_or("absent", "dflt") == "dflt");
  CHECK(r.string_or("name", "dflt") == "hccs");
  REQUIRE_THROWS_WITH(r.required_string("n"), Contains("expected a string, got number"));
  REQUIRE_THROWS_WITH(r.string_or("n", "x"), Contains("cfg.json at $.n"));
}

TEST_CASE("choice getters list the allowed values", "[json][reader]") {
  const json j = json::parse(R"({"algo": "ring", "bad": "tree", "num": 1})");
  ObjectReader r(j, kRoot);
  const std::vector<std::string> allowed{"ring", "mesh", "hd"};
  CHECK(r.required_choice("algo", allowed) == "ring");
  CHECK(r.choice_or("absent", allowed, "mesh") == "mesh");
  const InputError e = input_error_of([&] { r.required_choice("bad", allowed); });
  CHECK(e.where() == "cfg.json at $.bad");
  CHECK_THAT(e.message(), Contains("\"tree\""));
  CHECK_THAT(e.message(), Contains("expected one of: ring, mesh, hd"));
  REQUIRE_THROWS_WITH(r.choice_or("num", allowed, "ring"), Contains("expected a string"));
}

TEST_CASE("integer getters read integers", "[json][reader]") {
  const json j = json::parse(R"({"a": 7, "neg": -3, "flt": 4.0, "exp": 1e3,
                                 "max": 9223372036854775807, "min": -9223372036854775808})");
  ObjectReader r(j, kRoot);
  CHECK(r.required_int("a") == 7);
  CHECK(r.required_int("neg") == -3);
  CHECK(r.required_int("flt") == 4);
  CHECK(r.required_int("exp") == 1000);
  CHECK(r.required_int("max") == INT64_MAX);
  CHECK(r.required_int("min") == INT64_MIN);
  CHECK(r.int_or("absent", 42) == 42);
  CHECK(r.int_or("a", 42) == 7);
}

TEST_CASE("integer getters reject fractions, other types and out-of-range", "[json][reader]") {
  const json j = json::parse(R"({"frac": 2.5, "str": "4", "big": 9223372036854775808,
                                 "huge": 1e300, "b": true})");
  ObjectReader r(j, kRoot);
  REQUIRE_THROWS_WITH(r.required_int("frac"), Contains("expected an integer, got number 2.5"));
  REQUIRE_THROWS_WITH(r.required_int("str"), Contains("expected an integer, got string \"4\""));
  REQUIRE_THROWS_WITH(r.required_int("b"), Contains("expected an integer, got boolean"));
  REQUIRE_THROWS_WITH(r.required_int("big"), Contains("too large"));
  REQUIRE_THROWS_WITH(r.required_int("huge"), Contains("64-bit range"));
  REQUIRE_THROWS_WITH(r.int_or("frac", 1), Contains("cfg.json at $.frac"));
}

TEST_CASE("ranged integer getters check inclusive bounds", "[json][reader]") {
  const json j = json::parse(R"({"lo": 1, "hi": 8, "over": 9, "under": 0})");
  ObjectReader r(j, kRoot);
  CHECK(r.required_int_in("lo", 1, 8) == 1);
  CHECK(r.required_int_in("hi", 1, 8) == 8);
  CHECK(r.int_in_or("absent", 1, 8, 4) == 4);
  CHECK(r.int_in_or("hi", 1, 8, 4) == 8);
  const InputError e = input_error_of([&] { r.required_int_in("over", 1, 8); });
  CHECK(e.where() == "cfg.json at $.over");
  CHECK_THAT(e.message(), Contains("[1, 8]"));
  CHECK_THAT(e.message(), Contains("9"));
  REQUIRE_THROWS_WITH(r.int_in_or("under", 1, 8, 4), Contains("[1, 8]"));
}

TEST_CASE("bool_or reads booleans only", "[json][reader]") {
  const json j = json::parse(R"({"t": true, "f": false, "one": 1, "s": "true"})");
  ObjectReader r(j, kRoot);
  CHECK(r.bool_or("t", false));
  CHECK_FALSE(r.bool_or("f", true));
  CHECK(r.bool_or("absent", true));
  REQUIRE_THROWS_WITH(r.bool_or("one", false), Contains("expected a boolean, got number 1"));
  REQUIRE_THROWS_WITH(r.bool_or("s", false), Contains("expected a boolean, got string"));
}

TEST_CASE("unit getters parse strings with units", "[json][reader][units]") {
  const json j = json::parse(R"({"lat": "1.5us", "size": "64KiB", "bw": "200Gbps"})");
  ObjectReader r(j, kRoot);
  CHECK(r.required_time("lat") == Time{1500000});
  CHECK(r.required_size("size") == 65536);
  CHECK(r.required_bandwidth("bw").bytes_per_s == 25000000000ULL);
  CHECK(r.time_or("absent", Time{5}) == Time{5});
  CHECK(r.size_or("absent", 7) == 7);
  CHECK(r.bandwidth_or("absent", Bandwidth{9}).bytes_per_s == 9);
  CHECK(r.time_or("lat", Time{5}) == Time{1500000});
}

TEST_CASE("unit getters reject bare JSON numbers with a tailored example", "[json][reader][units]") {
  const json j = json::parse(R"({"lat": 1.5, "size": 1024, "bw": 56})");
  ObjectReader r(j, kRoot);
  REQUIRE_THROWS_WITH(r.required_time("lat"),
                      Contains("expected a string with a unit such as \"1.5us\""));
  REQUIRE_THROWS_WITH(r.required_size("size"),
                      Contains("expected a string with a unit such as \"64KiB\""));
  REQUIRE_THROWS_WITH(r.required_bandwidth("bw"),
                      Contains("expected a string with a unit such as \"56GBps\""));
  REQUIRE_THROWS_WITH(r.time_or("lat", Time{}), Contains("cfg.json at $.lat"));
}

TEST_CASE("unit getters wrap unit errors with the location", "[json][reader][units]") {
  const json j = json::parse(R"({"link": {"lat": "0.5ps", "size": "1024", "bw": "56gbps"}})");
  ObjectReader root(j, kRoot);
  ObjectReader r = root.required_object("link");
  const InputError e = input_error_of([&] { r.required_time("lat"); });
  CHECK(e.where() == "cfg.json at $.link.lat");
  CHECK_THAT(e.message(), Contains("is not a whole number of picoseconds"));
  REQUIRE_THROWS_WITH(r.required_size("size"), Contains("$.link.size"));
  REQUIRE_THROWS_WITH(r.required_size("size"), Contains("no unit"));
  REQUIRE_THROWS_WITH(r.bandwidth_or("bw", Bandwidth{1}), Contains("unknown bandwidth unit"));
}

TEST_CASE("nested getters check the container type", "[json][reader]") {
  const json j = json::parse(R"({"obj": {"x": 1}, "arr": [1, 2], "num": 3})");
  ObjectReader r(j, kRoot);
  ObjectReader inner = r.required_object("obj");
  CHECK(inner.location().path == "$.obj");
  CHECK(inner.required_int("x") == 1);
  CHECK(r.required_array("arr").size() == 2);
  CHECK(r.required_value("num") == 3);
  CHECK(r.optional_value("absent") == nullptr);
  REQUIRE(r.optional_value("num") != nullptr);
  CHECK(*r.optional_value("num") == 3);
  REQUIRE_THROWS_WITH(r.required_object("arr"), Contains("expected an object, got array"));
  REQUIRE_THROWS_WITH(r.required_object("arr"), Contains("$.arr"));
  REQUIRE_THROWS_WITH(r.required_array("obj"), Contains("expected an array, got object"));
  REQUIRE_THROWS_WITH(r.required_value("absent"), Contains("missing required key 'absent'"));
}

TEST_CASE("has reports presence", "[json][reader]") {
  const json j = json::parse(R"({"a": null})");
  ObjectReader r(j, kRoot);
  CHECK(r.has("a"));
  CHECK_FALSE(r.has("b"));
}

// ------------------------------------------------------------------- finish

TEST_CASE("finish accepts an object whose keys were all read", "[json][finish]") {
  const json j = json::parse(R"({"bandwidth": "56GBps", "latency": "1us"})");
  ObjectReader r(j, kRoot.key("link"));
  r.required_bandwidth("bandwidth");
  r.required_time("latency");
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("finish names an unknown key, its path and the expected keys", "[json][finish]") {
  const json j = json::parse(R"({"bandwith": "56GBps", "latency": "1us"})");
  ObjectReader r(j, kRoot.key("link"));
  r.bandwidth_or("bandwidth", Bandwidth{1});
  r.required_time("latency");
  const InputError e = input_error_of([&] { r.finish(); });
  CHECK(e.where() == "cfg.json at $.link.bandwith");
  CHECK(e.message() == "unknown key 'bandwith'; expected one of: bandwidth, latency");
}

TEST_CASE("finish counts keys that were only probed", "[json][finish]") {
  const json j = json::parse(R"({"a": 1, "b": 2, "c": 3, "d": {}, "e": 5})");
  ObjectReader r(j, kRoot);
  CHECK(r.has("a"));
  CHECK(r.optional_value("b") != nullptr);
  CHECK(r.int_or("c", 0) == 3);
  CHECK(r.optional_string("zz") == std::nullopt);
  r.required_object("d");
  REQUIRE_THROWS_WITH(r.finish(), Contains("unknown key 'e'; expected one of: a, b, c, d, zz"));
  r.required_int("e");
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("finish counts a key whose read failed as expected", "[json][finish]") {
  const json j = json::parse(R"({"a": "x"})");
  ObjectReader r(j, kRoot);
  CHECK_THROWS_AS(r.required_int("a"), InputError);
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("finish with nothing read says no keys are expected", "[json][finish]") {
  const json j = json::parse(R"({"stray": 1})");
  ObjectReader r(j, kRoot.key("empty"));
  const InputError e = input_error_of([&] { r.finish(); });
  CHECK(e.where() == "cfg.json at $.empty.stray");
  CHECK(e.message() == "unknown key 'stray'; no keys are expected here");
}

TEST_CASE("finish on an empty object passes", "[json][finish]") {
  const json j = json::object();
  ObjectReader r(j, kRoot);
  CHECK_NOTHROW(r.finish());
}

TEST_CASE("a compute rate reads plain or as a cited constant within its bounds", "[json][reader]") {
  const json j = json::parse(R"({"plain": "14.7TFLOPS",
    "cited": {"value": "8.379TFLOPS", "bounds": ["5.88TFLOPS", "14.7TFLOPS"], "source": "fitted"},
    "outside": {"value": "20TFLOPS", "bounds": ["5.88TFLOPS", "14.7TFLOPS"], "source": "fitted"},
    "bytes": "14.7TB"})");
  ObjectReader r(j, kRoot);
  CHECK(r.required_flops("plain") == 14700000000000ULL);
  CHECK(r.required_flops("cited") == 8379000000000ULL);
  const InputError outside = input_error_of([&] { r.required_flops("outside"); });
  CHECK(outside.where() == "cfg.json at $.outside.bounds");
  CHECK_THAT(outside.message(), Contains("outside its bounds"));
  const InputError bytes = input_error_of([&] { r.required_flops("bytes"); });
  CHECK(bytes.where() == "cfg.json at $.bytes");
  CHECK_THAT(bytes.message(), Contains("TFLOPS"));
}
