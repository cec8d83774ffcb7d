// The classifier two-sample test and its command: see c2st.h.
#include "lfi/c2st.h"
#include "core/csv.h"
#include "core/error.h"
#include "nn/mlp.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ssm::lfi {

namespace {

using torch::indexing::Slice;

// Trains on (x, y) and returns the accuracy on (x_test, y_test): sklearn's MLPClassifier as sbibm
// sets it (ReLU, Adam 1e-3, L2 1e-4, batches of 200, stop once the training loss has not improved
// by 1e-4 for 10 epochs).
double fold_accuracy(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& x_test,
                     const torch::Tensor& y_test, int64_t max_epochs) {
  const int64_t n = x.size(0), d = x.size(1);
  nn::MlpSpec spec;
  spec.inputs = d;
  spec.outputs = 1;
  spec.hidden = {10 * d, 10 * d};
  spec.activation = "relu";
  spec.single = true;
  nn::Mlp net(spec);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3).weight_decay(1e-4));
  const int64_t batch = std::min<int64_t>(200, n);
  double best = INFINITY;
  int64_t stale = 0;
  for (int64_t epoch = 0; epoch < max_epochs && stale < 10; ++epoch) {
    const torch::Tensor order = torch::randperm(n, torch::kInt64);
    double total = 0;
    for (int64_t b = 0; b < n; b += batch) {
      const torch::Tensor rows = order.index({Slice(b, std::min(n, b + batch))});
      const torch::Tensor logits = net->forward(x.index_select(0, rows)).reshape({-1});
      const torch::Tensor loss =
          torch::binary_cross_entropy_with_logits(logits, y.index_select(0, rows));
      adam.zero_grad();
      loss.backward();
      adam.step();
      total += loss.item<double>() * static_cast<double>(rows.size(0));
    }
    total /= static_cast<double>(n);
    stale = total < best - 1e-4 ? 0 : stale + 1;
    best = std::min(best, total);
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor predicted = net->forward(x_test).reshape({-1}) > 0;
  return (predicted == (y_test > 0.5)).to(torch::kDouble).mean().item<double>();
}

double median_distance(const torch::Tensor& z) {
  const torch::Tensor d = torch::cdist(z, z);
  const int64_t n = z.size(0);
  const torch::Tensor upper = d.masked_select(torch::ones({n, n}, torch::kBool).triu(1));
  return upper.median().item<double>();
}

// Unbiased MMD^2 with k(u, v) = exp(-|u - v|^2 / (2 h^2)).
double mmd2(const torch::Tensor& a, const torch::Tensor& b, double h) {
  auto kernel = [&](const torch::Tensor& u, const torch::Tensor& v) {
    return torch::exp(-torch::cdist(u, v).pow(2) / (2 * h * h));
  };
  const int64_t n = a.size(0), m = b.size(0);
  const double kaa = (kernel(a, a).sum().item<double>() - static_cast<double>(n)) /
                     static_cast<double>(n * (n - 1));
  const double kbb = (kernel(b, b).sum().item<double>() - static_cast<double>(m)) /
                     static_cast<double>(m * (m - 1));
  const double kab = kernel(a, b).mean().item<double>();
  return kaa + kbb - 2 * kab;
}

// "theta[0]" (the CSV outputs' name of a component) as Stan's "theta.1"; other names unchanged.
std::string stan_column(const std::string& name) {
  const size_t open = name.find('[');
  if (open == std::string::npos || name.back() != ']')
    return name;
  std::string out = name.substr(0, open);
  std::stringstream indices(name.substr(open + 1, name.size() - open - 2));
  for (std::string i; std::getline(indices, i, ',');) {
    int64_t k = 0;
    try {
      k = std::stoll(i);
    } catch (const std::exception&) {
      return name;
    }
    out += fmt::format(".{}", k + 1);
  }
  return out;
}

struct Draws {
  std::vector<std::string> columns; // as Stan names them
  torch::Tensor x;                  // [n, d] float64
};

