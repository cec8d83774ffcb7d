// The backward-factorised Gaussian guide: see backward_guide.h.
#include "vsmooth/backward_guide.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ssm::vsmooth {

namespace {

using torch::indexing::Slice;

torch::Tensor symmetric(const torch::Tensor& m) {
  return 0.5 * (m + m.transpose(-2, -1));
}

// The raw square matrix whose cholesky_factor is diag(sd).
torch::Tensor raw_diagonal(const torch::Tensor& sd) {
  return torch::diag(torch::log(sd));
}

// Per column of y (NaN missing): mean and standard deviation of the values present (0 and 1 for a
// column without two of them, and a floor of 1e-3 of its scale on the deviation).
std::pair<torch::Tensor, torch::Tensor> column_moments(const torch::Tensor& y) {
  const torch::Tensor seen = ~torch::isnan(y);
  const torch::Tensor count = seen.sum(0).to(torch::kFloat64);
  const torch::Tensor values = torch::where(seen, y, torch::zeros_like(y));
  const torch::Tensor mean =
      torch::where(count > 0, values.sum(0) / count.clamp_min(1), torch::zeros_like(count));
  const torch::Tensor centred = torch::where(seen, y - mean, torch::zeros_like(y));
  torch::Tensor sd = torch::sqrt(centred.square().sum(0) / (count - 1).clamp_min(1));
  sd = torch::where(count > 1, sd.clamp_min(1e-3 * (mean.abs() + 1)), torch::ones_like(sd));
  return {mean, sd};
}

} // namespace

torch::Tensor BackwardGuideImpl::encoder_view(const torch::Tensor& y) const {
  if (spec_.columns.empty())
    return y;
  return y.index_select(-1, torch::tensor(spec_.columns, torch::kInt64));
}

// The network's inputs: the observation with missing components as 0, and (mask) which are
// present.
torch::Tensor BackwardGuideImpl::network_inputs(const torch::Tensor& y_read) const {
  const torch::Tensor seen = ~torch::isnan(y_read);
  const torch::Tensor values = torch::where(seen, y_read, torch::zeros_like(y_read));
  return spec_.mask ? torch::cat({values, seen.to(torch::kFloat64)}, 1) : values;
}

torch::Tensor cholesky_factor(const torch::Tensor& raw) {
  return torch::tril(raw, -1) + torch::diag_embed(torch::exp(torch::diagonal(raw, 0, -2, -1)));
}

torch::Tensor gaussian_log_density(const torch::Tensor& x, const torch::Tensor& mean,
                                   const torch::Tensor& chol) {
  const int64_t p = x.size(-1);
  const torch::Tensor diff = (x - mean).unsqueeze(-1);
  const std::vector<int64_t> batch(diff.sizes().begin(), diff.sizes().end() - 2);
  std::vector<int64_t> chol_shape = batch;
  chol_shape.push_back(p);
  chol_shape.push_back(p);
  const torch::Tensor z =
      torch::linalg_solve_triangular(chol.expand(chol_shape), diff, /*upper=*/false);
  const torch::Tensor log_det = 2 * torch::log(torch::diagonal(chol, 0, -2, -1)).sum(-1);
  return -0.5 * (static_cast<double>(p) * kLog2Pi + log_det + z.square().sum({-2, -1}));
}

BackwardGuideImpl::BackwardGuideImpl(const GuideSpec& spec) : spec_(spec) {
  const int64_t p = spec.states, m = spec.observations;
  prior_mean_ = register_parameter("prior_mean", torch::zeros({p}, f64()));
  prior_chol_ = register_parameter("prior_chol", torch::zeros({p, p}, f64()));
  transition_ = register_parameter("transition", torch::zeros({p, p}, f64()));
  transition_offset_ = register_parameter("transition_offset", torch::zeros({p}, f64()));
  transition_chol_ = register_parameter("transition_chol", torch::zeros({p, p}, f64()));
  if (spec.encoder == "linear") {
    emission_ = register_parameter("emission", torch::zeros({m, p}, f64()));
    emission_offset_ = register_parameter("emission_offset", torch::zeros({m}, f64()));
    emission_chol_ = register_parameter("emission_chol", torch::zeros({m, m}, f64()));
  } else if (spec.encoder == "mlp") {
    network_ =
        register_module("network", nn::Mlp(nn::MlpSpec{spec.mask ? 2 * m : m, 2 * p, spec.hidden,
                                                       spec.activation, /*single=*/false}));
  } else if (spec.encoder == "free") {
    if (spec.steps < 1)
      throw Error("the free encoder needs the series' length");
    free_z_ = register_parameter("free_z", torch::zeros({spec.steps, p}, f64()));
    free_chol_ = register_parameter("free_chol", torch::zeros({spec.steps, p, p}, f64()));
  } else {
    throw Error(fmt::format("unknown encoder '{}' (expected linear, mlp or free)", spec.encoder));
  }
}

