// Shared helpers of the end-to-end tests (see support.h).
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numbers>
#include <sstream>

#ifndef SSM_E2E_SSMC
#error "SSM_E2E_SSMC (path of ssmc) must be defined"
#endif

namespace fs = std::filesystem;

namespace e2e {

const std::string& ssmc_path() {
  static const std::string p = SSM_E2E_SSMC;
  return p;
}

std::string example_path(const std::string& relative) {
  return std::string(SSM_E2E_EXAMPLES) + "/" + relative;
}

std::string scratch_path(const std::string& name) {
  static const fs::path dir = [] {
    fs::path d = SSM_E2E_SCRATCH;
    if (const char* shard = std::getenv("SSM_E2E_SHARD")) // ctest's shards run side by side
      d += std::string("-") + shard;
    fs::remove_all(d); // executables of an earlier run must not be reused
    fs::create_directories(d);
    return d;
  }();
  return (dir / name).string();
}

double log_poisson(double k, double lambda) {
  return k * std::log(lambda) - lambda - std::lgamma(k + 1);
}

std::string fresh_dir(const std::string& name) {
  const std::string d = scratch_path(name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

namespace {

const std::string& build_once(const std::string& name, const std::string& source_path) {
  static std::map<std::string, std::string> built;
  auto it = built.find(name);
  if (it != built.end())
    return it->second;
  // Named after the model: the executables print their own name in messages.
  fs::create_directories(scratch_path("bin"));
  const std::string exe = scratch_path("bin/" + name);
  ProcessResult r = run_process({ssmc_path(), "build", source_path, "-o", exe});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(file_exists(exe));
  return built.emplace(name, exe).first->second;
}

} // namespace

const std::string& example_exe(const std::string& name) {
  return build_once(name, example_path(name + ".ssm"));
}

std::string run_kernel_harness(const std::string& name, const std::string& source_path,
                               const char* harness, const std::vector<std::string>& args) {
  const std::string obj = scratch_path(name + ".o"), cpp = scratch_path(name + "-harness.cpp"),
                    exe = scratch_path(name + "-harness");
  write_file(cpp, harness);
  run_ok({ssmc_path(), "build", source_path, "--emit=obj", "-o", obj});
  run_ok({SSM_E2E_CXX, "-O1", "-I" SSM_E2E_RUNTIME, cpp, obj, "-o", exe, "-lmvec", "-lm"});
  std::vector<std::string> argv = {exe};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_ok(argv).out;
}

const std::string& model_exe(const std::string& name, const std::string& source) {
  const std::string path = scratch_path(name + ".ssm");
  if (!file_exists(path))
    write_file(path, source);
  return build_once(name, path);
}

ProcessResult run_ok(const std::vector<std::string>& argv) {
  ProcessResult r = run_process(argv);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return r;
}

nlohmann::json run_json(const std::vector<std::string>& argv) {
  const ProcessResult r = run_ok(argv);
  nlohmann::json j;
  INFO(r.describe());
  REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
  return j;
}

int Table::column_index(const std::string& name) const {
  for (size_t j = 0; j < header.size(); ++j)
    if (header[j] == name)
      return static_cast<int>(j);
  return -1;
}

std::vector<double> Table::column(const std::string& name) const {
  const int j = column_index(name);
  if (j < 0)
    FAIL("no column '" << name << "'");
  std::vector<double> v;
  for (const auto& row : rows) {
    const std::string& c = row.at(j);
    if (c.empty() || c == "NA") {
      v.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    double d = 0;
    auto [end, ec] = std::from_chars(c.data(), c.data() + c.size(), d);
    if (ec != std::errc() || end != c.data() + c.size())
      FAIL("column '" << name << "': cannot parse '" << c << "'");
    v.push_back(d);
  }
  return v;
}

Table parse_table(const std::string& text) {
  Table t;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      continue;
    // Fields split at commas outside quotes; a quoted field ("A[0,1]") loses its quotes, and a
    // doubled quote inside it stands for one (RFC 4180, one line per record).
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"')
        cells.back() += line[++i];
      else if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        cells.emplace_back();
      else
        cells.back() += c;
    }
    if (first)
      t.header = cells;
    else
      t.rows.push_back(cells);
    first = false;
  }
  return t;
}

Table read_table(const std::string& path) {
  return parse_table(read_file(path));
}

Table read_stan_csv(const std::string& path) {
  std::string text, line;
  std::istringstream in(read_file(path));
  while (std::getline(in, line))
    if (!line.starts_with("#"))
      text += line + "\n";
  return parse_table(text);
}

void write_table(const std::string& path, const Table& table) {
  std::string s = fmt::format("{}\n", fmt::join(table.header, ","));
  for (const auto& row : table.rows)
    s += fmt::format("{}\n", fmt::join(row, ","));
  write_file(path, s);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO("reading " << path);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  INFO("writing " << path);
  REQUIRE(out.good());
}

bool file_exists(const std::string& path) {
  return fs::exists(path);
}

namespace {

FilterRun run_task(std::vector<std::string> argv, const std::string& out_csv) {
  argv.insert(argv.end(), {"--json", "--out", out_csv});
  ProcessResult r = run_ok(argv);
  FilterRun f;
  INFO(r.describe());
  REQUIRE_NOTHROW(f.summary = nlohmann::json::parse(r.out));
  f.csv_text = read_file(out_csv);
  f.table = parse_table(f.csv_text);
  return f;
}

} // namespace

FilterRun run_filter(const std::string& exe, const std::vector<std::string>& args,
                     const std::string& out_csv) {
  std::vector<std::string> argv = {exe, "filter"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (std::find(args.begin(), args.end(), "--method") == args.end())
    argv.insert(argv.end(), {"--method", "bootstrap"}); // what these tests measure
  return run_task(argv, out_csv);
}

FilterRun run_smooth(const std::string& exe, const std::vector<std::string>& args,
                     const std::string& out_csv) {
  std::vector<std::string> argv = {exe, "smooth"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_task(argv, out_csv);
}

double sample_mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s / static_cast<double>(v.size());
}

double sample_variance(const std::vector<double>& v) {
  const double m = sample_mean(v);
  double s = 0;
  for (double x : v)
    s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

void check_mean_close(const std::vector<double>& v, double exact, double z,
                      const std::string& what) {
  const double m = sample_mean(v), se = std::sqrt(sample_variance(v) / v.size());
  INFO(fmt::format("{}: mean over {} replicates {} (se {}), exact {}, {:.2f} se", what, v.size(), m,
                   se, exact, (m - exact) / se));
  CHECK(std::abs(m - exact) <= z * se);
}

void check_standard_normal(const std::vector<double>& z, const std::string& what) {
  INFO(what);
  const double n = static_cast<double>(z.size()), m = sample_mean(z), v = sample_variance(z);
  double lag = 0;
  for (size_t i = 1; i < z.size(); ++i)
    lag += (z[i] - m) * (z[i - 1] - m);
  CHECK(std::abs(m) <= 4 / std::sqrt(n));
  CHECK(std::abs(v - 1) <= 4 * std::sqrt(2 / n));
  CHECK(std::abs(lag / ((n - 1) * v)) <= 4 / std::sqrt(n));
}

double scalar_kalman_loglik(const std::vector<double>& y, double a, double q, double c, double r,
                            double p0) {
  double m = 0, P = p0, ll = 0;
  for (size_t t = 0; t < y.size(); ++t) {
    if (t > 0) {
      m *= a;
      P = a * a * P + q;
    }
    if (std::isnan(y[t]))
      continue;
    const double S = c * c * P + r, e = y[t] - c * m, gain = P * c / S;
    ll += -0.5 * (std::log(2 * std::numbers::pi * S) + e * e / S);
    m += gain * e;
    P -= gain * c * P;
  }
  return ll;
}

GridPosterior grid_posterior(const std::function<double(double, double)>& log_density, double a_lo,
                             double a_hi, double b_lo, double b_hi, int n) {
  auto a_at = [&](int i) { return a_lo + (a_hi - a_lo) * (i + 0.5) / n; };
  auto b_at = [&](int j) { return b_lo + (b_hi - b_lo) * (j + 0.5) / n; };
  std::vector<double> lp(static_cast<size_t>(n) * n);
  double top = -INFINITY;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      lp[i * n + j] = log_density(a_at(i), b_at(j));
      top = std::max(top, lp[i * n + j]);
    }
  double z = 0, a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double a = a_at(i), b = b_at(j), w = std::exp(lp[i * n + j] - top);
      z += w;
      a1 += w * a;
      a2 += w * a * a;
      b1 += w * b;
      b2 += w * b * b;
    }
  GridPosterior g;
  g.mean_a = a1 / z;
  g.sd_a = std::sqrt(a2 / z - g.mean_a * g.mean_a);
  g.mean_b = b1 / z;
  g.sd_b = std::sqrt(b2 / z - g.mean_b * g.mean_b);
  g.log_integral = top + std::log(z) + std::log((a_hi - a_lo) / n) + std::log((b_hi - b_lo) / n);
  return g;
}

std::pair<double, double> marginal_gaps(const std::string& a_path, const std::string& b_path,
                                        const std::vector<std::string>& columns) {
  const Table a = read_table(a_path), b = read_table(b_path);
  double mean_gap = 0, var_gap = 0;
  for (const std::string& c : columns) {
    const std::vector<double> ma = a.column("mean_" + c), mb = b.column("mean_" + c);
    const std::vector<double> va = a.column("var_" + c), vb = b.column("var_" + c);
    REQUIRE(ma.size() == mb.size());
    for (size_t t = 0; t < ma.size(); ++t) {
      mean_gap = std::max(mean_gap, std::abs(ma[t] - mb[t]));
      var_gap = std::max(var_gap, std::abs(va[t] / vb[t] - 1));
    }
  }
  return {mean_gap, var_gap};
}

} // namespace e2e
