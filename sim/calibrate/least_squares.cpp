#include "sim/calibrate/least_squares.h"

#include <algorithm>
#include <cmath>

namespace hcclsim {

namespace {

double sum_of_squares(const std::vector<double>& r) {
  double s = 0;
  for (const double v : r) s += v * v;
  return s;
}

// Solves a x = b (n x n, row-major) by Gaussian elimination with partial
// pivoting; a pivot of 0 leaves its unknown at 0.
std::vector<double> solve(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t row = col + 1; row < n; ++row) {
      if (std::fabs(a[row * n + col]) > std::fabs(a[pivot * n + col])) pivot = row;
    }
    if (pivot != col) {
      for (std::size_t k = 0; k < n; ++k) std::swap(a[col * n + k], a[pivot * n + k]);
      std::swap(b[col], b[pivot]);
    }
    const double p = a[col * n + col];
    if (p == 0) continue;
    for (std::size_t row = col + 1; row < n; ++row) {
      const double f = a[row * n + col] / p;
      if (f == 0) continue;
      for (std::size_t k = col; k < n; ++k) a[row * n + k] -= f * a[col * n + k];
      b[row] -= f * b[col];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t col = n; col-- > 0;) {
    const double p = a[col * n + col];
    if (p == 0) continue;
    double s = b[col];
    for (std::size_t k = col + 1; k < n; ++k) s -= a[col * n + k] * x[k];
    x[col] = s / p;
  }
  return x;
}

}  // namespace

LeastSquaresResult least_squares(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                                 std::vector<double> start, const LeastSquaresOptions& options) {
  const std::size_t k = problem.parameters;
  const std::size_t n = rows.size();
  LeastSquaresResult result;
  for (double& v : start) v = std::clamp(v, 0.0, 1.0);
  result.u = std::move(start);
  std::vector<double> r;
  problem.residuals(result.u, rows, r);
  result.cost = sum_of_squares(r);
  if (k == 0 || n == 0) {
    result.converged = true;
    return result;
  }
  // Marquardt's damping: large steps while the model predicts well, shorter
  // and more gradient-like ones while it does not. Capped both ways.
  double lambda = 1e-3;
  constexpr double kMaxLambda = 1e12;
  constexpr double kMinLambda = 1e-12;
  std::vector<double> jac;  // row-major: jac[i * k + j]
  for (; result.iterations < options.max_iterations; ++result.iterations) {
    jac = forward_jacobian(problem, rows, result.u, r, options.step);
    // Gradient of the cost / 2, and which parameters may move: one at a
    // bound whose gradient points out of the box stays there this step.
    std::vector<double> g(k, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < k; ++j) g[j] += jac[i * k + j] * r[i];
    }
    std::vector<std::size_t> free;
    for (std::size_t j = 0; j < k; ++j) {
      const bool held = (result.u[j] <= 0.0 && g[j] > 0) || (result.u[j] >= 1.0 && g[j] < 0);
      if (!held && g[j] != 0) free.push_back(j);
    }
    if (free.empty()) {
      result.converged = true;
      break;
    }
    const std::size_t m = free.size();
    std::vector<double> jtj(m * m, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t a = 0; a < m; ++a) {
        const double ja = jac[i * k + free[a]];
        if (ja == 0) continue;
        for (std::size_t b = 0; b < m; ++b) jtj[a * m + b] += ja * jac[i * k + free[b]];
      }
    }
    double largest_diagonal = 0;
    for (std::size_t a = 0; a < m; ++a) largest_diagonal = std::max(largest_diagonal, jtj[a * m + a]);
    bool accepted = false;
    bool vanished = false;
    double decrease = 0;
    while (lambda <= kMaxLambda) {
      std::vector<double> a = jtj;
      std::vector<double> rhs(m);
      for (std::size_t p = 0; p < m; ++p) {
        a[p * m + p] += lambda * std::max(jtj[p * m + p], 1e-9 * largest_diagonal + 1e-300);
        rhs[p] = -g[free[p]];
      }
      const std::vector<double> d = solve(a, rhs);
      std::vector<double> trial = result.u;
      bool moves_any = false;  // by more than its resolution
      for (std::size_t p = 0; p < m; ++p) {
        const std::size_t j = free[p];
        trial[j] = std::clamp(result.u[j] + d[p], 0.0, 1.0);
        const double moved = std::fabs(trial[j] - result.u[j]);
        const double resolution = options.resolution.empty() ? 0.0 : options.resolution[j];
        moves_any = moves_any || moved >= std::max(options.min_step, resolution);
      }
      if (!moves_any) {
        vanished = true;
        break;
      }
      std::vector<double> tr;
      problem.residuals(trial, rows, tr);
      const double cost = sum_of_squares(tr);
      if (cost < result.cost) {
        decrease = (result.cost - cost) / std::max(result.cost, 1e-300);
        result.u = std::move(trial);
        r = std::move(tr);
        result.cost = cost;
        lambda = std::max(lambda / 10, kMinLambda);
        accepted = true;
        break;
      }
      lambda *= 10;
    }
    if (!accepted || vanished || decrease < options.min_decrease) {
      ++result.iterations;
      result.converged = true;
      break;
    }
  }
  return result;
}

std::vector<double> forward_jacobian(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                                     const std::vector<double>& u, const std::vector<double>& r, double step) {
  const std::size_t k = problem.parameters;
  std::vector<double> jac(rows.size() * k, 0.0);
  std::vector<std::size_t> sub;
  std::vector<std::size_t> sub_pos;
  std::vector<double> column;
  for (std::size_t j = 0; j < k; ++j) {
    sub.clear();
    sub_pos.clear();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (problem.depends[rows[i]][j]) {
        sub.push_back(rows[i]);
        sub_pos.push_back(i);
      }
    }
    if (sub.empty()) continue;
    const double h = u[j] + step <= 1.0 ? step : -step;
    std::vector<double> moved = u;
    moved[j] += h;
    problem.residuals(moved, sub, column);
    for (std::size_t s = 0; s < sub.size(); ++s) jac[sub_pos[s] * k + j] = (column[s] - r[sub_pos[s]]) / h;
  }
  return jac;
}

LeastSquaresProblem linearized(const LeastSquaresProblem& problem, const std::vector<std::size_t>& rows,
                               const std::vector<double>& u, const std::vector<double>& r,
                               const std::vector<double>& jacobian) {
  const std::size_t k = problem.parameters;
  std::vector<std::size_t> place(problem.depends.size(), rows.size());  // row -> its index in `rows`
  for (std::size_t i = 0; i < rows.size(); ++i) place[rows[i]] = i;
  LeastSquaresProblem lin;
  lin.parameters = k;
  lin.depends = problem.depends;
  lin.residuals = [k, u, r, jacobian, place](const std::vector<double>& v, const std::vector<std::size_t>& asked,
                                             std::vector<double>& out) {
    out.resize(asked.size());
    for (std::size_t a = 0; a < asked.size(); ++a) {
      const std::size_t i = place.at(asked[a]);
      double value = r.at(i);
      for (std::size_t j = 0; j < k; ++j) value += jacobian[i * k + j] * (v[j] - u[j]);
      out[a] = value;
    }
  };
  return lin;
}

}  // namespace hcclsim
