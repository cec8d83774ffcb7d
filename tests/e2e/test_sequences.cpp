// End-to-end tests of items that are sequences (`obs c[n] : sequence[V]`, data in long format with
// a `series` column): an LSTM or GRU language model (`rnn_lm`) trained by `vi` reaches the exact
// held-out likelihood of the first-order Markov chain that drew the data (and a model blind to
// history cannot); a mixture of two language models over an enumerated latent reaches the exact
// likelihood of the mixture of chains that drew its data; an `rnn` encoder in a guide learns the
// exact Gaussian posterior of a code that the sequence determines; trained networks read back; and
// the refusals, with their file, line and column.
#include "support.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace e2e;

namespace {

// Tokens 0, 1, 2 and the end, 3. A chain's start law and transitions (rows: the previous token;
// columns: the next, the end last).
struct Chain {
  std::array<double, 3> start;
  std::array<std::array<double, 4>, 3> next;
};
const Chain kChainA = {{0.7, 0.2, 0.1},
                       {{{0.1, 0.7, 0.1, 0.1}, {0.1, 0.1, 0.6, 0.2}, {0.6, 0.1, 0.1, 0.2}}}};
const Chain kChainB = {{0.1, 0.2, 0.7},
                       {{{0.6, 0.1, 0.1, 0.2}, {0.7, 0.1, 0.1, 0.1}, {0.1, 0.6, 0.1, 0.2}}}};

std::vector<int> draw_sequence(const Chain& c, std::mt19937_64& rng) {
  std::vector<int> s;
  std::discrete_distribution<int> first(c.start.begin(), c.start.end());
  s.push_back(first(rng));
  while (s.back() != 3) {
    const auto& row = c.next[s.back()];
    s.push_back(std::discrete_distribution<int>(row.begin(), row.end())(rng));
  }
  return s;
}

double log_p(const Chain& c, const std::vector<int>& s) {
  double l = std::log(c.start[s[0]]);
  for (size_t t = 1; t < s.size(); ++t)
    l += std::log(c.next[s[t - 1]][s[t]]);
  return l;
}

// Long format: one row per token, the item's name in `series`; `x` (when given) on every row.
std::string write_items(const std::string& name, const std::vector<std::vector<int>>& items,
                        const std::vector<double>& x = {}) {
  std::string csv = x.empty() ? "series,c\n" : "series,c,x\n";
  for (size_t n = 0; n < items.size(); ++n)
    for (int token : items[n])
      csv += x.empty() ? fmt::format("w{},{}\n", n, token)
                       : fmt::format("w{},{},{}\n", n, token, x[n]);
  const std::string path = scratch_path(name);
  write_file(path, csv);
  return path;
}

// Small enough not to learn its training items by heart (about 150 weights against 14,000 tokens:
// a GRU of 16 units, 1400 weights, fits 600 items 0.8 nats each better than the chain that drew
// them, and the held-out ones 1 nat worse), large enough for a first-order chain.
const char* kLm = R"(model seq_lm {
  net lm : rnn_lm(vocab = 4, embedding = 4, hidden = 8, cell = gru);
  obs c[n] : sequence[4] ~ lm();
}
)";

} // namespace

