// Entry point for every hcclsim executable: SystemC's banner would otherwise
// go to stderr on each run, so it is turned off before SystemC starts; then
// SystemC calls the program's sc_main as usual.
#include <cstdlib>
#include <systemc>

int main(int argc, char* argv[]) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
  return sc_core::sc_elab_and_sim(argc, argv);
}
