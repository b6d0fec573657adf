// Fuzzing target over hcclsim's input readers: hardware profiles, topologies,
// program files, HCCL rank tables, sweep grids, the command-line parser,
// hcclsim import's hccl_test logs and torch_npu communication.json files,
// measurement files (validate, calibrate), baselines (check), MoE routing
// files (moe --routing file:F), scenarios (--scenario, read and applied
// to an A2 cluster or a CloudMatrix384 of two servers) and Chakra execution
// traces (step --chakra: the file decoded, then planned as both ranks of a
// 2-rank workload).
// The first byte of an input picks the reader, the rest is the file (or, for
// the command line, the words separated by newlines). A reader may refuse an
// input only with the exceptions that hcclsim reports as bad input
// (InputError, ProgramError, std::invalid_argument); anything else escaping
// (std::out_of_range, nlohmann::json::exception, std::bad_alloc, ...) or a
// crash is a bug: the target aborts, and the input belongs in
// tests/fuzz/corpus/ once fixed.
//
// Two drivers (docs/user-guide.md, "Fuzzing"):
//  - libFuzzer (clang -fsanitize=fuzzer, CMake -DHCCLSIM_LIBFUZZER=ON):
//    `build-fuzz/fuzz_inputs_libfuzzer tests/fuzz/corpus -max_total_time=600`;
//  - without clang, this file's own main (ctest fuzz_inputs): every corpus
//    file as is, then a budget of random mutations of them (a count of
//    inputs, the same ones for the same seed, or a time such as 600s),
//    printing how many inputs it tried.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <systemc>   // sc_main's declaration (C linkage), which this file defines
#include <vector>

#include "sim/calibrate/import.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "sim/moe/moe.h"
#include "sim/program/program.h"
#include "sim/program/program_json.h"
#include "sim/report/baseline.h"
#include "sim/report/sweep.h"
#include "sim/report/validate.h"
#include "sim/step/step.h"
#include "tools/dispatch.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/rank_table.h"
#include "topologies/scenario.h"

namespace fs = std::filesystem;
using namespace hcclsim;