TEST_CASE("sequences: a language model trained by vi reaches the exact held-out likelihood of "
          "the chain that drew its data",
          "[vi][sequences]") {
  std::mt19937_64 rng(11);
  std::vector<std::vector<int>> train, test;
  for (int n = 0; n < 2000; ++n)
    train.push_back(draw_sequence(kChainA, rng));
  for (int n = 0; n < 400; ++n)
    test.push_back(draw_sequence(kChainA, rng));
  // The exact held-out log p per item, and the best a model blind to history can do (each
  // token's frequency in the training data, the end among them).
  double exact = 0, blind = 0, tokens = 0;
  std::array<double, 4> counts{};
  for (const auto& s : train)
    for (int t : s)
      counts[t] += 1;
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  for (const auto& s : test) {
    exact += log_p(kChainA, s);
    for (int t : s)
      blind += std::log(counts[t] / total);
    tokens += static_cast<double>(s.size());
  }
  exact /= 400;
  blind /= 400;
  const double per_item = tokens / 400;
  REQUIRE(exact - blind > 0.3 * per_item); // history matters: a blind model cannot pass below
  const std::string data = write_items("lm_train.csv", train),
                    held = write_items("lm_test.csv", test);
  const std::string saved = scratch_path("lm_nets.pt");
  // Mini-batches: the model has no per-item parameters (no latent).
  const nlohmann::json j = run_json(
      {model_exe("seq_lm", kLm), "vi", "--data", data, "--test", held, "--iterations", "600",
       "--batch-size", "200", "--net-learning-rate", "0.05", "--save-nets", saved, "--json"});
  CAPTURE(j.dump(), exact, blind, per_item);
  CHECK(j["items"] == 2000);
  CHECK(j["test"]["items"] == 400);
  // No latent: the ELBO is log p itself, with no Monte Carlo error.
  const double lm = j["test"]["elbo"];
  CHECK(std::abs(double(j["test"]["iwae"]) - lm) < 1e-9);
  // The maximum likelihood bigram's excess held-out loss is about (free probabilities) / (2 x
  // training tokens), under 0.001 nats per token here; the held-out set is the same for both, so
  // only that, the network's excess weights and its training stand between them.
  CHECK(lm > exact - 0.02 * per_item);
  CHECK(lm < exact + 0.02 * per_item);
  // The networks read back give the same held-out likelihood without training.
  const nlohmann::json again = run_json({model_exe("seq_lm", kLm), "vi", "--data", held,
                                         "--load-nets", saved, "--iterations", "0", "--json"});
  CHECK(std::abs(double(again["elbo"]) - lm) < 1e-9);
}

TEST_CASE("sequences: a mixture of two language models over an enumerated latent reaches the "
          "likelihood of the mixture of chains",
          "[vi][sequences]") {
  std::mt19937_64 rng(12);
  std::vector<std::vector<int>> train, test;
  std::bernoulli_distribution which(0.4);
  for (int n = 0; n < 1400; ++n)
    (n < 1000 ? train : test).push_back(draw_sequence(which(rng) ? kChainB : kChainA, rng));
  double exact = 0, tokens = 0;
  for (const auto& s : test) {
    exact += std::log(0.6 * std::exp(log_p(kChainA, s)) + 0.4 * std::exp(log_p(kChainB, s)));
    tokens += static_cast<double>(s.size());
  }
  exact /= 400;
  const double per_item = tokens / 400;
  // The mixture weight is learned with the decoder, which reads k[n] beside every token; k[n] is
  // enumerated, so the IWAE bound is log p exactly, and the ELBO is too once each item's guide
  // is its posterior.
  const char* mixture = R"(model seq_mix {
  param w : real(0, 1) = 0.5;
  net lm : rnn_lm(vocab = 4, context = 1, embedding = 3, hidden = 4, cell = gru);
  latent k[n] : int[0..1] ~ bernoulli(w);
  obs c[n] : sequence[4] ~ lm(k[n]);
}
)";
  const nlohmann::json j =
      run_json({model_exe("seq_mix", mixture), "vi", "--data", write_items("mix_train.csv", train),
                "--test", write_items("mix_test.csv", test), "--iterations", "300",
                "--learning-rate", "0.05", "--net-learning-rate", "0.05", "--json"});
  CAPTURE(j.dump(), exact, per_item);
  const double held = j["test"]["iwae"];
  CHECK(held > exact - 0.03 * per_item);
  CHECK(held < exact + 0.02 * per_item);
  CHECK(std::abs(double(j["test"]["elbo"]) - held) < 0.02);
}

