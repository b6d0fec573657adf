#include "tools/dispatch.h"

#include <poll.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <new>
#include <regex>
#include <systemc>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/json_reader.h"
#include "tools/cli_common.h"
#include "tools/process_group.h"

namespace hcclsim {

namespace {

const char* kOverview = R"(hcclsim - a cycle-approximate simulator of HCCL collectives on Ascend A2/A3

usage:
  hcclsim perf <op> [options]        hccl_test-style sweep of one collective
                                     (<op> also as hccl_test's binaries: all_reduce_test, ...)
  hcclsim run --program FILE [opts]  run a communication program (HCCL thread/notify
                                     API, Ascend C Hccl kernels, MoE calls; docs/user-guide.md)
  hcclsim sweep GRID.json [opts]     a grid of topologies, ops, sizes, dtypes, algorithms
  hcclsim recommend [opts]           per op and size: HCCL's default, the best HCCL_ALGO /
                                     HCCL_OP_EXPANSION_MODE found, the gain; or the lines to export
  hcclsim check BASELINE [opts]      re-run a saved baseline and compare the times
  hcclsim executors                  the HCCL executors hcclsim models, with their sources
  hcclsim validate FILE [opts]       every point of a measurement file: measured, simulated, error
  hcclsim import hccl-test LOG ...   your hccl_test output as a measurement file for validate
  hcclsim import torch-npu-profile DIR ...
                                     a torch_npu profile's HCCL operators, the same
  hcclsim calibrate FILE... [opts]   fit a profile's constants to measured rows, within bounds
  hcclsim moe dispatch|combine|both  MoE expert-parallel dispatch / combine as AIV kernels
  hcclsim step --model-config F ...  a training / inference step on a parallel layout: step
                                     time, exposed communication per group, critical path
  hcclsim describe [--topology FILE] a topology's product, SystemC units and links
  hcclsim help [command]             this text, or one command's options
  hcclsim --version

<op>: all_reduce | all_gather | reduce_scatter | alltoall | alltoallv | broadcast | reduce
)";

const char* kScope = R"(
Columns: data_size (bytes), aveg_time (us), alg_bandwidth = data_size/time (GB/s,
1e9 B/s), bus_bandwidth = alg_bandwidth x bus factor (AllReduce 2(n-1)/n; AllGather,
ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce 1), check_result.
data_size is per rank: the input of all_reduce, broadcast, reduce; the output of
all_gather; the input of reduce_scatter; the whole send buffer of alltoall.

What is modelled: HCCL's executor selection per product (A2 910B, A3 910_93:
op-base / graph, host / AI CPU / AIV expansion, deterministic, sizes, ranks,
servers, buffer) and each selected executor's task structure (streams, copies,
SDMA reads and writes with inline reduce, AIV cores' loads and stores with
flags in memory, RDMA); per-NPU stream engines (in-order tasks, dispatch gap,
launch cost), notify registers (record sets, wait blocks until set and clears),
a pool of SDMA engines with a fixed cost per task (reads and writes apart),
AIV core pools, RDMA posts with in-order queue pairs, on-chip memory and every
HCCS / SIO / UB / RoCE link direction and switch port as a channel (flow model:
max-min fair shares, re-solved once per --flow-quantum, default 1 us, for
groups of 1024 or more coupled flows such as a large MoE kernel's, so a
transfer there may start up to one quantum late; segment model: round-robin
segments with cut-through),
leaf/spine fabrics with ECMP and oversubscription; MoE dispatch / combine
kernels (hcclsim moe, and called from program kernels; low latency inside
one domain row by row, each core's rows behind its earlier writes). `hcclsim executors` lists the modelled executors.
What is not: AI CPU / host expansion costs beyond the launch and dispatch
constants, HBM contention of remote traffic, flow control / PFC / drops,
errors and retries, HCCL's AHC, Star and NHR_V1 algorithms, the deterministic
and cross-server AIV executors (refused by name), zero-copy with registered
buffers, the MoE kernels' scalar bookkeeping (the low-latency dispatch's
per-row slot count and last-core count loop); in a step, the work an MoE layer
does around its expert GEMMs. The profiles' constants are fitted (hcclsim
calibrate) to point-to-point, MoE-kernel and training-step measurements
(configs/calibration/measurements.json; hcclsim validate shows each row's
error), none to collectives; A3's AIV and compute constants are assumed.
The simulator is deterministic: one iteration of each size gives
the time of every iteration.

