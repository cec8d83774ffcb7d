// `ssmc density`: density estimation on data alone, the entry point of libssm_flows.so, which the
// driver loads only for this command (so ssmc itself does not link LibTorch).
//   ssmc density fit --data F.csv --model dif|gmm|maf|realnvp|normal[,...] [--context a,b]
//                    --save FILE
//   ssmc density sample --load FILE --n N [--context F.csv] [--out F.csv]
//   ssmc density logpdf --load FILE --at F.csv [--out F.csv] [--json]
// Exit status: 0, 1 for an error in the data or the run, 2 for a usage error.
#include "core/csv.h"
#include "core/error.h"
#include "core/output.h"
#include "flows/density.h"
#include "flows/energy.h"
#include "flows/training.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <unistd.h>

namespace ssm::flows {

namespace {

constexpr const char* kProgram = "ssmc density";

// The columns `wanted` of a CSV table (all of them but `except` when empty) as an [n, d] float64
// tensor; every cell must be a finite number.
torch::Tensor read_points(const CsvTable& table, std::vector<std::string>& wanted,
                          const std::vector<std::string>& except = {}) {
  const std::string& path = table.source;
  if (wanted.empty()) // the reader refuses a header that names a column twice
    for (const auto& name : table.header)
      if (std::find(except.begin(), except.end(), name) == except.end())
        wanted.push_back(name);
  std::vector<size_t> index;
  for (const auto& name : wanted) {
    auto it = std::find(table.header.begin(), table.header.end(), name);
    if (it == table.header.end())
      throw Error(fmt::format("{}: no column '{}' (its columns: {})", path, name,
                              fmt::join(table.header, ", ")));
    index.push_back(size_t(it - table.header.begin()));
  }
  if (table.rows.empty())
    throw Error(fmt::format("{}: no rows of data", path));
  const int64_t n = int64_t(table.rows.size()), d = int64_t(wanted.size());
  auto x = torch::empty({n, d}, torch::kFloat64);
  auto* out = x.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double v = 0;
      if (!parse_cell(table.rows[size_t(i)][index[size_t(j)]], v, path, table.lines[size_t(i)],
                      wanted[size_t(j)]))
        throw Error(fmt::format("{}:{}: column '{}': a missing value; a density's data must be "
                                "complete (drop the row)",
                                path, table.lines[size_t(i)], wanted[size_t(j)]));
      out[i * d + j] = v;
    }
  return x;
}

// A CSV output written a block of rows at a time (atomically: committed at the end).
class CsvOutput {
public:
  CsvOutput(const std::string& path, const std::vector<std::string>& header) : out_(path) {
    std::vector<std::string> names;
    for (const auto& h : header)
      names.push_back(csv_name(h));
    out_.write(fmt::format("{}\n", fmt::join(names, ",")));
  }
  void rows(const torch::Tensor& values) { // [n, d] or [n]
    auto v = values.contiguous();
    const int64_t n = v.size(0), d = v.dim() > 1 ? v.size(1) : 1;
    const double* p = v.data_ptr<double>();
    std::string text;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) {
        if (j)
          text += ',';
        text += format_double(p[i * d + j]);
      }
      text += '\n';
    }
    out_.write(text);
  }
  void commit() { out_.commit(); }

private:
  OutputFile out_;
};

// Rows per block when sampling: bounds the memory of a large --n.
constexpr int64_t kSampleBlock = 1 << 16;

// One line on standard error, redrawn, when it is a terminal and the fit takes over a second.
class EpochProgress {
public:
  void operator()(int64_t epoch, int64_t epochs, double train, double validation) {
    if (!tty_)
      return;
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) && epoch < epochs)
      return;
    std::fprintf(stderr, "\r%s fit: epoch %lld/%lld, mean log p %.4f (validation %.4f)  ", kProgram,
                 static_cast<long long>(epoch), static_cast<long long>(epochs), train, validation);
    shown_ = true;
  }
  ~EpochProgress() {
    if (shown_)
      std::fputc('\n', stderr);
  }