TEST_CASE("sequences: an rnn encoder in a guide learns the exact posterior of a code that the "
          "sequence determines",
          "[vi][sequences]") {
  // Each item's x is the number of 1s in its sequence less 1, seen with noise of sd 0.5 around a
  // code z ~ N(0, 1): the exact posterior of z is N(0.8 x, 0.2), and an encoder that reads the
  // sequence (not x) must learn to count to give it. The sequence has its own language model.
  std::mt19937_64 rng(13);
  std::vector<std::vector<int>> items;
  std::vector<double> x;
  for (int n = 0; n < 400; ++n) {
    items.push_back(draw_sequence(kChainA, rng));
    x.push_back(static_cast<double>(std::count(items.back().begin(), items.back().end(), 1)) - 1);
  }
  const char* counting = R"(model seq_code {
  net lm : rnn_lm(vocab = 4, embedding = 8, hidden = 16);
  net encoder : rnn(vocab = 4, outputs = 2, embedding = 8, hidden = 16);
  latent z[n] ~ normal(0, 1);
  obs c[n] : sequence[4] ~ lm();
  obs x[n] ~ normal(z[n], 0.5);
  guide z[n] ~ normal(encoder(c[n])[0], exp(encoder(c[n])[1]));
}
)";
  const std::string out = scratch_path("code_guide.csv");
  const nlohmann::json j =
      run_json({model_exe("seq_code", counting), "vi", "--data", write_items("code.csv", items, x),
                "--iterations", "800", "--samples", "2", "--net-learning-rate", "0.02",
                "--schedule", "cosine", "--out", out, "--json"});
  CAPTURE(j.dump());
  const Table t = read_table(out);
  const std::vector<double> mean = t.column("mean_z"), sd = t.column("sd_z");
  REQUIRE(mean.size() == items.size());
  // An encoder blind to the sequence would give every item the same mean: an error of 0.8 sd(x),
  // about 1.6, in root mean square.
  double square = 0, worst_sd = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    square += std::pow(mean[n] - 0.8 * x[n], 2);
    worst_sd = std::max(worst_sd, std::abs(sd[n] - std::sqrt(0.2)));
  }
  CHECK(std::sqrt(square / static_cast<double>(items.size())) < 0.05);
  CHECK(worst_sd < 0.05);
}

TEST_CASE("sequences: the character language model on English words beats the best model blind "
          "to history",
          "[vi][sequences]") {
  // The held-out words' log p under each character's training frequency (the end among them).
  auto words = [](const std::string& path) {
    std::vector<std::vector<int>> out;
    std::string last;
    const Table t = read_table(path);
    const int series = t.column_index("series"), c = t.column_index("c");
    for (const auto& row : t.rows) {
      if (row[series] != last)
        out.emplace_back();
      last = row[series];
      out.back().push_back(std::stoi(row[c]));
    }
    return out;
  };
  const std::string train = example_path("data/words_train.csv"),
                    test = example_path("data/words_test.csv");
  std::vector<double> counts(27, 0);
  double total = 0;
  for (const auto& w : words(train))
    for (int ch : w) {
      counts[ch] += 1;
      total += 1;
    }
  double blind = 0;
  const auto held = words(test);
  for (const auto& w : held)
    for (int ch : w)
      blind += std::log(counts[ch] / total);
  blind /= static_cast<double>(held.size());
  const nlohmann::json j =
      run_json({example_exe("char_lm"), "vi", "--data", train, "--test", test, "--iterations",
                "100", "--batch-size", "100", "--net-learning-rate", "0.01", "--json"});
  CAPTURE(j.dump(), blind);
  CHECK(j["items"] == 1000);
  CHECK(j["test"]["items"] == 300);
  // About 26.2 nats per word blind; the README reports about 20.2 for the network.
  CHECK(double(j["test"]["elbo"]) > blind + 4);
}

TEST_CASE("sequences: the mixture of categoricals over words, by exact EM, beats the unigram "
          "model it contains",
          "[sequences][em]") {
  // The unigram model (each character's frequency) is the mixture with one class: its maximum
  // likelihood on the training words, and its held-out log p, exactly.
  const std::string train = example_path("data/words_train.csv"),
                    test = example_path("data/words_test.csv");
  auto column = [](const std::string& path) {
    const Table t = read_table(path);
    const int c = t.column_index("c");
    std::vector<int> out;
    for (const auto& row : t.rows)
      out.push_back(std::stoi(row[c]));
    return out;
  };
  const std::vector<int> train_chars = column(train), test_chars = column(test);
  std::vector<double> counts(27, 0);
  for (int ch : train_chars)
    counts[ch] += 1;
  const auto total = static_cast<double>(train_chars.size());
  double unigram_train = 0, unigram_test = 0;
  for (int ch : train_chars)
    unigram_train += std::log(counts[ch] / total);
  for (int ch : test_chars)
    unigram_test += std::log(counts[ch] / total);
  const std::string saved = scratch_path("char_mixture.json");
  const nlohmann::json fit = run_json({example_exe("char_mixture"), "optimize", "--method", "em",
                                       "--data", train, "--json", "--save", saved});
  const nlohmann::json held = run_json(
      {example_exe("char_mixture"), "filter", "--data", test, "--params", saved, "--json"});
  CAPTURE(fit.dump(), unigram_train / 1000, unigram_test / 300);
  CHECK(fit["converged"] == true);
  // A symmetric start would leave EM at the unigram model: the classes must have come apart
  // (0.14 nats per word: the letters' frequencies hardly depend on a word's class), and without
  // learning the training words by heart (the held-out words as likely as under the unigram).
  CHECK(double(fit["log_likelihood"]) / 1000 > unigram_train / 1000 + 0.05);
  CHECK(double(held["log_likelihood"]) / 300 > unigram_test / 300 - 0.1);
}