Exit codes: 0 success, 1 a run failed (deadlock, timeout, failed check, a
regression found by check), 2 bad input (file, JSON path or option named on stderr)
or results that could not all be written (a full disk; a standard output closed
early, as by `| head`, ends hcclsim without a message).
)";

struct Parser {
  CLI::App app{"hcclsim - a cycle-approximate simulator of HCCL collectives on Ascend A2/A3", "hcclsim"};
  std::vector<std::unique_ptr<Command>> commands;
  std::vector<CLI::App*> subcommands;
  std::vector<std::unique_ptr<CommandOptions>> declared;  // what each command declared on its subcommand

  Parser() {
    app.require_subcommand(1, 1);
    app.get_formatter()->column_width(34);
    commands = make_commands();
    for (auto& c : commands) {
      CLI::App* sub = app.add_subcommand(c->name(), c->summary());
      sub->get_formatter()->column_width(34);
      declared.push_back(std::make_unique<CommandOptions>(*sub));
      c->declare(*declared.back());
      subcommands.push_back(sub);
    }
  }
  std::size_t find(const std::string& name) const {
    for (std::size_t i = 0; i < commands.size(); ++i) {
      if (commands[i]->name() == name) return i;
    }
    return commands.size();
  }
  std::string names() const {
    std::vector<std::string> n;
    for (const auto& c : commands) n.push_back(c->name());
    n.push_back("help");
    return join(n);
  }
};

// "-b/--minbytes": every name of an option.
std::string option_names(const CLI::Option& opt) {
  std::string names;
  for (const std::string& s : opt.get_snames()) names += (names.empty() ? "-" : "/-") + s;
  for (const std::string& l : opt.get_lnames()) names += (names.empty() ? "--" : "/--") + l;
  return names.empty() ? opt.get_name() : names;
}

// CLI11's wording where ours says more: a repeated option, named by all its
// names ("-b/--minbytes").
std::string explain(const CLI::ParseError& e, const CLI::App& sub) {
  const std::string what = e.what();
  std::smatch m;
  static const std::regex repeated(R"(^(\S+): At Most 1 required but received (\d+)$)");
  if (std::regex_match(what, m, repeated)) {
    std::string name = m[1].str();
    if (const CLI::Option* opt = sub.get_option_no_throw(name)) name = option_names(*opt);
    return "option " + name + " is given " + m[2].str() + " times; give it once";
  }
  return what;
}

// The subcommand a command line reached: `sub`, or the one of its own it
// names (`import hccl-test`), and its name as typed ("hcclsim import hccl-test").
CLI::App* reached(CLI::App* sub) {
  while (!sub->get_subcommands().empty()) sub = sub->get_subcommands().front();
  return sub;
}
std::string command_words(const CLI::App* sub) {
  std::string words = sub->get_name();
  for (const CLI::App* a = sub->get_parent(); a != nullptr && a->get_parent() != nullptr; a = a->get_parent()) {
    words = a->get_name() + " " + words;
  }
  return "hcclsim " + words;
}
// Its help, with the words that lead to it in the usage line.
std::string help_of(const CLI::App* sub, CLI::AppFormatMode mode = CLI::AppFormatMode::Normal) {
  const std::string words = command_words(sub);
  return sub->help(words.substr(0, words.size() - sub->get_name().size() - 1), mode);
}

int report(const CommandContext& ctx, int code, const std::string& message) {
  // Names from the command line or input files may hold control characters:
  // escaped (printable()), except the line breaks of multi-line reports.
  std::string shown;
  std::size_t start = 0;
  for (std::size_t nl = message.find('\n'); ; nl = message.find('\n', start)) {
    shown += printable(std::string_view(message).substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    shown += '\n';
    start = nl + 1;
  }
  if (ctx.root()) std::cerr << "hcclsim: " << (code == 2 ? "error: " : "") << shown << "\n";
  return code;
}

}  // namespace

const char* long_usage() { return kScope; }

int parse_command_line(const std::vector<std::string>& words) {
  Parser parser;
  if (words.empty() || parser.find(words[0]) == parser.commands.size()) return 2;
  try {
    std::vector<std::string> reversed(words.rbegin(), words.rend());
    parser.app.parse(reversed);
  } catch (const CLI::ParseError&) {
    return 2;
  }
  return 0;
}