GuideTransition BackwardGuideImpl::transition(const torch::Tensor& raw_A, const torch::Tensor& a,
                                              const torch::Tensor& raw_chol) const {
  const torch::Tensor L = factor(raw_chol);
  return {spec_.diagonal ? torch::diag_embed(torch::diagonal(raw_A, 0, -2, -1)) : raw_A, a,
          L.matmul(L.transpose(-2, -1))};
}

torch::Tensor BackwardGuideImpl::factor(const torch::Tensor& raw) const {
  return spec_.diagonal ? torch::diag_embed(torch::exp(torch::diagonal(raw, 0, -2, -1)))
                        : cholesky_factor(raw);
}

BackwardKernel backward_kernel(const torch::Tensor& prev_mean, const torch::Tensor& prev_cov,
                               const GuideTransition& tr) {
  // The RTS gain Sigma_{t-1} A' P_t^-1 (P_t the predicted covariance) and the kernel's noise
  // (I - gain A) Sigma_{t-1}.
  const torch::Tensor A_cov = tr.A.matmul(prev_cov); // A Sigma_{t-1}
  const torch::Tensor pred_mean = tr.A.matmul(prev_mean.unsqueeze(-1)).squeeze(-1) + tr.a;
  const torch::Tensor pred_cov = symmetric(A_cov.matmul(tr.A.transpose(-2, -1)) + tr.Q);
  BackwardKernel k;
  k.gain = torch::cholesky_solve(A_cov, torch::linalg_cholesky(pred_cov)).transpose(-2, -1);
  k.offset = prev_mean - k.gain.matmul(pred_mean.unsqueeze(-1)).squeeze(-1);
  k.noise = symmetric(prev_cov - k.gain.matmul(A_cov));
  return k;
}

BackwardGuideImpl::BackwardGuideImpl(const GuideSpec& spec, const torch::Tensor& y_model,
                                     uint64_t seed)
    : BackwardGuideImpl(spec) {
  torch::NoGradGuard no_grad;
  const torch::Tensor y = encoder_view(y_model);
  const int64_t p = spec.states;
  transition_.copy_(0.9 * torch::eye(p, f64()));
  transition_chol_.copy_(raw_diagonal(torch::full({p}, std::sqrt(0.1), f64())));
  const auto [mean, sd] = column_moments(y);
  if (spec.encoder == "linear") {
    const torch::Generator gen = at::detail::createCPUGenerator(seed);
    emission_.copy_(torch::randn({spec.observations, p}, gen, f64()) *
                    (0.1 / std::sqrt(static_cast<double>(p))));
    emission_offset_.copy_(mean);
    emission_chol_.copy_(raw_diagonal(sd));
  } else if (network_) {
    const torch::Tensor inputs = network_inputs(y);
    network_->set_standardisation(inputs.mean(0), inputs.std(0));
    // e(y) = (0, diag(1)) to start: the softplus's argument log(e^0.5 - 1) gives precision 1.
    std::vector<double> start(2 * p, std::log(std::exp(0.5) - 1));
    std::fill(start.begin(), start.begin() + p, 0.0);
    network_->start_at(start);
  }
}