private:
  bool tty_ = isatty(2);
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The cascade of --model (outermost first), with --components for its dif and gmm stages (one
// value for all, or one per stage) and the shared --layers, --hidden and --covariance.
DensitySpec model_spec(const std::vector<std::string>& kinds,
                       const std::vector<int64_t>& components, const DensitySpec& shared) {
  int64_t mixtures = 0;
  for (const auto& k : kinds)
    mixtures += k == "dif" || k == "gmm";
  if (components.size() != 1 && int64_t(components.size()) != mixtures)
    throw Error(fmt::format("--components gives {} values for {} dif or gmm stages of --model",
                            components.size(), mixtures));
  std::shared_ptr<DensitySpec> inner;
  int64_t stage = mixtures;
  for (auto it = kinds.rbegin(); it != kinds.rend(); ++it) {
    auto spec = std::make_shared<DensitySpec>(shared);
    spec->kind = *it;
    if (*it == "dif" || *it == "gmm")
      spec->components = components.size() == 1 ? components[0] : components[size_t(--stage)];
    if ((*it == "gmm" || *it == "normal" || *it == "gaussian") && it != kinds.rbegin())
      throw Error(fmt::format("--model: a {} can only be the last stage of a cascade", *it));
    spec->base = inner;
    inner = spec;
  }
  return *inner;
}

int run(int argc, char** argv) {
  CLI::App app{"density estimation on data: fit, sample, evaluate (a DIF, a GMM, MAF, RealNVP)",
               kProgram};
  app.require_subcommand(1);
  app.fallthrough(); // --threads after the subcommand too
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--threads", threads, "LibTorch's threads (default: the cores)")
      ->check(CLI::Range(1, 256));
  uint64_t seed = 1;

  // fit
  auto* fit = app.add_subcommand("fit", "fit a density to the rows of a CSV file");
  std::string data, save, method = "auto";
  std::vector<std::string> columns, context_columns, kinds = {"dif"};
  std::vector<int64_t> components = {8};
  DensitySpec shared;
  FitOptions options;
  bool no_init = false;
  fit->add_option("--data", data, "CSV file of points, one per row")->required();
  fit->add_option("--columns", columns, "the columns to model (default: all but the context's)")
      ->delimiter(',');
  fit->add_option("--context", context_columns,
                  "columns to condition on: a conditional density p(x | context), read by its "
                  "dif stages")
      ->delimiter(',');
  fit->add_option("--model", kinds,
                  "dif, gmm, maf, realnvp, normal, gaussian or energy; a cascade outermost first "
                  "(dif,maf: a DIF over a MAF)")
      ->delimiter(',')
      ->check(CLI::IsMember(density_kinds()));
  fit->add_option("--components", components, "K of each dif or gmm stage (default 8)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  fit->add_option("--layers", shared.layers, "layers of each maf or realnvp stage (default 5)")
      ->check(CLI::Range(int64_t(1), int64_t(64)));
  fit->add_option("--hidden", shared.hidden,
                  "hidden widths of the networks (MADE, coupling, DIF weights; default 64,64)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  fit->add_option("--maps", shared.maps,
                  "dif: affine (location-scale, default), or maf or realnvp: --layers flow layers "
                  "that read the component's index, before the location-scale")
      ->check(CLI::IsMember({"affine", "maf", "realnvp"}));
  std::string precision = "double";
  fit->add_option("--precision", precision,
                  "the networks' arithmetic: double (default) or single (float32, about twice as "
                  "fast); densities, maps and mixtures stay in double")
      ->check(CLI::IsMember({"double", "single"}));
  fit->add_option("--covariance", shared.covariance, "gmm, gaussian: full (default) or diagonal")
      ->check(CLI::IsMember({"full", "diagonal"}));
  fit->add_option("--method", method,
                  "auto (em for a gmm, classify for an energy model, ml otherwise), ml, gem "
                  "(dif: the GEM surrogate), em, classify")
      ->check(CLI::IsMember({"auto", "ml", "gem", "em", "classify"}));
  fit->add_option("--epochs", options.epochs, "passes over the data (GEM: iterations)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  fit->add_option("--batch-size", options.batch_size, "rows per gradient step (default 512)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  fit->add_option("--lr", options.learning_rate, "Adam's step size (default 1e-3)")
      ->check(CLI::PositiveNumber);
  fit->add_option("--validation", options.validation,
                  "fraction of rows held out for early stopping (default 0.1)")
      ->check(CLI::Range(0.0, 0.9));
  fit->add_option("--patience", options.patience,
                  "epochs without a better validation score before stopping (default 20)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  fit->add_option("--gem-steps", options.gem_steps, "gem: gradient steps per E-step (default 5)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  fit->add_flag("--no-init", no_init, "dif: do not start from a mixture fitted by EM");
  fit->add_option("--seed", seed, "random seed (default 1)");
  fit->add_option("--save", save, "where to write the fitted density")->required();

  // sample
  auto* sample = app.add_subcommand("sample", "draw points from a fitted density");
  std::string load, out;
  int64_t n = 1000;
  sample->add_option("--load", load, "a density written by fit --save")->required();
  std::string context_file;
  sample->add_option("--n", n, "how many draws (default 1000; per context row with --context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32));
  sample->add_option("--context", context_file,
                     "a conditional density's contexts: a CSV file with its context columns");
  sample->add_option("--seed", seed, "random seed (default 1)");
  sample->add_option("--out", out, "CSV file (default: standard output)");
  std::string sampler;
  sample
      ->add_option(
          "--sampler", sampler,
          "an energy model's sampler, its Gaussian the instrumental law: ar (accept-reject, "
          "default), imh (independent Metropolis-Hastings) or sir (importance resampling)")
      ->check(CLI::IsMember(energy_samplers()));

  // logpdf
  auto* logpdf = app.add_subcommand("logpdf", "evaluate a fitted density at points");
  std::string at;
  bool json = false;
  logpdf->add_option("--load", load, "a density written by fit --save")->required();
  logpdf->add_option("--at", at, "CSV file of points, columns matched by name")->required();
  logpdf->add_option("--out", out, "CSV file of log p, one row per point");
  logpdf->add_flag("--json", json,
                   "print {\"mean_logpdf\", \"se\", \"n\", \"model\", \"parameters\"} on "
                   "standard output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  torch::set_num_threads(threads);

  if (*fit) {
    check_output_path(save, {data});
    options.seed = seed;
    options.init_from_mixture = !no_init;
    options.method = method != "auto"       ? method
                     : kinds[0] == "gmm"    ? "em"
                     : kinds[0] == "energy" ? "classify"
                                            : "ml";
    EpochProgress progress;
    options.progress = std::ref(progress);
    options.warn = [](const std::string& message) {
      std::fprintf(stderr, "%s: warning: %s\n", kProgram, message.c_str());
    };
    DensityModel model;
    for (const auto& name : context_columns)
      if (std::find(columns.begin(), columns.end(), name) != columns.end())
        throw Error(fmt::format("column '{}' is both modelled (--columns) and a context "
                                "(--context): a density cannot condition on what it models",
                                name));
    std::vector<std::string> named = columns;
    named.insert(named.end(), context_columns.begin(), context_columns.end());
    std::sort(named.begin(), named.end());
    if (auto twice = std::adjacent_find(named.begin(), named.end()); twice != named.end())
      throw Error(fmt::format("column '{}' is named twice in --columns or --context", *twice));
    const CsvTable table = read_csv(data);
    torch::Tensor context;
    if (!context_columns.empty()) {
      if (std::find(kinds.begin(), kinds.end(), "dif") == kinds.end())
        throw Error("--context: only a dif reads a context; put a dif stage in --model");
      context = read_points(table, context_columns);
    }
    auto x = read_points(table, columns, context_columns);
    if (x.size(1) == 0)
      throw Error(fmt::format("{}: no columns to model besides the context", data));
    model.columns = columns;
    model.context_columns = context_columns;
    shared.dim = x.size(1);
    shared.context = int64_t(context_columns.size());
    shared.single = precision == "single";
    model.density = make_density(model_spec(kinds, components, shared));
    auto start = std::chrono::steady_clock::now();
    FitReport report = fit_density(model, x, context, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    save_density_model(model, save);
    nlohmann::ordered_json j = {{"model", describe(model.density->spec())},
                                {"columns", model.columns},
                                {"context", model.context_columns},
                                {"parameters", model.parameter_count()},
                                {"method", options.method},
                                {"epochs", report.epochs},
                                {"best_epoch", report.best_epoch},
                                {"stopped_early", report.stopped_early},
                                {"train_rows", report.train_rows},
                                {"validation_rows", report.validation_rows},
                                {"train_mean_logpdf", report.train_mean_logpdf},
                                {"seconds", seconds},
                                {"saved", save}};
    if (report.validation_rows) // none for EM and GEM, which do not stop early
      j["validation_mean_logpdf"] = report.validation_mean_logpdf;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  DensityModel model = load_density_model(load);
  // The columns `names` of `path`, for the density in `load`.
  auto read_columns = [&](const CsvTable& table, std::vector<std::string> names) {
    try {
      return read_points(table, names);
    } catch (const Error& e) {
      std::vector<std::string> all = model.columns;
      all.insert(all.end(), model.context_columns.begin(), model.context_columns.end());
      throw Error(fmt::format("{} (the density in {} reads the columns {})", e.what(), load,
                              fmt::join(all, ", ")));
    }
  };
  if (*sample) {
    check_output_path(out, {load, context_file});
    torch::manual_seed(seed);
    auto* energy = dynamic_cast<EnergyImpl*>(model.density.get());
    if (!sampler.empty() && !energy)
      throw Error(fmt::format("--sampler: the density in {} ({}) is sampled directly; samplers "
                              "are for an energy model",
                              load, describe(model.density->spec())));
    if (energy && !sampler.empty())
      energy->sampler = sampler;
    if (model.context_columns.empty()) {
      if (!context_file.empty())
        throw Error(fmt::format("--context: the density in {} is not conditional", load));
      CsvOutput csv(out, model.columns);
      int64_t proposals = 0;
      double accepted = 0;
      for (int64_t done = 0; done < n; done += kSampleBlock) {
        csv.rows(model.sample(std::min(kSampleBlock, n - done)));
        if (energy)
          proposals += energy->last.proposals, accepted += energy->last.accepted;
      }
      csv.commit();
      if (energy) { // what the sampler did, as the likelihood-free samplers report it
        const std::string what =
            energy->sampler == "sir"
                ? fmt::format("effective sample size {:.0f} of a pool of {}", accepted, proposals)
                : fmt::format("acceptance rate {:.4g} ({} proposals)",
                              accepted / double(std::max<int64_t>(proposals, 1)), proposals);
        std::fprintf(stderr, "%s sample: %s, %s\n", kProgram, energy->sampler.c_str(),
                     what.c_str());
      }
      return 0;
    }
    if (context_file.empty())
      throw Error(fmt::format("the density in {} is conditional on {}: give their values with "
                              "--context FILE.csv",
                              load, fmt::join(model.context_columns, ", ")));
    // n draws for each context row, written after its values.
    auto contexts = read_columns(read_csv(context_file), model.context_columns);
    std::vector<std::string> header = model.context_columns;
    header.insert(header.end(), model.columns.begin(), model.columns.end());
    CsvOutput csv(out, header);
    for (int64_t row = 0; row < contexts.size(0); ++row)
      for (int64_t done = 0; done < n; done += kSampleBlock) {
        const int64_t m = std::min(kSampleBlock, n - done);
        auto context = contexts.slice(0, row, row + 1).expand({m, contexts.size(1)});
        csv.rows(torch::cat({context, model.sample(m, context)}, 1));
      }
    csv.commit();
    return 0;
  }
  check_output_path(out, {load, at});
  const CsvTable table = read_csv(at);
  auto points = read_columns(table, model.columns);
  torch::Tensor context;
  if (!model.context_columns.empty())
    context = read_columns(table, model.context_columns);
  torch::Tensor lp;
  {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    const int64_t rows = evaluation_rows(*model.density);
    for (int64_t start = 0; start < points.size(0); start += rows)
      parts.push_back(
          model.log_prob(points.slice(0, start, start + rows),
                         context.defined() ? context.slice(0, start, start + rows) : context));
    lp = torch::cat(parts);
  }
  if (!out.empty() || !json) {
    CsvOutput csv(out, {"logpdf"});
    csv.rows(lp);
    csv.commit();
  }
  if (json) {
    const double mean = lp.mean().item<double>();
    const double se = lp.numel() > 1 ? lp.std().item<double>() / std::sqrt(double(lp.numel())) : 0;
    nlohmann::ordered_json j = {{"mean_logpdf", mean},
                                {"se", se},
                                {"n", lp.numel()},
                                {"model", describe(model.density->spec())},
                                {"parameters", model.parameter_count()}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

} // namespace

} // namespace ssm::flows

// The module's entry point: `ssmc density ARGS...` with argv[0] the command's name.
extern "C" __attribute__((visibility("default"))) int ssm_density_main(int argc, char** argv) {
  try {
    return ssm::flows::run(argc, argv);
  } catch (const ssm::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", ssm::flows::kProgram, e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of memory (try a smaller --batch-size or model)\n",
                 ssm::flows::kProgram);
  } catch (const c10::OutOfMemoryError&) {
    std::fprintf(stderr, "%s: error: out of memory (try a smaller --batch-size or model)\n",
                 ssm::flows::kProgram);
  } catch (const c10::Error& e) {
    // LibTorch's CPU allocator reports running out of memory as a plain c10::Error.
    const std::string what = e.what_without_backtrace();
    if (what.find("not enough memory") != std::string::npos) {
      std::fprintf(stderr, "%s: error: out of memory (try a smaller --batch-size or model)\n",
                   ssm::flows::kProgram);
      return 1;
    }
    std::fprintf(stderr, "%s: internal error in LibTorch: %s\n", ssm::flows::kProgram,
                 what.c_str());
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", ssm::flows::kProgram, e.what());
    return 70;
  }
  return 1;
}