int dispatch(const std::vector<std::string>& words, CommandContext& ctx) {
  Parser parser;
  if (words.empty()) {
    if (ctx.root()) std::cerr << kOverview << "\nRun 'hcclsim help' for every option.\n";
    return 2;
  }
  if (words[0] == "help" || words[0] == "--help" || words[0] == "-h") {
    if (!ctx.root()) return 0;
    if (words.size() > 1) {
      const std::size_t i = parser.find(words[1]);
      if (i == parser.commands.size()) {
        return report(ctx, 2, "command: unknown command '" + words[1] + "'; expected one of: " + parser.names());
      }
      std::cout << parser.subcommands[i]->help("hcclsim");
      return 0;
    }
    std::cout << kOverview;
    for (CLI::App* sub : parser.subcommands) std::cout << "\n" << sub->help("hcclsim");
    std::cout << kScope;
    return 0;
  }
  if (words[0] == "--version") {
    if (ctx.root()) std::cout << "hcclsim " << hcclsim_version() << "\n";
    return 0;
  }
  const std::size_t index = parser.find(words[0]);
  if (index == parser.commands.size()) {
    return report(ctx, 2, "command: unknown command '" + words[0] + "'; expected one of: " + parser.names());
  }
  try {
    std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 parses a reversed vector
    parser.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    if (ctx.root()) std::cout << help_of(reached(parser.subcommands[index]));
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    if (ctx.root()) std::cout << help_of(reached(parser.subcommands[index]), CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    const CLI::App* sub = reached(parser.subcommands[index]);
    return report(ctx, 2, explain(e, *sub) + " (see '" + command_words(sub) + " --help')");
  }
  // A flag given twice is refused like a repeated option (CLI11 would count it).
  for (const CLI::App* sub = parser.subcommands[index]; sub != nullptr;
       sub = sub->get_subcommands().empty() ? nullptr : sub->get_subcommands().front()) {
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->count() > 1) {
        return report(ctx, 2, "option " + option_names(*opt) + " is given " + std::to_string(opt->count()) +
                                  " times; give it once (see '" + command_words(sub) + " --help')");
      }
    }
  }
  Command& command = *parser.commands[index];
  if (!command.parallel() && !ctx.root()) return 0;  // under MPI only rank 0 runs it
  try {
    return command.run(ctx);
  } catch (const InputError& e) {
    return report(ctx, 2, e.what());
  } catch (const GraphError& e) {
    return report(ctx, 1, e.what());
  } catch (const std::bad_alloc&) {
    return report(ctx, 2, "out of memory (the run needs more memory than this machine has; try fewer ranks or "
                          "--no-check, which drops the data check's copy of every buffer)");
  } catch (const sc_core::sc_report& e) {
    return report(ctx, 2, std::string("SystemC: ") + e.what());
  } catch (const std::exception& e) {
    return report(ctx, 2, e.what());
  }
}

namespace {

// SystemC's reports: warnings and infos to stderr (stdout holds results);
// errors and fatals thrown as sc_report, which the dispatcher turns into exit 2.
void report_handler(const sc_core::sc_report& report, const sc_core::sc_actions& actions) {
  using namespace sc_core;
  if (report.get_severity() >= SC_ERROR || (actions & (SC_THROW | SC_ABORT))) throw report;
  if (actions & SC_DISPLAY) std::cerr << "hcclsim: SystemC: " << report.what() << "\n";
}

// Standard output is a pipe whose reader has gone (its writes fail with EPIPE).
bool stdout_reader_gone() {
  pollfd p{1, 0, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0;
}

}  // namespace

int run_program(const std::vector<std::string>& words, bool mpi) {
  sc_core::sc_report_handler::set_handler(report_handler);
  // A reader that closes standard output early (`| head`) makes writes fail
  // with EPIPE, handled below, instead of killing the process by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  int code = 2;
  try {
    std::unique_ptr<ProcessGroup> group = mpi ? make_process_group() : std::make_unique<SingleProcess>();
    CommandContext ctx;
    ctx.out = &std::cout;
    ctx.group = group.get();
    ctx.words = words;
    code = dispatch(ctx.words, ctx);
    group.reset();  // MPI_Finalize, before the caller's fast exit
  } catch (const std::bad_alloc&) {
    std::cerr << "hcclsim: error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "hcclsim: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "hcclsim: error: an unknown exception\n";
  }
  // Every output is flushed here; a failed write of the results (a full disk,
  // a closed pipe) is an error like any other.
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0) {
    // (its reader gone: nothing to tell it; the exit code still says so)
    if (!stdout_reader_gone()) std::cerr << "hcclsim: error: writing the results to standard output failed\n";
    if (code == 0) code = 2;
  }
  std::cerr.flush();
  std::fflush(nullptr);
  return code;
}

}  // namespace hcclsim