void BackwardGuideImpl::start_from(const ModelMatrices& m) {
  torch::NoGradGuard no_grad;
  // The raw parameter of a covariance: its Cholesky factor, the diagonal through log (the
  // diagonal family: log of the standard deviations, the variances kept, the correlations
  // dropped); one that is not positive definite (a state without noise) leaves the start.
  // A matrix that is missing or not finite (a model without transitions, a sampler's NaN) leaves
  // the start too.
  auto usable = [](const torch::Tensor& v) {
    return v.defined() && torch::isfinite(v).all().item<bool>();
  };
  auto set = [&](torch::Tensor& raw, const torch::Tensor& v) {
    if (usable(v))
      raw.copy_(v);
  };
  auto set_cholesky = [&](torch::Tensor& raw, const torch::Tensor& S) {
    if (!usable(S))
      return;
    if (spec_.diagonal) {
      const torch::Tensor var = torch::diagonal(S);
      if ((var > 0).all().item<bool>())
        raw.copy_(torch::diag(0.5 * torch::log(var)));
      return;
    }
    const auto [L, info] = torch::linalg_cholesky_ex(S);
    if (info.item<int64_t>() != 0)
      return;
    raw.copy_(torch::tril(L, -1) + torch::diag(torch::log(torch::diagonal(L))));
  };
  set(prior_mean_, m.m0);
  set_cholesky(prior_chol_, m.P0);
  set(transition_, m.F); // the diagonal family reads only its diagonals
  set(transition_offset_, m.c);
  set_cholesky(transition_chol_, m.Q);
  if (spec_.encoder == "linear" && m.H.defined() && m.d.defined() && m.R.defined()) {
    set(emission_, encoder_view(m.H.t()).t());
    set(emission_offset_, encoder_view(m.d));
    set_cholesky(emission_chol_, encoder_view(encoder_view(m.R).t()));
  }
}

void BackwardGuideImpl::start_encoder_at(const torch::Tensor& H_model, const torch::Tensor& d_model,
                                         const torch::Tensor& R_model,
                                         const torch::Tensor& y_model) {
  if (spec_.encoder == "linear" || !H_model.defined() || !d_model.defined() || !R_model.defined())
    return;
  if (free_z_.defined())
    return start_free_at(H_model, d_model, R_model, y_model);
  if (H_model.dim() == 3) // per step: the network is fitted to the first step's emission
    return start_encoder_at(H_model[0], d_model[0], R_model[0], y_model);
  const torch::Tensor H = encoder_view(H_model.t()).t(), d = encoder_view(d_model);
  const torch::Tensor R = encoder_view(encoder_view(R_model).t()), y = encoder_view(y_model);
  const torch::Tensor r = torch::diagonal(R);
  if (!torch::isfinite(H).all().item<bool>() || !torch::isfinite(d).all().item<bool>() ||
      !(r > 0).all().item<bool>() || !torch::isfinite(r).all().item<bool>())
    return;
  start_network_at(H, d, R, y);
}

void BackwardGuideImpl::start_free_at(const torch::Tensor& H_model, const torch::Tensor& d_model,
                                      const torch::Tensor& R_model, const torch::Tensor& y_model) {
  torch::NoGradGuard no_grad;
  const int64_t p = spec_.states;
  if (y_model.size(0) != spec_.steps)
    return;
  const bool per_step = H_model.dim() == 3; // [T, m, p]: a time-varying model's, else [m, p]
  if (per_step && (H_model.size(0) < spec_.steps || d_model.size(0) < spec_.steps ||
                   R_model.size(0) < spec_.steps))
    return;
  for (int64_t t = 0; t < spec_.steps; ++t) {
    const torch::Tensor H = encoder_view((per_step ? H_model[t] : H_model).t()).t();
    const torch::Tensor d = encoder_view(per_step ? d_model[t] : d_model);
    const torch::Tensor R = encoder_view(encoder_view(per_step ? R_model[t] : R_model).t());
    const torch::Tensor y_t = encoder_view(y_model[t]);
    if (!torch::isfinite(H).all().item<bool>() || !torch::isfinite(d).all().item<bool>() ||
        !torch::isfinite(R).all().item<bool>())
      continue;
    const torch::Tensor seen = ~torch::isnan(y_t);
    if (!seen.any().item<bool>())
      continue; // a step with nothing observed is not updated
    const torch::Tensor idx = torch::nonzero(seen).squeeze(1);
    const torch::Tensor Hs = H.index_select(0, idx);
    const torch::Tensor Rs = R.index_select(0, idx).index_select(1, idx);
    const torch::Tensor RinvH = torch::linalg_solve(Rs, Hs);
    torch::Tensor precision = symmetric(Hs.t().matmul(RinvH));
    const torch::Tensor eta = RinvH.t().matmul(y_t.index_select(0, idx) - d.index_select(0, idx));
    const double ridge = 1e-9 * (torch::diagonal(precision).abs().max().item<double>() + 1);
    precision = precision + ridge * torch::eye(p, f64());
    if (spec_.diagonal) {
      const torch::Tensor sd = torch::sqrt(torch::diagonal(precision));
      free_chol_[t].copy_(torch::diag(torch::log(sd)));
      free_z_[t].copy_(eta / sd);
      continue;
    }
    const auto [L, info] = torch::linalg_cholesky_ex(precision);
    if (info.item<int64_t>() != 0)
      continue;
    free_chol_[t].copy_(torch::tril(L, -1) + torch::diag(torch::log(torch::diagonal(L))));
    free_z_[t].copy_(
        torch::linalg_solve_triangular(L, eta.unsqueeze(1), /*upper=*/false).squeeze(1));
  }
}