// A CSV of draws (Stan's layout or a plain one: `#` lines are skipped, columns ending in `__` are
// the sampler's own and left out), its columns as Stan names them.
Draws read_draws(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  std::string text, line;
  std::vector<int64_t> file_line; // the file's line of each kept line
  for (int64_t number = 1; std::getline(in, line); ++number)
    if (line.empty() || line[0] != '#') {
      text += line + "\n";
      file_line.push_back(number);
    }
  const CsvTable table = parse_csv(text, path);
  Draws out;
  std::vector<size_t> index;
  for (size_t c = 0; c < table.header.size(); ++c) {
    const std::string& name = table.header[c];
    if (name == "log_weight__")
      throw Error(fmt::format("{}: weighted draws (importance sampling): the test needs "
                              "unweighted ones (posterior --sampler sir resamples them)",
                              path));
    if (name.size() > 2 && name.ends_with("__"))
      continue;
    out.columns.push_back(stan_column(name));
    index.push_back(c);
  }
  if (table.rows.empty() || index.empty())
    throw Error(fmt::format("{}: no draws", path));
  const int64_t n = static_cast<int64_t>(table.rows.size()), d = static_cast<int64_t>(index.size());
  out.x = torch::empty({n, d}, torch::kFloat64);
  double* v = out.x.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t at = file_line.at(static_cast<size_t>(table.lines[i] - 1));
      if (!parse_cell(table.rows[i][index[j]], v[i * d + j], path, at, table.header[index[j]]) ||
          !std::isfinite(v[i * d + j]))
        throw Error(fmt::format("{}:{}: column '{}': not a finite number", path, at,
                                table.header[index[j]]));
    }
  return out;
}

} // namespace

C2stResult c2st(const torch::Tensor& a, const torch::Tensor& b, const C2stOptions& o) {
  torch::set_num_threads(std::max(1, o.threads));
  torch::manual_seed(o.seed);
  const int64_t n = a.size(0), d = a.size(1), folds = o.folds;
  if (n < 2 * folds)
    throw Error(fmt::format("c2st: {} draws in each sample; at least {} are needed for {} folds", n,
                            2 * folds, folds));
  // Standardised by the pooled draws, as sbibm does.
  const torch::Tensor pooled = torch::cat({a, b}, 0);
  const torch::Tensor mean = pooled.mean(0), sd = pooled.std(0).clamp_min(1e-12);
  const torch::Tensor za = ((a - mean) / sd).to(torch::kFloat64),
                      zb = ((b - mean) / sd).to(torch::kFloat64);
  C2stResult out;
  out.n = n;
  out.dimension = d;
  // Stratified folds without shuffling (scikit-learn's StratifiedKFold): rows [k n / F, (k + 1)
  // n / F) of each sample.
  for (int64_t k = 0; k < folds; ++k) {
    const int64_t lo = k * n / folds, hi = (k + 1) * n / folds;
    auto train_part = [&](const torch::Tensor& z) {
      return torch::cat({z.index({Slice(0, lo)}), z.index({Slice(hi, n)})}, 0);
    };
    const torch::Tensor x = torch::cat({train_part(za), train_part(zb)}, 0);
    const int64_t m = n - (hi - lo);
    const torch::Tensor y = torch::cat({torch::zeros({m}), torch::ones({m})}).to(torch::kFloat32);
    const torch::Tensor x_test =
        torch::cat({za.index({Slice(lo, hi)}), zb.index({Slice(lo, hi)})}, 0);
    const torch::Tensor y_test =
        torch::cat({torch::zeros({hi - lo}), torch::ones({hi - lo})}).to(torch::kFloat32);
    out.fold_accuracy.push_back(fold_accuracy(x, y, x_test, y_test, o.max_epochs));
  }
  for (double acc : out.fold_accuracy)
    out.accuracy += acc / static_cast<double>(folds);
  const torch::Tensor gap = (a.mean(0) - b.mean(0)) / b.std(0).clamp_min(1e-12);
  out.mean_error = gap.norm().item<double>();
  const int64_t m = std::min<int64_t>(n, 2000); // the kernel sums are m^2
  const torch::Tensor sa = za.index({Slice(0, m)}), sb = zb.index({Slice(0, m)});
  out.mmd2 = mmd2(sa, sb, median_distance(torch::cat({sa, sb}, 0)));
  return out;
}

