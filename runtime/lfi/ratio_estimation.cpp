// Neural ratio estimation on LibTorch: see ratio_estimation.h.
#include "lfi/ratio_estimation.h"
#include "core/error.h"
#include "nn/adam_schedule.h"
#include "nn/mlp.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <sstream>

namespace ssm::lfi {

namespace {

using torch::indexing::Slice;

// NRE-A's loss on pairs (theta, x) against (theta[other], x); with the accuracy on both.
std::pair<torch::Tensor, double> binary_loss(nn::Mlp& net, const torch::Tensor& theta,
                                             const torch::Tensor& x, const torch::Tensor& other) {
  const torch::Tensor joint = net->forward(torch::cat({theta, x}, 1));
  const torch::Tensor shuffled = net->forward(torch::cat({theta.index_select(0, other), x}, 1));
  const torch::Tensor loss = torch::softplus(-joint).mean() + torch::softplus(shuffled).mean();
  const double accuracy = 0.5 * ((joint > 0).to(torch::kDouble).mean().item<double>() +
                                 (shuffled < 0).to(torch::kDouble).mean().item<double>());
  return {loss, accuracy};
}

// NRE-B's loss: row i against the atoms theta[i], theta[other[i, 0]], ... (the first is its own).
std::pair<torch::Tensor, double> contrastive_loss(nn::Mlp& net, const torch::Tensor& theta,
                                                  const torch::Tensor& x,
                                                  const torch::Tensor& other) {
  const int64_t B = theta.size(0), K = other.size(1) + 1, P = theta.size(1);
  const torch::Tensor atoms =
      torch::cat({torch::arange(B, torch::kInt64).unsqueeze(1), other}, 1); // [B, K]
  const torch::Tensor th = theta.index_select(0, atoms.reshape({-1})).reshape({B, K, P});
  const torch::Tensor xs = x.unsqueeze(1).expand({B, K, x.size(1)});
  const torch::Tensor logits =
      net->forward(torch::cat({th, xs}, 2).reshape({B * K, -1})).reshape({B, K});
  const torch::Tensor loss = (torch::logsumexp(logits, 1) - logits.select(1, 0)).mean();
  const double accuracy = (logits.argmax(1) == 0).to(torch::kDouble).mean().item<double>();
  return {loss, accuracy};
}

// For each of n rows another row of [0, n), uniformly: a permutation would leave some rows
// their own parameters, pairs labelled shuffled that are joint, which caps the learned ratio.
torch::Tensor shuffled_rows(int64_t n) {
  return (torch::arange(n, torch::kInt64) +
          torch::randint(1, std::max<int64_t>(n, 2), {n}, torch::kInt64))
      .remainder(n);
}

// For each of n rows, k - 1 other rows of [0, n), drawn uniformly among the others.
torch::Tensor other_rows(int64_t n, int64_t k) {
  const torch::Tensor shift = torch::randint(1, std::max<int64_t>(n, 2), {n, k - 1}, torch::kInt64);
  return (torch::arange(n, torch::kInt64).unsqueeze(1) + shift).remainder(n);
}

class RatioClassifier : public LoadedRatio {
public:
  RatioClassifier(nn::Mlp net, std::vector<std::string> params, std::vector<std::string> obs,
                  std::string simulator, torch::Tensor x_min, torch::Tensor x_max)
      : net_(std::move(net)), params_(std::move(params)), obs_(std::move(obs)),
        simulator_(std::move(simulator)), x_min_(std::move(x_min)), x_max_(std::move(x_max)) {
    net_->eval();
  }

  void log_ratio(const double* theta, int64_t n, const double* x, double* out) override {
    torch::NoGradGuard no_grad;
    const int64_t P = static_cast<int64_t>(params_.size()), D = static_cast<int64_t>(obs_.size());
    const torch::Tensor xo =
        torch::from_blob(const_cast<double*>(x), {1, D}, torch::kDouble).clone();
    constexpr int64_t kChunk = 65536;
    for (int64_t begin = 0; begin < n; begin += kChunk) {
      const int64_t m = std::min(kChunk, n - begin);
      const torch::Tensor th =
          torch::from_blob(const_cast<double*>(theta + begin * P), {m, P}, torch::kDouble);
      const torch::Tensor logit =
          net_->forward(torch::cat({th, xo.expand({m, D})}, 1)).reshape({m}).contiguous();
      std::copy(logit.data_ptr<double>(), logit.data_ptr<double>() + m, out + begin);
    }
  }