void BackwardGuideImpl::start_network_at(const torch::Tensor& H, const torch::Tensor& d,
                                         const torch::Tensor& R, const torch::Tensor& y) {
  const torch::Tensor r = torch::diagonal(R);
  // Every row with a component present, its targets from the components present (the mask is
  // the network's input too): eta = H' R^-1 (y - d) and the diagonal of H' R^-1 H over them.
  torch::Tensor rows = y.index({(~torch::isnan(y)).any(1)});
  if (rows.size(0) < 2)
    return;
  if (rows.size(0) > 2000) // enough to fit a map of y; a fixed stride keeps it reproducible
    rows = rows.index({torch::arange(0, rows.size(0), rows.size(0) / 2000)});
  const torch::Tensor seen = ~torch::isnan(rows);
  const torch::Tensor w = seen.to(torch::kFloat64) / r; // [n, m]: R^-1 on the components present
  const torch::Tensor eta = (torch::where(seen, rows - d, torch::zeros_like(rows)) * w).matmul(H);
  const torch::Tensor precision =
      w.matmul(H.square()).clamp_min(1e-6 * (1 / r).max().item<double>());
  // The network's second half is softplus^-1(precision / 2).
  const torch::Tensor half = precision / 2;
  const torch::Tensor target = torch::cat({eta, half + torch::log(-torch::expm1(-half))}, 1);
  const torch::Tensor scale = target.std(0).clamp_min(1e-3) + target.abs().mean(0);
  const torch::Tensor inputs = network_inputs(rows);
  torch::optim::Adam optimizer(network_->parameters(), torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 500; ++step) {
    optimizer.zero_grad();
    const torch::Tensor loss = ((network_->forward(inputs) - target) / scale).square().mean();
    loss.backward();
    optimizer.step();
  }
}

void BackwardGuideImpl::update(torch::Tensor& mean, torch::Tensor& cov, const torch::Tensor& z,
                               const torch::Tensor& H, const torch::Tensor& noise) {
  const torch::Tensor HC = H.matmul(cov);
  const torch::Tensor S_chol = torch::linalg_cholesky(HC.matmul(H.transpose(-2, -1)) + noise);
  const torch::Tensor gain_t = torch::cholesky_solve(HC, S_chol); // S^-1 H C = K'
  const torch::Tensor innovation = z - H.matmul(mean.unsqueeze(-1)).squeeze(-1);
  mean = mean + gain_t.transpose(-2, -1).matmul(innovation.unsqueeze(-1)).squeeze(-1);
  cov = symmetric(cov - HC.transpose(-2, -1).matmul(gain_t));
}