int c2st_main(int argc, char** argv) {
  CLI::App app{"Classifier two-sample test (C2ST) between two samples of draws, as sbibm "
               "computes it: 0.5 when a classifier cannot tell them apart, 1 when it always can; "
               "with the distance between their means and their MMD",
               "ssmc c2st"};
  std::string a_path, b_path;
  bool json = false;
  C2stOptions options;
  int64_t max_draws = 10000;
  app.add_option("A", a_path, "Draws (CSV, or Stan's CSV: # lines and __ columns skipped)")
      ->required()
      ->type_name("A.csv");
  app.add_option("B", b_path, "Reference draws, with the same columns (theta[0] matches theta.1)")
      ->required()
      ->type_name("B.csv");
  app.add_option("--max-draws", max_draws, "Use at most this many draws of each (the first)")
      ->check(CLI::PositiveNumber)
      ->default_str("10000");
  app.add_option("--folds", options.folds, "Cross-validation folds")
      ->check(CLI::Range(int64_t{2}, int64_t{20}))
      ->default_str("5");
  app.add_option("--seed", options.seed, "Seed of the classifiers' initialisation and batches")
      ->default_str("1");
  app.add_option("--threads", options.threads, "LibTorch's threads")
      ->check(CLI::PositiveNumber)
      ->default_str("1");
  app.add_flag("--json", json, "Print a JSON object (key \"c2st\") instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const Draws a = read_draws(a_path), b = read_draws(b_path);
  std::vector<int64_t> b_index;
  for (const std::string& name : a.columns) {
    const auto it = std::find(b.columns.begin(), b.columns.end(), name);
    if (it == b.columns.end())
      throw Error(fmt::format("{} has column '{}', {} has not (its columns: {})", a_path, name,
                              b_path, fmt::join(b.columns, ", ")));
    b_index.push_back(it - b.columns.begin());
  }
  if (b.columns.size() != a.columns.size())
    throw Error(fmt::format("{} has columns {} that {} has not", b_path, fmt::join(b.columns, ", "),
                            a_path));
  const int64_t n = std::min({a.x.size(0), b.x.size(0), max_draws});
  const torch::Tensor xa = a.x.index({Slice(0, n)}),
                      xb = b.x.index({Slice(0, n)}).index_select(1, torch::tensor(b_index));
  if (a.x.size(0) != b.x.size(0) && n < max_draws)
    std::fprintf(stderr,
                 "ssmc c2st: note: the samples have %lld and %lld draws: the first %lld "
                 "of each are compared\n",
                 static_cast<long long>(a.x.size(0)), static_cast<long long>(b.x.size(0)),
                 static_cast<long long>(n));
  const C2stResult r = c2st(xa, xb, options);
  if (json) {
    const nlohmann::json j = {{"c2st", r.accuracy},
                              {"fold_accuracy", r.fold_accuracy},
                              {"mean_error", r.mean_error},
                              {"mmd2", r.mmd2},
                              {"n", r.n},
                              {"dimension", r.dimension},
                              {"columns", a.columns}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("c2st %.4f (folds %s) over %lld draws of each in %lld dimensions; mean error "
                "%.4g sd; MMD^2 %.4g\n",
                r.accuracy, fmt::format("{:.3f}", fmt::join(r.fold_accuracy, " ")).c_str(),
                static_cast<long long>(r.n), static_cast<long long>(r.dimension), r.mean_error,
                r.mmd2);
  }
  return 0;
}

} // namespace ssm::lfi
