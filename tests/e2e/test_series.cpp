// End-to-end tests of several independent series in one data file (a `series` column): each runs
// from its own initial distribution, so filter, smooth, decode and score on the file equal the
// runs on each series alone, added; optimize and EM maximise the summed log-likelihood; the CSVs
// name each row's series; a series whose rows are not contiguous is an error naming the line.
#include "support.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// The Nile data as two series (the first `split` years, then the rest) in one file, and alone.
struct Split {
  std::string both, first, second;
};

Split split_nile(size_t split) {
  const Table nile = read_table(example_path("data/nile.csv"));
  Table both{{"series", "t", "y"}, {}}, first{{"t", "y"}, {}}, second{{"t", "y"}, {}};
  const int y = nile.column_index("y");
  for (size_t i = 0; i < nile.rows.size(); ++i) {
    const bool a = i < split;
    const std::string t = std::to_string(a ? i : i - split);
    both.rows.push_back({a ? "early" : "late", t, nile.rows[i][y]});
    (a ? first : second).rows.push_back({t, nile.rows[i][y]});
  }
  Split s{scratch_path("nile-two.csv"), scratch_path("nile-early.csv"),
          scratch_path("nile-late.csv")};
  write_table(s.both, both);
  write_table(s.first, first);
  write_table(s.second, second);
  return s;
}

double json_number(const std::string& exe, std::vector<std::string> args, const char* key) {
  args.insert(args.begin(), exe);
  args.push_back("--json");
  return nlohmann::json::parse(run_ok(args).out)[key].get<double>();
}

} // namespace

TEST_CASE("several series: log-likelihoods add, outputs name the series", "[series]") {
  const std::string& exe = example_exe("nile");
  const Split s = split_nile(28);
  const double both = json_number(exe, {"filter", "--data", s.both}, "log_likelihood"),
               first = json_number(exe, {"filter", "--data", s.first}, "log_likelihood"),
               second = json_number(exe, {"filter", "--data", s.second}, "log_likelihood");
  CHECK(both == Approx(first + second).epsilon(1e-12));
  // The second series starts afresh: not the filter of the whole series.
  const double whole =
      json_number(exe, {"filter", "--data", example_path("data/nile.csv")}, "log_likelihood");
  CHECK(std::abs(both - whole) > 1);

  // Smoothing: each series' rows are its own smoother's.
  const std::string out = scratch_path("nile-two-smooth.csv"),
                    late = scratch_path("nile-late-smooth.csv");
  const nlohmann::json j =
      nlohmann::json::parse(run_ok({exe, "smooth", "--data", s.both, "--out", out, "--json"}).out);
  CHECK(j["series"] == nlohmann::json({"early", "late"}));
  run_ok({exe, "smooth", "--data", s.second, "--out", late});
  const Table t = read_table(out), alone = read_table(late);
  REQUIRE(t.header[0] == "series");
  REQUIRE(t.header[1] == "t");
  REQUIRE(t.rows.size() == 100);
  CHECK(t.rows[28][0] == "late");
  CHECK(t.rows[28][1] == "0");
  const std::vector<double> mean = t.column("mean_level"), mean_alone = alone.column("mean_level");
  for (size_t i = 0; i < mean_alone.size(); ++i)
    CHECK(mean[28 + i] == Approx(mean_alone[i]).epsilon(1e-12));
  // A lag-one covariance has no value at the start of either series.
  const std::vector<double> lagcov = t.column("lagcov_level_level");
  CHECK(std::isnan(lagcov[0]));
  CHECK(std::isnan(lagcov[28]));
  CHECK_FALSE(std::isnan(lagcov[29]));

  // The score adds; at the optimum on both series, it vanishes.
  const std::string fit = scratch_path("nile-two-fit.json");
  run_ok({exe, "optimize", "--data", s.both, "--save", fit});
  const nlohmann::json sc = nlohmann::json::parse(
      run_ok({exe, "score", "--data", s.both, "--params", fit, "--json"}).out);
  CHECK(std::abs(sc["score"]["sigma_eta"].get<double>()) < 1e-3);
  const nlohmann::json s1 = nlohmann::json::parse(
      run_ok({exe, "score", "--data", s.first, "--params", fit, "--json"}).out);
  const nlohmann::json s2 = nlohmann::json::parse(
      run_ok({exe, "score", "--data", s.second, "--params", fit, "--json"}).out);
  CHECK(sc["score"]["sigma_eps"].get<double>() ==
        Approx(s1["score"]["sigma_eps"].get<double>() + s2["score"]["sigma_eps"].get<double>())
            .margin(1e-9));
}

TEST_CASE("several series: EM and decode on a finite-state model", "[series]") {
  const std::string& exe = example_exe("hmm");
  const std::string a = scratch_path("hmm-a.csv"), b = scratch_path("hmm-b.csv"),
                    both = scratch_path("hmm-ab.csv");
  run_ok({exe, "simulate", "--T", "60", "--seed", "1", "--out", a});
  run_ok({exe, "simulate", "--T", "40", "--seed", "2", "--out", b});
  const Table ta = read_table(a), tb = read_table(b);
  Table tab{{"series", "t", "y"}, {}};
  for (const auto& [name, table] : {std::pair{"a", &ta}, std::pair{"b", &tb}})
    for (size_t i = 0; i < table->rows.size(); ++i)
      tab.rows.push_back({name, std::to_string(i), table->rows[i][table->column_index("y")]});
  write_table(both, tab);
  // EM's first row is the log-likelihood at the start: the sum over the series.
  const std::string path = scratch_path("hmm-ab-em.csv");
  run_ok({exe, "optimize", "--method", "em", "--data", both, "--fix", "P", "--max-iterations", "5",
          "--out", path});
  const double la = json_number(exe, {"filter", "--data", a}, "log_likelihood"),
               lb = json_number(exe, {"filter", "--data", b}, "log_likelihood");
  const std::vector<double> ll = read_table(path).column("log_likelihood");
  CHECK(ll.front() == Approx(la + lb).epsilon(1e-12));
  for (size_t i = 1; i < ll.size(); ++i)
    CHECK(ll[i] >= ll[i - 1]);
  // Viterbi on each series alone.
  const Table d = parse_table(run_ok({exe, "decode", "--data", both}).out),
              db = parse_table(run_ok({exe, "decode", "--data", b}).out);
  REQUIRE(d.rows.size() == 100);
  const std::vector<double> z = d.column("z"), zb = db.column("z");
  for (size_t i = 0; i < zb.size(); ++i)
    CHECK(z[60 + i] == zb[i]);
}

TEST_CASE("several series: rows of a series must be contiguous", "[series][bad-input]") {
  const std::string& exe = example_exe("nile");
  const std::string data = scratch_path("nile-interleaved.csv");
  write_file(data, "series,y\na,1120\na,1160\nb,963\na,1210\n");
  const ProcessResult r = run_process({exe, "filter", "--data", data});
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.err.find(data + ":5: series 'a' appears again after series 'b'") != std::string::npos);
  write_file(data, "series,y\na,1120\n,1160\n");
  const ProcessResult empty = run_process({exe, "filter", "--data", data});
  CHECK(empty.exit_code != 0);
  CHECK(empty.err.find(data + ":3: column 'series' is empty") != std::string::npos);
}