BackwardGuideImpl::Encoded BackwardGuideImpl::encode(const torch::Tensor& y_model) {
  const torch::Tensor y = encoder_view(y_model);
  // For the linear encoder z = y - d with (B, R) restricted to the components present; for the
  // network's e(y) = (eta, -diag(lambda) / 2), z = eta / lambda with H = I and noise
  // diag(1 / lambda), the same update in covariance form without inverting cov.
  const int64_t p = spec_.states;
  Encoded e;
  e.seen = ~torch::isnan(y);
  const torch::Tensor count = e.seen.sum(1).contiguous();
  e.n_seen.assign(count.data_ptr<int64_t>(), count.data_ptr<int64_t>() + count.numel());
  if (free_z_.defined()) {
    if (y.size(0) != spec_.steps)
      throw Error(fmt::format("the guide's free encoder holds parameters for {} steps, and the "
                              "series has {}: a non-amortised guide serves the series it was "
                              "trained on",
                              spec_.steps, y.size(0)));
    e.z = free_z_;
    e.H = factor(free_chol_).transpose(-2, -1);
  } else if (network_) {
    const torch::Tensor encoded = network_->forward(network_inputs(y));
    const torch::Tensor precision = 2 * torch::softplus(encoded.index({Slice(), Slice(p, 2 * p)}));
    e.z = encoded.index({Slice(), Slice(0, p)}) / precision;
    e.noise = torch::diag_embed(1 / precision);
  } else {
    const torch::Tensor R_chol = factor(emission_chol_);
    e.R = R_chol.matmul(R_chol.t());
    e.z = y - emission_offset_;
  }
  return e;
}

void BackwardGuideImpl::observe(const Encoded& e, int64_t t, torch::Tensor& mean,
                                torch::Tensor& cov) const {
  if (e.n_seen[t] == 0)
    return; // nothing observed: q_t = q_{t|t-1}
  if (e.H.defined())
    return update(mean, cov, e.z[t], e.H[t], torch::eye(spec_.states, f64()));
  if (network_)
    return update(mean, cov, e.z[t], torch::eye(spec_.states, f64()), e.noise[t]);
  if (e.n_seen[t] == spec_.observations)
    return update(mean, cov, e.z[t], emission_, e.R);
  const torch::Tensor idx = torch::nonzero(e.seen[t]).squeeze(1);
  update(mean, cov, e.z[t].index_select(0, idx), emission_.index_select(0, idx),
         e.R.index_select(0, idx).index_select(1, idx));
}

BackwardGuideImpl::StepInputs BackwardGuideImpl::step_inputs(bool first,
                                                             const torch::Tensor& y_model_t) {
  if (free_z_.defined())
    throw Error("the online recursions need an amortised encoder (linear or mlp): the free "
                "encoder's parameters grow with the series");
  const torch::Tensor y_t = encoder_view(y_model_t);
  StepInputs s;
  const std::vector<torch::Tensor> all = parameters();
  auto add = [&](const torch::Tensor& p) {
    s.values.push_back(p.detach());
    int64_t k = 0;
    while (!all[k].is_same(p))
      ++k;
    s.parameter.push_back(k);
  };
  if (first) {
    add(prior_mean_);
    add(prior_chol_);
  } else {
    add(transition_);
    add(transition_offset_);
    add(transition_chol_);
  }
  if (network_) {
    s.network_output = network_->forward(network_inputs(y_t.unsqueeze(0)))[0];
    s.values.push_back(s.network_output.detach());
    s.parameter.push_back(-1);
  } else {
    add(emission_);
    add(emission_offset_);
    add(emission_chol_);
  }
  return s;
}