  std::vector<std::string> check_observation(const std::vector<double>& x) const override {
    std::vector<std::string> out;
    for (size_t k = 0; k < x.size() && k < obs_.size(); ++k) {
      const double lo = x_min_[k].item<double>(), hi = x_max_[k].item<double>();
      if (x[k] < lo || x[k] > hi)
        out.push_back(fmt::format("the observed {} = {} is outside the range [{}, {}] of the "
                                  "simulations the ratio was trained on: the classifier "
                                  "extrapolates there",
                                  obs_[k], x[k], lo, hi));
    }
    return out;
  }
  const std::vector<std::string>& param_columns() const override { return params_; }
  const std::vector<std::string>& obs_columns() const override { return obs_; }
  std::string simulator() const override { return simulator_; }
  const std::vector<double>& data_values() const override { return data_values_; }
  std::vector<double> data_values_;

private:
  nn::Mlp net_;
  std::vector<std::string> params_, obs_;
  std::string simulator_;
  torch::Tensor x_min_, x_max_;
};

torch::Tensor strings_tensor(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& s : names)
    joined += s + '\n';
  return torch::tensor(std::vector<int64_t>(joined.begin(), joined.end()), torch::kInt64);
}

std::vector<std::string> tensor_strings(const torch::Tensor& t) {
  std::vector<std::string> out;
  std::string current;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const char ch = static_cast<char>(t[i].item<int64_t>());
    if (ch == '\n')
      out.push_back(std::exchange(current, ""));
    else
      current += ch;
  }
  return out;
}

} // namespace