TEST_CASE("sequences: bad data is refused with its file and line", "[vi][sequences]") {
  const std::string& exe = model_exe("seq_lm", kLm);
  auto refused = [&](const std::string& name, const std::string& csv) {
    const std::string path = scratch_path(name);
    write_file(path, csv);
    const ProcessResult r = run_process({exe, "vi", "--data", path, "--iterations", "1"});
    CHECK(r.exit_code != 0);
    return r.err;
  };
  CHECK(refused("seq_no_series.csv", "c\n0\n1\n3\n")
            .find("seq_no_series.csv: observation 'c' is a sequence: the data needs a 'series' "
                  "column") != std::string::npos);
  CHECK(refused("seq_missing.csv", "series,c\na,0\na,\na,3\n")
            .find("seq_missing.csv:3: column 'c' is missing") != std::string::npos);
  CHECK(refused("seq_range.csv", "series,c\na,0\na,7\na,3\n").find("seq_range.csv:3") !=
        std::string::npos); // a token outside 0..3
  CHECK(refused("seq_split.csv", "series,c\na,0\nb,1\na,3\n").find("seq_split.csv:4") !=
        std::string::npos); // item a's rows apart
  // An item's other observations hold one value on every row of it.
  const std::string& with_x = model_exe("seq_lm_x", R"(model seq_lm_x {
  net lm : rnn_lm(vocab = 4, embedding = 4, hidden = 8);
  obs c[n] : sequence[4] ~ lm();
  obs x[n] ~ normal(0, 1);
}
)");
  const std::string path = scratch_path("seq_x.csv");
  write_file(path, "series,c,x\na,0,1.5\na,3,2\n");
  const ProcessResult r = run_process({with_x, "vi", "--data", path, "--iterations", "1"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("seq_x.csv:3: column 'x' of item 'a' differs from its first row (line 2)") !=
        std::string::npos);
  // A series column where no observation is a sequence: the items are the rows.
  const std::string& plain = model_exe("seq_plain", R"(model seq_plain {
  latent z[n] ~ normal(0, 1);
  obs y[n] ~ normal(z[n], 1);
}
)");
  write_file(path, "series,y\na,1\nb,2\n");
  const ProcessResult p = run_process({plain, "vi", "--data", path, "--iterations", "1"});
  CHECK(p.exit_code != 0);
  CHECK(p.err.find("has a series column, but no observation of model 'seq_plain' is a sequence") !=
        std::string::npos);
}