std::pair<torch::Tensor, torch::Tensor>
BackwardGuideImpl::step_from(const torch::Tensor& prev_mean, const torch::Tensor& prev_cov,
                             const std::vector<torch::Tensor>& v,
                             const torch::Tensor& y_model_t) const {
  const int64_t p = spec_.states;
  const torch::Tensor y_t = encoder_view(y_model_t);
  torch::Tensor mean, cov;
  size_t at = 0;
  if (!prev_mean.defined()) {
    const torch::Tensor L_0 = factor(v[1]);
    mean = v[0];
    cov = L_0.matmul(L_0.transpose(-2, -1));
    at = 2;
  } else {
    const GuideTransition tr = transition(v[0], v[1], v[2]);
    mean = tr.A.matmul(prev_mean.unsqueeze(-1)).squeeze(-1) + tr.a;
    cov = symmetric(tr.A.matmul(prev_cov).matmul(tr.A.transpose(-2, -1)) + tr.Q);
    at = 3;
  }
  const torch::Tensor seen = ~torch::isnan(y_t);
  const int64_t n_seen = seen.sum().item<int64_t>();
  if (n_seen == 0)
    return {mean, cov}; // nothing observed: q_t = q_{t|t-1}
  if (network_) {
    const torch::Tensor& o = v[at];
    const torch::Tensor precision = 2 * torch::softplus(o.narrow(-1, p, p));
    update(mean, cov, o.narrow(-1, 0, p) / precision, torch::eye(p, f64()),
           torch::diag_embed(1 / precision));
    return {mean, cov};
  }
  const torch::Tensor &B = v[at], &d = v[at + 1];
  const torch::Tensor R_chol = factor(v[at + 2]);
  const torch::Tensor R = R_chol.matmul(R_chol.transpose(-2, -1));
  const torch::Tensor z = torch::where(seen, y_t, torch::zeros_like(y_t)) - d;
  if (n_seen == spec_.observations) {
    update(mean, cov, z, B, R);
  } else {
    const torch::Tensor idx = torch::nonzero(seen).squeeze(1);
    update(mean, cov, z.index_select(-1, idx), B.index_select(-2, idx),
           R.index_select(-2, idx).index_select(-1, idx));
  }
  return {mean, cov};
}

GuidePass BackwardGuideImpl::run(const torch::Tensor& y, bool smoothing) {
  const int64_t T = y.size(0), p = spec_.states;
  const GuideTransition tr = transition(transition_, transition_offset_, transition_chol_);
  const torch::Tensor L_0 = factor(prior_chol_);
  const Encoded e = encode(y);
  std::vector<torch::Tensor> means, covs;
  torch::Tensor mean = prior_mean_, cov = L_0.matmul(L_0.t());
  for (int64_t t = 0; t < T; ++t) {
    if (t > 0) {
      mean = tr.A.matmul(mean) + tr.a;
      cov = symmetric(tr.A.matmul(cov).matmul(tr.A.t()) + tr.Q);
    }
    observe(e, t, mean, cov);
    means.push_back(mean);
    covs.push_back(cov);
  }
  GuidePass pass;
  pass.mean = torch::stack(means);
  pass.cov = torch::stack(covs);
  if (T > 1) {
    const BackwardKernel k =
        backward_kernel(pass.mean.index({Slice(0, T - 1)}), pass.cov.index({Slice(0, T - 1)}), tr);
    pass.gain = k.gain;
    pass.offset = k.offset;
    pass.noise = k.noise;
    pass.noise_chol = torch::linalg_cholesky(pass.noise);
  } else {
    pass.gain = torch::zeros({0, p, p}, f64());
    pass.offset = torch::zeros({0, p}, f64());
    pass.noise = pass.noise_chol = torch::zeros({0, p, p}, f64());
  }
  if (smoothing) {
    std::vector<torch::Tensor> s_mean(T), s_cov(T), cross(std::max<int64_t>(T - 1, 0));
    s_mean[T - 1] = means[T - 1];
    s_cov[T - 1] = covs[T - 1];
    for (int64_t t = T - 1; t >= 1; --t) {
      const torch::Tensor G = pass.gain[t - 1];
      s_mean[t - 1] = G.matmul(s_mean[t]) + pass.offset[t - 1];
      cross[t - 1] = G.matmul(s_cov[t]);
      s_cov[t - 1] = symmetric(cross[t - 1].matmul(G.t()) + pass.noise[t - 1]);
    }
    pass.smooth_mean = torch::stack(s_mean);
    pass.smooth_cov = torch::stack(s_cov);
    pass.cross_cov = T > 1 ? torch::stack(cross) : torch::zeros({0, p, p}, f64());
  }
  return pass;
}

