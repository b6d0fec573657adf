// The C++ side of `import hcclsim` (python/hcclsim/__init__.py): one
// function, run(words), that runs an hcclsim command line and returns its
// exit code, standard output and standard error.
//
// Each call runs in a child process forked for it. The simulator keeps
// state a process cannot hand back (SystemC's kernel runs once per process;
// platforms are kept until exit, tools/cli_common.h), so a fresh process per
// call is what lets a notebook call it again and again; and a run that fails
// badly ends that child, never the Python interpreter. The child runs the
// same dispatcher as the `hcclsim` program (tools/dispatch.h), so a call
// gives exactly what the command line gives.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tools/dispatch.h"

// libsystemc's own main() refers to sc_main; a Python module has no main, so
// this one only satisfies the loader and is never called.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char*[]) { return 2; }

namespace {

// Reads both pipes to their ends at once (either may fill while the child
// writes the other).
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open = 2;
  char buffer[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("hcclsim: poll on the child's output failed");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

// (exit code, standard output, standard error) of `hcclsim WORDS...`.
std::tuple<int, std::string, std::string> run(const std::vector<std::string>& words) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe(out_pipe) != 0) throw std::runtime_error("hcclsim: cannot create a pipe");
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("hcclsim: cannot create a pipe");
  }
  std::fflush(nullptr);  // nothing buffered in the parent is written twice
  const pid_t child = ::fork();
  if (child < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    throw std::runtime_error("hcclsim: cannot start a process for the run");
  }
  if (child == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    // The command as `hcclsim` runs it (one process: no MPI in a call).
    std::_Exit(hcclsim::run_program(words, /*mpi=*/false));
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out;
  std::string err;
  int status = 0;
  {
    pybind11::gil_scoped_release release;  // other Python threads run meanwhile
    drain(out_pipe[0], err_pipe[0], out, err);
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  int code = 1;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    err += "hcclsim: the run ended by signal " + std::to_string(WTERMSIG(status)) + "\n";
  }
  return {code, out, err};
}

}  // namespace

PYBIND11_MODULE(_hcclsim, m) {
  m.doc() = "hcclsim's command line, run in a child process per call (see the hcclsim package)";
  m.def("run", &run, pybind11::arg("words"),
        "Run `hcclsim WORDS...`; returns (exit code, standard output, standard error).");
}
