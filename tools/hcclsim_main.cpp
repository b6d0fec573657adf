// hcclsim's entry point: the subcommands live in tools/cmd_*.cpp and are
// dispatched by tools/dispatch.cpp. Every error ends here as a message on
// stderr and exit code 2 (bad input) or 1 (a run failed); nothing escapes
// to SystemC, whose own handler would print an E549 dump on stdout.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <poll.h>
#include <string>
#include <systemc>
#include <vector>

#include "tools/dispatch.h"
#include "tools/process_group.h"

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

int sc_main(int argc, char* argv[]) {
  using namespace hcclsim;
  sc_core::sc_report_handler::set_handler(report_handler);
  // A reader that closes standard output early (`| head`) makes writes fail
  // with EPIPE, handled below, instead of killing the process by SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  int code = 2;
  try {
    std::unique_ptr<ProcessGroup> group = make_process_group();
    CommandContext ctx;
    ctx.out = &std::cout;
    ctx.group = group.get();
    ctx.words.assign(argv + 1, argv + argc);
    code = dispatch(ctx.words, ctx);
    group.reset();  // MPI_Finalize, before the fast exit below
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
  // Fast exit: the platform is never torn down (tools/cli_common.h,
  // platform_kept_until_exit), which for 100,000 NPUs would take minutes.
  std::_Exit(code);
}