std::string BackwardGuideImpl::save() const {
  torch::serialize::OutputArchive archive;
  std::vector<int64_t> shape = {spec_.states, spec_.observations,
                                (network_ ? 1 : 0) + (spec_.diagonal ? 2 : 0) +
                                    (free_z_.defined() ? 4 : 0)};
  shape.insert(shape.end(), spec_.hidden.begin(), spec_.hidden.end());
  archive.write("backward_guide", torch::tensor(shape, torch::kInt64));
  // What the encoder reads, and how: the mask flag, the activation's index, the columns. (A guide
  // saved before these existed has none: the built-in network's, over every column.)
  const std::vector<std::string>& activations = nn::mlp_activations();
  std::vector<int64_t> inputs = {
      spec_.mask ? 1 : 0,
      std::find(activations.begin(), activations.end(), spec_.activation) - activations.begin()};
  inputs.insert(inputs.end(), spec_.columns.begin(), spec_.columns.end());
  archive.write("encoder_inputs", torch::tensor(inputs, torch::kInt64));
  if (free_z_.defined())
    archive.write("free_steps", torch::tensor({spec_.steps}, torch::kInt64));
  torch::serialize::OutputArchive parameters;
  torch::nn::Module::save(parameters);
  archive.write("parameters", parameters);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

std::shared_ptr<BackwardGuideImpl> BackwardGuideImpl::load(const std::string& bytes,
                                                           const std::string& source) {
  try {
    torch::serialize::InputArchive archive;
    std::istringstream in(bytes);
    archive.load_from(in);
    torch::Tensor shape;
    archive.read("backward_guide", shape);
    if (shape.dim() != 1 || shape.numel() < 3)
      throw Error(fmt::format("{} is not a guide saved by smooth --save-guide", source));
    GuideSpec spec;
    spec.states = shape[0].item<int64_t>();
    spec.observations = shape[1].item<int64_t>();
    const int64_t kind = shape[2].item<int64_t>();
    if (kind < 0 || kind > 6 || kind == 5 || spec.states < 1 || spec.observations < 1)
      throw Error(fmt::format("{} is not a guide saved by smooth --save-guide", source));
    spec.encoder = (kind & 1) != 0 ? "mlp" : (kind & 4) != 0 ? "free" : "linear";
    spec.diagonal = (kind & 2) != 0;
    spec.hidden.clear();
    for (int64_t k = 3; k < shape.numel(); ++k)
      spec.hidden.push_back(shape[k].item<int64_t>());
    if (torch::Tensor inputs; archive.try_read("encoder_inputs", inputs)) {
      const std::vector<std::string>& activations = nn::mlp_activations();
      if (inputs.dim() != 1 || inputs.numel() < 2 || inputs[1].item<int64_t>() < 0 ||
          inputs[1].item<int64_t>() >= static_cast<int64_t>(activations.size()))
        throw Error(fmt::format("{} is not a guide saved by smooth --save-guide", source));
      spec.mask = inputs[0].item<int64_t>() != 0;
      spec.activation = activations[inputs[1].item<int64_t>()];
      for (int64_t k = 2; k < inputs.numel(); ++k)
        spec.columns.push_back(inputs[k].item<int64_t>());
      if (!spec.columns.empty() && static_cast<int64_t>(spec.columns.size()) != spec.observations)
        throw Error(fmt::format("{} is not a guide saved by smooth --save-guide", source));
    }
    if (spec.encoder == "free") {
      torch::Tensor steps;
      archive.read("free_steps", steps);
      if (steps.numel() != 1 || steps.item<int64_t>() < 1)
        throw Error(fmt::format("{} is not a guide saved by smooth --save-guide", source));
      spec.steps = steps.item<int64_t>();
    }
    auto guide = std::shared_ptr<BackwardGuideImpl>(new BackwardGuideImpl(spec));
    torch::serialize::InputArchive parameters;
    archive.read("parameters", parameters);
    std::vector<std::vector<int64_t>> shapes;
    for (const torch::Tensor& p : guide->parameters())
      shapes.push_back(p.sizes().vec());
    guide->torch::nn::Module::load(parameters);
    const std::vector<torch::Tensor> loaded = guide->parameters();
    for (size_t k = 0; k < loaded.size(); ++k)
      if (loaded[k].sizes().vec() != shapes[k])
        throw Error(fmt::format("{} is not a guide saved by smooth --save-guide (a parameter "
                                "of another shape)",
                                source));
    return guide;
  } catch (const c10::Error& e) {
    throw Error(fmt::format("{} is not a guide saved by smooth --save-guide ({})", source,
                            e.what_without_backtrace()));
  }
}

} // namespace ssm::vsmooth