RatioTrainingReport train_ratio(const RatioTrainingData& data, const RatioTrainingOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t n = data.n, P = data.n_params, D = data.n_obs;
  if (o.variant != "a" && o.variant != "b")
    throw Error(fmt::format("nre: unknown variant '{}' (expected a or b)", o.variant));
  if (o.variant == "b" && o.atoms < 2)
    throw Error("nre: --atoms must be at least 2");
  const int64_t n_val = static_cast<int64_t>(std::floor(o.validation_fraction * n));
  const int64_t n_train = n - n_val;
  if (n_train < 2 || n_val < 2)
    throw Error(fmt::format("nre: {} simulations leave {} for training and {} for validation; "
                            "at least 2 of each are needed",
                            n, n_train, n_val));
  torch::set_num_threads(std::max(1, o.threads));
  torch::manual_seed(o.seed);
  // Shuffled before the split: a file of pairs need not be in random order.
  const torch::Tensor rows = torch::randperm(n, torch::kInt64);
  const torch::Tensor theta_all =
      torch::from_blob(const_cast<double*>(data.theta), {n, P}, torch::kDouble)
          .index_select(0, rows);
  const torch::Tensor x_all =
      torch::from_blob(const_cast<double*>(data.x), {n, D}, torch::kDouble).index_select(0, rows);
  const torch::Tensor theta = theta_all.index({Slice(0, n_train)}),
                      x = x_all.index({Slice(0, n_train)});
  const torch::Tensor theta_val = theta_all.index({Slice(n_train, n)}),
                      x_val = x_all.index({Slice(n_train, n)});

  nn::MlpSpec spec;
  spec.inputs = P + D;
  spec.outputs = 1;
  spec.hidden = o.hidden;
  spec.activation = o.activation;
  spec.single = true; // a classifier needs no float64
  nn::Mlp net(spec);
  const torch::Tensor joint = torch::cat({theta, x}, 1);
  net->set_standardisation(joint.mean(0), joint.std(0));
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(o.learning_rate));

  // Fixed validation contrasts, so that epochs compare on the same pairs.
  const torch::Tensor val_shuffled = shuffled_rows(n_val);
  const torch::Tensor val_other = other_rows(n_val, o.atoms);
  auto loss_on = [&](const torch::Tensor& th, const torch::Tensor& xx,
                     const torch::Tensor& shuffled, const torch::Tensor& other) {
    return o.variant == "a" ? binary_loss(net, th, xx, shuffled)
                            : contrastive_loss(net, th, xx, other);
  };

  RatioTrainingReport report;
  report.train_rows = n_train;
  report.validation_rows = n_val;
  const int64_t batch =
      o.batch_size > 0
          ? o.batch_size
          : std::max<int64_t>(50, (n_train + o.max_epoch_steps - 1) / o.max_epoch_steps);
  report.batch_size = batch;
  // The patience in epochs: --patience, but at least --patience-steps Adam steps.
  const int64_t steps_per_epoch = (n_train + batch - 1) / batch;
  report.patience_epochs =
      std::max(o.patience, (o.patience_steps + steps_per_epoch - 1) / steps_per_epoch);
  double best = INFINITY;
  std::string best_state;
  int64_t since_best = 0;
  for (int64_t epoch = 1; epoch <= o.max_epochs; ++epoch) {
    net->train();
    const torch::Tensor order = torch::randperm(n_train, torch::kInt64);
    double total = 0;
    int64_t batches = 0;
    for (int64_t b = 0; b + 1 < n_train; b += batch) {
      const torch::Tensor rows = order.index({Slice(b, std::min(n_train, b + batch))});
      const int64_t m = rows.size(0);
      if (m < 2)
        break;
      const torch::Tensor th = theta.index_select(0, rows), xx = x.index_select(0, rows);
      auto [loss, accuracy] = o.variant == "a" ? loss_on(th, xx, shuffled_rows(m), {})
                                               : loss_on(th, xx, {}, other_rows(m, o.atoms));
      adam.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(net->parameters(), o.clip);
      adam.step();
      total += loss.item<double>();
      ++batches;
    }
    report.steps += batches;
    if (!std::isfinite(total))
      throw Error(fmt::format("nre: the training loss is not finite at epoch {}; try a smaller "
                              "--learning-rate",
                              epoch));
    net->eval();
    torch::NoGradGuard no_grad;
    auto [val_loss, val_accuracy] = loss_on(theta_val, x_val, val_shuffled, val_other);
    const double v = val_loss.item<double>();
    report.epochs = epoch;
    if (v < best) {
      best = v;
      report.best_epoch = epoch;
      report.train_loss = total / std::max<int64_t>(1, batches);
      report.validation_loss = v;
      report.validation_accuracy = val_accuracy;
      best_state = net->save();
      since_best = 0;
    } else if (++since_best >= report.patience_epochs) {
      // A plateau: a smaller step finds the sharper optimum a thin posterior needs, then stop.
      if (report.decays == o.decays) {
        report.stopped_early = true;
        break;
      }
      ++report.decays;
      nn::set_learning_rate(adam, {o.learning_rate}, std::ldexp(1.0, -report.decays));
      since_best = 0;
    }
    if (o.progress)
      o.progress(epoch - 1, o.max_epochs);
  }
  if (best_state.empty())
    throw Error(fmt::format("nre: the validation loss was never finite in {} epochs; try a "
                            "smaller --learning-rate",
                            report.epochs));
  // The file: the best network, and what the ratio is of.
  std::istringstream best_bytes(best_state);
  torch::serialize::InputArchive best_archive;
  best_archive.load_from(best_bytes);
  nn::Mlp best_net = nn::read_mlp(best_archive);
  torch::serialize::OutputArchive archive;
  archive.write("format", torch::tensor(kRatioFormatVersion));
  archive.write("variant", torch::tensor(static_cast<int64_t>(o.variant == "b")));
  archive.write("params", strings_tensor(data.param_columns));
  archive.write("obs", strings_tensor(data.obs_columns));
  archive.write("simulator", strings_tensor({data.simulator}));
  archive.write("data_values", torch::tensor(data.data_values, torch::kDouble));
  archive.write("x_min", std::get<0>(x_all.min(0)));
  archive.write("x_max", std::get<0>(x_all.max(0)));
  archive.write("validation_loss", torch::tensor(report.validation_loss, torch::kDouble));
  torch::serialize::OutputArchive net_archive;
  best_net->write(net_archive);
  archive.write("classifier", net_archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  report.bytes = bytes.str();
  report.final_learning_rate = std::ldexp(o.learning_rate, -report.decays);
  report.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

std::unique_ptr<LoadedRatio> open_ratio(const std::string& bytes, const std::string& source) {
  // One thread, whatever --threads: a matrix product's rounding may depend on how it is split,
  // and the samplers' decisions on the ratio's last bits.
  torch::set_num_threads(1);
  std::istringstream in(bytes);
  torch::serialize::InputArchive archive;
  archive.load_from(in);
  torch::Tensor format, params, obs, simulator, x_min, x_max;
  if (!archive.try_read("format", format) || format.item<int64_t>() != kRatioFormatVersion)
    throw Error(fmt::format("{}: not a ratio of format {} (saved by another ssmc's nre?)", source,
                            kRatioFormatVersion));
  archive.read("params", params);
  archive.read("obs", obs);
  archive.read("simulator", simulator);
  archive.read("x_min", x_min);
  archive.read("x_max", x_max);
  torch::Tensor data_values;
  archive.read("data_values", data_values);
  torch::serialize::InputArchive net_archive;
  archive.read("classifier", net_archive);
  nn::Mlp net = nn::read_mlp(net_archive);
  const std::vector<std::string> names = tensor_strings(simulator);
  auto ratio =
      std::make_unique<RatioClassifier>(std::move(net), tensor_strings(params), tensor_strings(obs),
                                        names.empty() ? "" : names[0], x_min, x_max);
  const torch::Tensor values = data_values.contiguous();
  ratio->data_values_.assign(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  return ratio;
}

} // namespace ssm::lfi
