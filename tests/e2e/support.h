// Shared helpers of the end-to-end tests: where ssmc, the examples and the scratch directory are,
// compiling models once per test run, small CSV reading/writing, and sample statistics.
#pragma once

#include "process.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace e2e {

const std::string& ssmc_path();
// Builds the model at `source_path` to an object (`ssmc build --emit=obj`), links it with the C++
// `harness` source, which reads the model's table `ssm_model_table` (kernel/abi.h), and runs the
// result with `args`: its standard output. `name` names the scratch files.
std::string run_kernel_harness(const std::string& name, const std::string& source_path,
                               const char* harness, const std::vector<std::string>& args);
std::string example_path(const std::string& relative); // under examples/
// A fresh per-run scratch directory (emptied at the first call of the run; a ctest shard, named by
// SSM_E2E_SHARD, has its own); returns scratch/name.
std::string scratch_path(const std::string& name);
// log P(K = k) for K ~ Poisson(lambda).
double log_poisson(double k, double lambda);
// scratch_path(name) as an empty directory (removed first if it exists).
std::string fresh_dir(const std::string& name);

// Compiles examples/NAME.ssm with ssmc into the scratch directory, once per run, and returns the
// executable's path. Fails the current test if the build fails.
const std::string& example_exe(const std::string& name);
// Writes `source` to scratch/NAME.ssm and compiles it (once per run per name).
const std::string& model_exe(const std::string& name, const std::string& source);

// Runs the command and fails the current test (with its output) unless it exits with 0.
ProcessResult run_ok(const std::vector<std::string>& argv);
// run_ok's standard output as JSON (a --json run); fails the test, with the output, if it is not.
nlohmann::json run_json(const std::vector<std::string>& argv);

// A CSV file as strings; cells are not quoted in anything the tests read.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  int column_index(const std::string& name) const; // -1 if absent
  // The column as numbers; empty cells and NA are NaN. Fails the test if the column is absent.
  std::vector<double> column(const std::string& name) const;
};
Table parse_table(const std::string& text);
Table read_table(const std::string& path);
// A Stan CSV file (`sample --out`, `vi --param-draws`) without its comment lines.
Table read_stan_csv(const std::string& path);
void write_table(const std::string& path, const Table& table);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);

// A filter (or smooth) run's outputs: the --json summary and the --out CSV. run_filter runs `filter
// --method bootstrap` unless the arguments name a method.
struct FilterRun {
  nlohmann::json summary;
  Table table;
  std::string csv_text;
};
FilterRun run_filter(const std::string& exe, const std::vector<std::string>& args,
                     const std::string& out_csv);
// `smooth` with `args` (the method's and the data's), its --json summary and its --out CSV.
FilterRun run_smooth(const std::string& exe, const std::vector<std::string>& args,
                     const std::string& out_csv);

double sample_mean(const std::vector<double>& v);
// Mean 0, variance 1 and no lag-1 autocorrelation, each within 4 standard errors.
void check_standard_normal(const std::vector<double>& z, const std::string& what);
double sample_variance(const std::vector<double>& v); // unbiased (n - 1)
// The mean of v (replicates of an estimate) within z standard errors of `exact`, the values in
// the test's message under `what`.
void check_mean_close(const std::vector<double>& v, double exact, double z,
                      const std::string& what);

// log p(y) of the scalar linear-Gaussian model x_0 ~ N(0, p0), x_t = a x_{t-1} + N(0, q),
// y_t = c x_t + N(0, r) (q, r variances) by a Kalman filter written for the tests; a NaN
// observation is missing.
double scalar_kalman_loglik(const std::vector<double>& y, double a, double q, double c, double r,
                            double p0);

// A two-parameter posterior by the midpoint rule on n x n cells of the box [a_lo, a_hi] x
// [b_lo, b_hi], from its unnormalised log density: each parameter's mean and sd, and the log of
// the density's integral over the box.
struct GridPosterior {
  double mean_a = 0, sd_a = 0, mean_b = 0, sd_b = 0, log_integral = 0;
};
GridPosterior grid_posterior(const std::function<double(double, double)>& log_density, double a_lo,
                             double a_hi, double b_lo, double b_hi, int n);

// The largest |mean difference| and |variance ratio - 1| between two smooth CSVs, over the
// columns mean_C and var_C of each state column C.
std::pair<double, double> marginal_gaps(const std::string& a_path, const std::string& b_path,
                                        const std::vector<std::string>& columns = {"x[0]", "x[1]"});

} // namespace e2e