namespace {

// Inputs are written under a scratch tree with the repository's profiles,
// topologies and rank tables, so that "../profiles/a2-910b.json" in a
// topology or "../topologies/a2-server.json" in a grid resolve as in configs/.
struct Scratch {
  fs::path root;
  Scratch() {
    root = fs::temp_directory_path() / ("hcclsim-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(root / "sweeps");
    fs::create_directories(root / "calibration");
    for (const char* dir : {"profiles", "topologies", "ranktables"}) {
      fs::remove_all(root / dir);
      fs::copy(fs::path(HCCLSIM_SOURCE_DIR) / "configs" / dir, root / dir, fs::copy_options::recursive);
    }
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

std::string write(const std::string& relative, const std::uint8_t* data, std::size_t size) {
  const fs::path p = scratch().root / relative;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                            static_cast<std::streamsize>(size));
  return p.string();
}

const HardwareProfile& a2_profile() {
  static const HardwareProfile p = load_profile((scratch().root / "profiles" / "a2-910b.json").string());
  return p;
}
const HardwareProfile& a3_profile() {
  static const HardwareProfile p = load_profile((scratch().root / "profiles" / "a3-910c.json").string());
  return p;
}

// Scenarios are applied to these: an A2 cluster of 2 servers (HCCS, RoCE)
// and a CloudMatrix384 of 2 servers (SIO, HCCS, UB planes).
const TopologySpec& a2_cluster() {
  static const TopologySpec t = load_topology((scratch().root / "topologies" / "a2-cluster.json").string(), std::nullopt, 2);
  return t;
}
const TopologySpec& cloudmatrix() {
  static const TopologySpec t = load_topology((scratch().root / "topologies" / "cloudmatrix384.json").string(), std::nullopt, 2);
  return t;
}

constexpr int kReaders = 13;

void run_one(std::uint8_t which, const std::uint8_t* data, std::size_t size) {
  switch (which % kReaders) {
    case 0: load_profile(write("profiles/fuzz.json", data, size)); break;
    case 1: load_topology(write("topologies/fuzz.json", data, size), std::nullopt, -1); break;
    case 2: {
      Program program(cloudmatrix());
      load_program(write("fuzz-program.json", data, size), program);
      program.build();
      break;
    }
    case 3: {
      const std::string file = write("fuzz-ranktable.json", data, size);
      const HardwareProfile& profile = size % 2 == 0 ? a2_profile() : a3_profile();
      const RankTable table = load_rank_table(file, profile.npu.traits);
      make_cluster(table.layout, profile);
      break;
    }
    case 4: validate_sweep_grid(load_sweep_grid(write("sweeps/fuzz.json", data, size))); break;
    case 5: {
      // The command line: words separated by newlines, parsed but not run.
      std::vector<std::string> words(1);
      for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == '\n') {
          words.emplace_back();
        } else {
          words.back() += static_cast<char>(data[i]);
        }
      }
      parse_command_line(words);
      break;
    }
    case 6: {  // hcclsim import hccl-test: the log, then the points and their file
      const std::string text(reinterpret_cast<const char*>(data), size);
      const ImportTarget target{"topologies/a2-server.json", -1, 0, ""};
      measurements_json(hccl_test_points(parse_hccl_test_log(text, "fuzz.log"), "fuzz.log", "all_reduce", "fp32", target).points, "");
      break;
    }
    case 7: {  // hcclsim import torch-npu-profile
      const std::string text(reinterpret_cast<const char*>(data), size);
      std::size_t p2p = 0;
      const std::vector<CommunicationOp> ops = parse_communication_json(parse_json_text(text, "fuzz.json"), "fuzz.json", &p2p);
      const ImportTarget target{"topologies/a2-server.json", -1, 0, ""};
      measurements_json(communication_points(ops, p2p, "fuzz.json", 8, target, "fuzz").points, "");
      break;
    }
    case 8: load_measurements(write("calibration/fuzz.json", data, size)); break;
    case 9: load_baseline(write("fuzz-baseline.json", data, size)); break;
    case 10: {  // a routing file for 4 ranks, 4 tokens each, top-2 of 8 experts
      MoeParams p;
      p.ep = 4;
      p.tokens = 4;
      p.hidden = 128;
      p.topk = 2;
      p.experts = 8;
      p.routing = "file:" + write("fuzz-routing.json", data, size);
      make_routing(p);
      break;
    }
    case 11: {
      const Scenario scenario = load_scenario(write("fuzz-scenario.json", data, size));
      apply_scenario(scenario, size % 2 == 0 ? a2_cluster() : cloudmatrix());
      break;
    }
    case 12: {
      ChakraWorkload w;
      w.dir = "fuzz";
      w.ranks.push_back(decode_chakra(std::string(reinterpret_cast<const char*>(data), size), "fuzz.0.et"));
      w.ranks.push_back(w.ranks.front());
      w.ranks.back().file = "fuzz.1.et";
      if (w.ranks.front().nodes.size() <= 64) plan_chakra(a2_cluster(), w);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  try {
    run_one(data[0], data + 1, size - 1);
  } catch (const InputError&) {
  } catch (const ProgramError&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: BUG: reader %d let an unexpected exception escape: %s\n", data[0] % kReaders, e.what());
    std::abort();
  }
  return 0;
}

#ifndef HCCLSIM_LIBFUZZER
namespace {

// xorshift64*: the same mutations on every machine for a given seed.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

// Tokens that reach the readers' edges: huge and negative numbers, NaN, units.
const char* const kTokens[] = {"99999999999999999999", "-1", "1e309", "NaN", "0", "4294967297", "\"1e6s\"",
                               "\"18446744073709551616B\"", "\"0.5ps\"", "[]", "{}", "null", "\"\\u0007\"",
                               "\"t[99999999999999999999]\"", "true", "\"1000001s\"", "2147483648", "\"\""};

std::string mutate(std::string in, Rng& rng, const std::vector<std::string>& corpus) {
  const int edits = 1 + static_cast<int>(rng.below(4));
  for (int e = 0; e < edits; ++e) {
    const std::size_t pos = rng.below(in.size() + 1);
    switch (rng.below(7)) {
      case 0:  // flip a bit
        if (!in.empty()) in[rng.below(in.size())] ^= static_cast<char>(1u << rng.below(8));
        break;
      case 1:  // delete a span
        if (!in.empty()) in.erase(rng.below(in.size()), 1 + rng.below(16));
        break;
      case 2:  // insert a random byte
        in.insert(pos, 1, static_cast<char>(rng.below(256)));
        break;
      case 3: {  // replace a number with an edge token
        std::size_t d = in.find_first_of("0123456789", rng.below(in.size() + 1));
        if (d == std::string::npos) d = pos;
        std::size_t end = in.find_first_not_of("0123456789.", d);
        if (end == std::string::npos) end = in.size();
        in.replace(std::min(d, in.size()), end - std::min(d, in.size()), kTokens[rng.below(std::size(kTokens))]);
        break;
      }
      case 4: {  // duplicate a line (duplicate keys, repeated options)
        const std::size_t a = in.rfind('\n', pos == 0 ? 0 : pos - 1);
        const std::size_t b = in.find('\n', pos);
        const std::size_t from = a == std::string::npos ? 0 : a + 1;
        const std::size_t to = b == std::string::npos ? in.size() : b + 1;
        in.insert(from, in.substr(from, to - from));
        break;
      }
      case 5: {  // splice in part of another corpus input
        const std::string& other = corpus[rng.below(corpus.size())];
        if (other.size() > 1) {
          const std::size_t from = 1 + rng.below(other.size() - 1);
          in.insert(pos, other.substr(from, 1 + rng.below(64)));
        }
        break;
      }
      case 6:  // an edge token anywhere
        in.insert(pos, kTokens[rng.below(std::size(kTokens))]);
        break;
    }
  }
  if (in.empty()) in.push_back('\0');
  return in;
}

int run_input(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

}  // namespace

// A whole number of at most 12 digits, or none.
std::optional<std::uint64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(text);
}

// usage: fuzz_inputs CORPUS_DIR [BUDGET] [SEED]
// BUDGET: a number of mutated inputs (default 20000; the same inputs for the
// same seed, so CI's run is repeatable) or whole seconds followed by "s"
// ("600s"). SEED: a whole number (default 1).
int sc_main(int argc, char* argv[]) {
  const char* usage =
      "usage: fuzz_inputs CORPUS_DIR [BUDGET: N inputs (default 20000) or SECONDS followed by s] [SEED (default 1)]\n";
  if (argc < 2 || argc > 4) {
    std::cerr << usage;
    return 2;
  }
  const std::string budget = argc > 2 ? argv[2] : "20000";
  const bool timed = !budget.empty() && budget.back() == 's';
  const std::optional<std::uint64_t> amount = whole_number(timed ? budget.substr(0, budget.size() - 1) : budget);
  const std::optional<std::uint64_t> seed = whole_number(argc > 3 ? argv[3] : "1");
  if (!amount || !seed) {
    std::cerr << "fuzz_inputs: " << (!amount ? "BUDGET '" + budget + "'" : "SEED '" + std::string(argv[3]) + "'")
              << " is not a whole number (of at most 12 digits" << (!amount ? ", seconds followed by s" : "") << ")\n"
              << usage;
    return 2;
  }
  std::error_code dir_error;
  if (!fs::is_directory(argv[1], dir_error)) {
    std::cerr << "fuzz_inputs: CORPUS_DIR '" << argv[1] << "' is not a directory\n" << usage;
    return 2;
  }
  Rng rng{*seed | 1};
  std::vector<std::string> corpus;
  for (const auto& entry : fs::directory_iterator(argv[1])) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (corpus.empty()) {
    std::cerr << "fuzz_inputs: no inputs in " << argv[1] << "\n";
    return 2;
  }
  std::sort(corpus.begin(), corpus.end());
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::uint64_t tried = 0;
  for (const std::string& s : corpus) {
    run_input(s);
    ++tried;
  }
  for (std::uint64_t mutated = 0; timed ? elapsed() < static_cast<double>(*amount) : mutated < *amount; ++mutated) {
    run_input(mutate(corpus[rng.below(corpus.size())], rng, corpus));
    ++tried;
  }
  std::cout << "fuzz_inputs: tried " << tried << " inputs (" << corpus.size() << " from the corpus, "
            << tried - corpus.size() << " mutated) in " << elapsed() << " s; no crash, no unexpected exception\n";
  return 0;
}
#endif