TEST_CASE("sequences: simulate draws a language model's sequences with the probabilities the "
          "model gives them",
          "[sequences][simulate]") {
  // A language model trained briefly on chain A (any weights would do: the sampler is checked
  // against the model's own probabilities, which vi computes from the same file).
  std::mt19937_64 rng(5);
  std::vector<std::vector<int>> train;
  for (int n = 0; n < 300; ++n)
    train.push_back(draw_sequence(kChainA, rng));
  const std::string& exe = model_exe("seq_lm", kLm);
  const std::string nets = scratch_path("lm_sim_nets.pt");
  run_ok({exe, "vi", "--data", write_items("lm_sim_train.csv", train), "--iterations", "100",
          "--net-learning-rate", "0.05", "--save-nets", nets});
  // Every sequence the sampler can give with --end 3 --length 3: ended at 1, 2 or 3 tokens, or
  // cut at 3 tokens without the end (whose probability is that of its prefix, which is what the
  // model gives a sequence of 3 tokens). Their probabilities sum to 1.
  std::vector<std::vector<int>> cells = {{3}};
  for (int a = 0; a < 3; ++a) {
    cells.push_back({a, 3});
    for (int b = 0; b < 3; ++b) {
      cells.push_back({a, b, 3});
      for (int c = 0; c < 3; ++c)
        cells.push_back({a, b, c});
    }
  }
  const std::string per_item = scratch_path("lm_sim_cells_out.csv");
  run_ok({exe, "vi", "--data", write_items("lm_sim_cells.csv", cells), "--iterations", "0",
          "--load-nets", nets, "--eval-samples", "1", "--out", per_item});
  const std::vector<double> log_p = read_table(per_item).column("elbo");
  REQUIRE(log_p.size() == cells.size());
  double total = 0;
  for (double l : log_p)
    total += std::exp(l);
  CHECK(std::abs(total - 1) < 1e-9);

  const int N = 20000;
  const std::string drawn = scratch_path("lm_sim_draws.csv");
  run_ok({exe, "simulate", "--T", std::to_string(N), "--load-nets", nets, "--end", "3", "--length",
          "3", "--seed", "9", "--out", drawn});
  // Long format, as the data: one row per token, `series` the item, `t` its position.
  const Table t = read_table(drawn);
  const std::vector<double> series = t.column("series"), position = t.column("t"),
                            token = t.column("c");
  std::vector<std::vector<int>> items(N);
  for (size_t r = 0; r < series.size(); ++r) {
    const auto n = static_cast<size_t>(series[r]);
    REQUIRE(n < items.size());
    CHECK(position[r] == static_cast<double>(items[n].size()));
    items[n].push_back(static_cast<int>(token[r]));
  }
  std::vector<double> count(cells.size(), 0);
  for (const auto& s : items) {
    const auto at = std::find(cells.begin(), cells.end(), s);
    REQUIRE(at != cells.end()); // nothing outside the cells: ends and cuts where asked
    count[static_cast<size_t>(at - cells.begin())] += 1;
  }
  // Pearson's chi-square over the 40 cells (39 degrees of freedom: 72.1 is its 0.999 quantile),
  // and each cell within 4.5 binomial sds.
  double chi2 = 0;
  for (size_t k = 0; k < cells.size(); ++k) {
    const double p = std::exp(log_p[k]), expected = N * p;
    CAPTURE(k, p, count[k]);
    CHECK(std::abs(count[k] - expected) <= 4.5 * std::sqrt(expected * (1 - p)) + 1);
    chi2 += std::pow(count[k] - expected, 2) / std::max(expected, 1e-12);
  }
  CHECK(chi2 < 72.1);
  // The same seed draws the same sequences whatever the thread count.
  const std::string again = scratch_path("lm_sim_draws_again.csv");
  run_ok({exe, "simulate", "--T", std::to_string(N), "--load-nets", nets, "--end", "3", "--length",
          "3", "--seed", "9", "--threads", "1", "--out", again});
  CHECK(read_file(again) == read_file(drawn));
  // What simulate refuses: a token the model does not have; --end on a model without sequences.
  ProcessResult r = run_process(
      {exe, "simulate", "--T", "3", "--load-nets", nets, "--end", "4", "--length", "3"});
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("simulate --end 4: not a token of the language model 'lm' (0..3)") !=
        std::string::npos);
}

