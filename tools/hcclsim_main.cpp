// hcclsim's entry point: the subcommands live in tools/cmd_*.cpp and are
// dispatched by tools/dispatch.cpp. Every error ends here as a message on
// stderr and exit code 2 (bad input) or 1 (a run failed); nothing escapes
// to SystemC, whose own handler would print an E549 dump on stdout.
#include <iostream>
#include <new>
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

}  // namespace

int sc_main(int argc, char* argv[]) {
  using namespace hcclsim;
  sc_core::sc_report_handler::set_handler(report_handler);
  try {
    const std::unique_ptr<ProcessGroup> group = make_process_group();
    CommandContext ctx;
    ctx.out = &std::cout;
    ctx.group = group.get();
    ctx.words.assign(argv + 1, argv + argc);
    return dispatch(ctx.words, ctx);
  } catch (const std::bad_alloc&) {
    std::cerr << "hcclsim: error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "hcclsim: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "hcclsim: error: an unknown exception\n";
  }
  return 2;
}
