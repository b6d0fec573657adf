// Bounded nonlinear least squares for a handful of parameters, as
// `hcclsim calibrate` needs it: Levenberg-Marquardt on parameters scaled to
// [0, 1] (the caller maps its bounds there, e.g. logarithmically), a
// forward-difference Jacobian, steps clamped to the box and parameters held
// at a bound while the gradient pushes them out of it. No randomness and
// fixed caps on iterations and damping: the same problem gives the same
// answer, bit for bit.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace hcclsim {

struct LeastSquaresProblem {
  std::size_t parameters = 0;
  // The residuals of `rows` (indices into depends) at `u` (each in [0, 1]),
  // written to `out` in the order of `rows`.
  std::function<void(const std::vector<double>& u, const std::vector<std::size_t>& rows, std::vector<double>& out)>
      residuals;
  // depends[row][j]: whether row's residual can change with parameter j.
  // A column of the Jacobian is computed only for the rows that depend on
  // its parameter (0 for the others), so a row is evaluated once per
  // Jacobian for each parameter it depends on.
  std::vector<std::vector<char>> depends;
};

struct LeastSquaresOptions {
  int max_iterations = 100;
  double step = 1e-3;          // forward-difference step in [0, 1] coordinates (backwards at the upper bound)
  double min_decrease = 1e-10; // stop once an accepted step lowers the cost by less than this fraction
  double min_step = 1e-8;      // ... or moves no parameter by more than this
  // Per parameter (empty: none): a trial step that moves no parameter by
  // more than its entry here (or min_step) ends the fit, as too small to
  // matter to the caller (calibrate: a tenth of what its rounding to four
  // significant digits can show).
  std::vector<double> resolution;
};

struct LeastSquaresResult {
  std::vector<double> u;
  double cost = 0;            // sum of squared residuals at u
  int iterations = 0;         // Jacobians computed
  bool converged = false;     // stopped by a criterion, not by max_iterations
};

// Minimises the sum of squared residuals of `rows` over the box [0, 1]^k
// from `start` (clamped into it).
LeastSquaresResult least_squares(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                                 std::vector<double> start, const LeastSquaresOptions& options = {});

// The forward-difference Jacobian of `rows` at `u`, whose residuals there
// are `r`: row-major, rows.size() x parameters, a column computed only for
// the rows that depend on its parameter (0 elsewhere). The step is taken
// backwards where u + step would leave the box.
std::vector<double> forward_jacobian(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                                     const std::vector<double>& u, const std::vector<double>& r, double step);

// The problem linearized at `u`: the residual of each of `rows` is
// r + J (v - u) (r, J as forward_jacobian gives them), computed without
// calling `problem` again. Other rows are not part of it.
LeastSquaresProblem linearized(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                               const std::vector<double>& u, const std::vector<double>& r,
                               const std::vector<double>& jacobian);

}  // namespace hcclsim