TEST_CASE("sequences: a recurrent network's layers are stacked cells, each with its weights",
          "[vi][sequences]") {
  // A cell of H units over inputs of width W has G * H * (W + H + 2) weights (G = 4 gates for
  // an LSTM, 3 for a GRU; two bias vectors): each layer above the first adds G * H * (2 H + 2),
  // to the language model and to the encoder alike.
  std::mt19937_64 rng(5);
  std::vector<std::vector<int>> items;
  for (int n = 0; n < 20; ++n)
    items.push_back(draw_sequence(kChainA, rng));
  const int64_t H = 6;
  for (const auto& [cell, gates] : {std::pair{"lstm", 4}, std::pair{"gru", 3}}) {
    std::map<std::string, std::vector<int64_t>> weights;
    for (int layers : {1, 2, 3}) {
      const std::string name = fmt::format("seq_layers_{}_{}", cell, layers);
      const std::string source = fmt::format(R"(model {} {{
  net lm : rnn_lm(vocab = 4, embedding = 3, hidden = {}, layers = {}, cell = {});
  net enc : rnn(vocab = 4, outputs = 2, embedding = 3, hidden = {}, layers = {}, cell = {});
  latent z[n] ~ normal(0, 1);
  obs c[n] : sequence[4] ~ lm();
  obs x[n] ~ normal(z[n], 1);
  guide z[n] ~ normal(enc(c[n])[0], exp(enc(c[n])[1]));
}}
)",
                                             name, H, layers, cell, H, layers, cell);
      const std::string data = write_items(name + ".csv", items, std::vector<double>(20, 0.5));
      const nlohmann::json j = run_json({model_exe(name, source), "vi", "--data", data,
                                         "--iterations", "0", "--eval-samples", "2", "--json"});
      CAPTURE(j.dump());
      REQUIRE(j.contains("weights"));
      for (const char* net : {"lm", "enc"})
        weights[net].push_back(int64_t(j["weights"][net]));
    }
    for (const char* net : {"lm", "enc"}) {
      INFO(cell << " " << net);
      CHECK(weights[net][1] - weights[net][0] == gates * H * (2 * H + 2));
      CHECK(weights[net][2] - weights[net][1] == gates * H * (2 * H + 2));
    }
  }
}

TEST_CASE("sequences: an rnn reads a sequence in an observation's relation (text as a covariate)",
          "[vi][sequences]") {
  // x is the number of 1s in the item's sequence less 1, with noise of sd 0.5. A model whose x
  // reads an rnn of the sequence, and one whose x has a constant mean, share the sequence's
  // language model, which trains the same in both (declared first: the same start; no clipping
  // to couple it to the rest): the difference of their log-likelihoods is x's alone. With the
  // encoder counting, it is 2 (var(x) - mean((x - count + 1)^2)) nats per item (sd 0.5), which
  // the data give exactly.
  std::mt19937_64 rng(17);
  std::normal_distribution<double> noise(0, 0.5);
  std::vector<std::vector<int>> items;
  std::vector<double> x;
  double residual = 0;
  for (int n = 0; n < 300; ++n) {
    items.push_back(draw_sequence(kChainA, rng));
    const double mean =
        static_cast<double>(std::count(items.back().begin(), items.back().end(), 1)) - 1;
    x.push_back(mean + noise(rng));
    residual += std::pow(x.back() - mean, 2);
  }
  residual /= 300;
  const double x_mean = std::accumulate(x.begin(), x.end(), 0.0) / 300;
  double variance = 0;
  for (double v : x)
    variance += std::pow(v - x_mean, 2) / 300;
  const double gain = 2 * (variance - residual);
  const std::string data = write_items("text_covariate.csv", items, x);
  const char* with_text = R"(model seq_text {
  net lm : rnn_lm(vocab = 4, embedding = 4, hidden = 8, cell = gru);
  net enc : rnn(vocab = 4, outputs = 1, embedding = 4, hidden = 16, cell = gru);
  obs c[n] : sequence[4] ~ lm();
  obs x[n] ~ normal(enc(c[n])[0], 0.5);
}
)";
  const char* without = R"(model seq_no_text {
  net lm : rnn_lm(vocab = 4, embedding = 4, hidden = 8, cell = gru);
  param m = 0;
  obs c[n] : sequence[4] ~ lm();
  obs x[n] ~ normal(m, 0.5);
}
)";
  std::vector<double> elbo;
  for (const auto& [name, source] : {std::pair{"seq_text", with_text}, {"seq_no_text", without}}) {
    const nlohmann::json j =
        run_json({model_exe(name, source), "vi", "--data", data, "--iterations", "600",
                  "--schedule", "cosine", "--clip", "0", "--net-learning-rate", "0.02",
                  "--learning-rate", "0.05", "--eval-samples", "1", "--json"});
    CAPTURE(j.dump());
    elbo.push_back(double(j["elbo"]));
  }
  INFO("gain " << elbo[0] - elbo[1] << " against " << gain);
  CHECK(gain > 1); // the sequences carry x's mean
  CHECK(elbo[0] - elbo[1] == Approx(gain).epsilon(0.05));
  // simulate draws the sequences after the observations that would read them: refused
  const ProcessResult r = run_process({model_exe("seq_text", with_text), "simulate", "--T", "3"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("simulate: the network 'enc' reads the sequence c[n] in the model's "
                   "relations") != std::string::npos);
}
