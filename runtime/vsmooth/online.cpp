// Online variational smoothing: see online.h.
#include "vsmooth/online.h"
#include "core/csv.h"
#include "core/error.h"
#include "core/output.h"
#include "nn/tensor_values.h"

#include <fmt/format.h>

#include <cmath>

namespace ssm::vsmooth {

namespace {

bool all_finite(const torch::Tensor& t) {
  return torch::isfinite(t).all().item<bool>();
}

// n detached copies of v along a new leading dimension, each a leaf of its own.
torch::Tensor copies_of(const torch::Tensor& v, int64_t n) {
  std::vector<int64_t> shape = v.sizes().vec();
  shape.insert(shape.begin(), n);
  return v.detach().unsqueeze(0).expand(shape).clone().requires_grad_(true);
}

// The gradient of a (mean, cov) pair's copies, rows [n, p + p^2].
torch::Tensor moments_rows(const torch::Tensor& d_mean, const torch::Tensor& d_cov) {
  return torch::cat({d_mean.flatten(1), d_cov.flatten(1)}, 1);
}

// Step t of `rec`: its gradient estimate, or why it failed (`elbo`: the ELBO itself is not
// finite, where the hint on bounded supports applies; `functional`: a functional's term, named).
struct StepOutcome {
  std::vector<torch::Tensor> gradient;
  std::string why;
  bool elbo = false, functional = false;
};

StepOutcome advance_step(OnlineRecursion& rec, int64_t t, const torch::Tensor& y_t,
                         const ModelInfo& info, torch::Generator& gen) {
  StepOutcome r;
  try {
    r.gradient = rec.advance(t, y_t, gen);
    for (const torch::Tensor& gk : r.gradient)
      if (!all_finite(gk))
        r.why = "the ELBO's gradient is not finite";
  } catch (const OnlineRecursion::NonFinite& e) {
    r.why = e.what;
    r.elbo = e.elbo;
    for (const FunctionalInfo& fi : info.functionals) // a functional's term: name it
      if (e.component >= fi.offset && e.component < fi.offset + fi.size) {
        r.functional = true;
        r.why = fmt::format("the term of the functional '{}' is not finite{}", fi.name,
                            t == 0 ? " (x[t-1] is NaN at t = 0: guard the term with `t == 0 ? "
                                     "... : ...`)"
                                   : "");
      }
  } catch (const c10::LinAlgError&) {
    r.why = "a covariance of the guide stopped being positive definite";
  } catch (const c10::Error& e) {
    r.why = std::string("LibTorch failed (") + e.what_without_backtrace() + ")";
  } catch (const std::exception& e) {
    r.why = e.what();
  }
  return r;
}

} // namespace

OnlineRecursion::OnlineRecursion(BackwardGuide guide, const ModelDensities& model, int64_t samples,
                                 std::vector<int64_t> sum_components, bool parameter_score)
    : guide_(std::move(guide)), model_(model), N_(samples),
      sum_components_(std::move(sum_components)),
      sum_index_(torch::tensor(sum_components_, torch::kInt64)), parameter_score_(parameter_score) {
  for (const torch::Tensor& p : guide_->parameters()) {
    offsets_.push_back(n_parameters_);
    n_parameters_ += p.numel();
  }
}

std::vector<torch::Tensor> OnlineRecursion::advance(int64_t t, const torch::Tensor& y_t,
                                                    torch::Generator& gen) {
  const std::vector<torch::Tensor> params = guide_->parameters();
  const std::vector<torch::Tensor> raw = guide_->transition_parameters(); // A, a, Q's factor
  const size_t n_raw = raw.size();
  const int64_t p = guide_->spec().states, N = N_, nsum = sum_index_.numel();
  const int64_t n_out = p + p * p, P = n_parameters_;
  const bool first = t == 0;

  // q_t and the Jacobian of (mean_t, cov_t) in the parameters: n_out copies of everything the
  // step reads, copy k's gradient the k-th output's, in one backward pass; then the chain rule
  // through q_{t-1}'s Jacobian and, for a network encoder, the network's output's.
  BackwardGuideImpl::StepInputs in = guide_->step_inputs(first, y_t);
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& v : in.values)
    leaves.push_back(copies_of(v, n_out));
  torch::Tensor prev_mean, prev_cov;
  if (!first) {
    prev_mean = copies_of(mean_, n_out);
    prev_cov = copies_of(cov_, n_out);
    leaves.push_back(prev_mean);
    leaves.push_back(prev_cov);
  }
  const auto [mean_b, cov_b] = guide_->step_from(prev_mean, prev_cov, leaves, y_t);
  const torch::Tensor outputs = moments_rows(mean_b, cov_b); // [n_out, n_out]
  const std::vector<torch::Tensor> d_step =
      torch::autograd::grad({outputs.diagonal().sum()}, leaves, {}, false, false, true);
  const torch::Tensor mean = mean_b[0].detach(), cov = cov_b[0].detach();
  torch::Tensor J =
      first ? torch::zeros({n_out, P}, f64())
            : moments_rows(d_step[leaves.size() - 2], d_step[leaves.size() - 1]).matmul(jacobian_);
  for (size_t k = 0; k < in.values.size(); ++k) {
    if (!d_step[k].defined())
      continue;
    const torch::Tensor d = d_step[k].reshape({n_out, -1});
    if (in.parameter[k] >= 0) {
      J.narrow(1, offsets_[in.parameter[k]], params[in.parameter[k]].numel()) += d;
      continue;
    }
    // The network's output o: its Jacobian in the parameters, one backward pass per component.
    const int64_t n_o = in.network_output.numel();
    torch::Tensor J_o = torch::zeros({n_o, P}, f64());
    for (int64_t c = 0; c < n_o; ++c) {
      const std::vector<torch::Tensor> g = torch::autograd::grad(
          {in.network_output[c]}, params, {}, /*retain_graph=*/true, false, true);
      for (size_t q = 0; q < params.size(); ++q)
        if (g[q].defined())
          J_o[c].narrow(0, offsets_[q], params[q].numel()) += g[q].reshape({-1});
    }
    J += d.matmul(J_o);
  }

  // Draws from q_t, fixed (the score-function estimator), and log q_t(xi) with (mean_t, cov_t)
  // as leaves.
  const torch::Tensor L = torch::linalg_cholesky(cov);
  const torch::Tensor xi = mean + torch::randn({N, p}, gen, f64()).matmul(L.t());
  const torch::Tensor mean_leaf = mean.clone().requires_grad_(true);
  const torch::Tensor cov_leaf = cov.clone().requires_grad_(true);
  const torch::Tensor log_q = gaussian_log_density(xi, mean_leaf, torch::linalg_cholesky(cov_leaf));
  const torch::Tensor lq = log_q.detach();

  torch::Tensor H, F, S, w, coef, log_back;
  std::vector<torch::Tensor> kernel_leaves; // per draw xi_t^i: q_{t-1}'s moments, the transition
  if (first) {
    torch::NoGradGuard no_grad;
    H = model_.initial(xi) - lq;
    if (nsum > 0)
      F = model_.functionals(0, xi, xi).index_select(1, sum_index_);
    if (parameter_score_)
      S = model_.parameter_terms(0, xi, xi);
  } else {
    // log q_{t-1|t}(xi_{t-1}^j | xi_t^i) with row i computed from copy i of what the kernel
    // reads: the surrogate's gradient in copy i is then draw i's increment of G (4.11).
    for (const torch::Tensor& r : guide_->transition_parameters())
      kernel_leaves.push_back(copies_of(r, N));
    kernel_leaves.push_back(copies_of(mean_, N));
    kernel_leaves.push_back(copies_of(cov_, N));
    const BackwardKernel k =
        backward_kernel(kernel_leaves[3], kernel_leaves[4],
                        guide_->transition(kernel_leaves[0], kernel_leaves[1], kernel_leaves[2]));
    const torch::Tensor chol = torch::linalg_cholesky(k.noise);
    const torch::Tensor back_mean = k.gain.matmul(xi.unsqueeze(-1)).squeeze(-1) + k.offset;
    // |L_i^-1 (xi_{t-1}^j - m_i)|^2 through L_i^-1 ([N, p, p]): O(N^2 p) memory, not the
    // broadcast factor's O(N^2 p^2).
    const torch::Tensor L_inv = torch::linalg_solve_triangular(
        chol, torch::eye(p, f64()).expand({N, p, p}), /*upper=*/false);
    const torch::Tensor u = xi_.matmul(L_inv.transpose(-2, -1)); // [N(i), N(j), p]
    const torch::Tensor v = L_inv.matmul(back_mean.unsqueeze(-1)).squeeze(-1);
    const torch::Tensor log_det = 2 * torch::log(torch::diagonal(chol, 0, -2, -1)).sum(-1);
    log_back = -0.5 * (static_cast<double>(p) * kLog2Pi + log_det.unsqueeze(1) +
                       (u - v.unsqueeze(1)).square().sum(-1));

    torch::NoGradGuard no_grad;
    const torch::Tensor lb = log_back.detach();
    // The compact increment h_t(xi_{t-1}^j, xi_t^i) = log m_t + log g_t + log q_{t-1} - log q_t
    // - log q_{t-1|t}, and the backward weights (4.6) self-normalised over j.
    const torch::Tensor h = model_.transition(t, xi_, xi, true) +
                            model_.observation(t, xi).unsqueeze(1) + log_q_.unsqueeze(0) -
                            lq.unsqueeze(1) - lb;
    w = torch::softmax(lb - log_q_.unsqueeze(0), 1);
    const torch::Tensor incr = H_.unsqueeze(0) + h;
    H = (w * incr).sum(1);
    coef = w * (incr - H.unsqueeze(1)); // the baseline H_t^i inside (4.11)
    // The sum_t statistics per draw (PaRIS-like, over every pair): the functionals' and the
    // score terms'.
    const torch::Tensor pair_prev = xi_.repeat({N, 1}), pair_cur = xi.repeat_interleave(N, 0);
    auto backward_sum = [&](const torch::Tensor& previous, const torch::Tensor& terms) {
      return (w.unsqueeze(-1) * (previous.unsqueeze(0) + terms.reshape({N, N, -1}))).sum(1);
    };
    if (nsum > 0)
      F = backward_sum(F_, model_.functionals(t, pair_prev, pair_cur).index_select(1, sum_index_));
    if (parameter_score_)
      S = backward_sum(S_, model_.parameter_terms(t, pair_prev, pair_cur));
    const torch::Tensor gain = k.gain[0].detach(), noise = k.noise[0].detach();
    one_step_mean_ = gain.matmul(mean) + k.offset[0].detach();
    one_step_cov_ = gain.matmul(cov).matmul(gain.t()) + noise;
  }
  if (!all_finite(H))
    throw NonFinite{"the ELBO is not finite"};
  if (F.defined() && !all_finite(F)) {
    const torch::Tensor bad = torch::nonzero(~torch::isfinite(F).all(0));
    throw NonFinite{"", false, sum_components_[bad[0][0].item<int64_t>()]};
  }
  if (S.defined() && !all_finite(S))
    throw NonFinite{"the gradient of the model's log-densities in its parameters is not finite",
                    false};

  // (4.12): (1/N) sum_i [G_t^i + grad log q_t(xi_t^i) (H_t^i - mean_{k != i} H_t^k)]: the
  // baseline leaves draw i out (H_t^k is independent of xi_t^i for k != i); the mean over all k,
  // as the thesis writes it, would scale this term by (N - 1) / N.
  torch::Tensor surrogate = ((H - H.mean()) / static_cast<double>(N - 1) * log_q).sum();
  std::vector<torch::Tensor> inputs = {mean_leaf, cov_leaf};
  if (!first) {
    surrogate = surrogate + (coef * log_back).sum();
    inputs.insert(inputs.end(), kernel_leaves.begin(), kernel_leaves.end());
  }
  const std::vector<torch::Tensor> grads =
      torch::autograd::grad({surrogate}, inputs, {}, false, false, /*allow_unused=*/true);
  torch::NoGradGuard no_grad;
  torch::Tensor G = torch::zeros({N, P}, f64());
  if (!first) {
    // Draw i's increment: through q_{t-1}'s moments (its Jacobian) and the transition's own.
    G = w.matmul(G_) + moments_rows(grads[2 + n_raw], grads[3 + n_raw]).matmul(jacobian_);
    for (size_t r = 0; r < n_raw; ++r)
      for (size_t q = 0; q < params.size(); ++q)
        if (raw[r].is_same(params[q]))
          G.narrow(1, offsets_[q], params[q].numel()) += grads[2 + r].reshape({N, -1});
  }
  const torch::Tensor flat =
      G.mean(0) + moments_rows(grads[0].unsqueeze(0), grads[1].unsqueeze(0)).squeeze(0).matmul(J);
  std::vector<torch::Tensor> gradient(params.size());
  for (size_t q = 0; q < params.size(); ++q)
    gradient[q] = flat.narrow(0, offsets_[q], params[q].numel()).view_as(params[q]).clone();
  mean_ = mean;
  cov_ = cov;
  jacobian_ = J;
  xi_ = xi;
  log_q_ = lq;
  H_ = H;
  G_ = G;
  F_ = nsum > 0 ? F : torch::zeros({N, 0}, f64());
  S_ = S;
  return gradient;
}

std::string step_moments_header(const ModelInfo& info) {
  std::string header = info.step;
  for (const char* kind : {"filter", "one_step"})
    for (const std::string& c : state_columns(info))
      header += fmt::format(",{0}_mean_{1},{0}_var_{1}", kind, c);
  return header;
}

std::string step_moments_row(int64_t t, size_t columns, const torch::Tensor& filter_mean,
                             const torch::Tensor& filter_cov, const torch::Tensor& one_step_mean,
                             const torch::Tensor& one_step_cov) {
  std::string row = std::to_string(t);
  auto put = [&](const torch::Tensor& m, const torch::Tensor& v) {
    for (size_t c = 0; c < columns; ++c)
      row += m.defined() ? fmt::format(",{},{}", format_double(m[c].item<double>()),
                                       format_double(v[c][c].item<double>()))
                         : std::string(",,");
  };
  put(filter_mean, filter_cov);
  put(one_step_mean, one_step_cov);
  return row;
}

OnlineTraining train_online(BackwardGuide& guide, const std::vector<OnlineStream>& streams,
                            const MethodRun& run, const VariationalSmoothOptions& o,
                            bool functionals, torch::Generator& gen, OnlineParameters* theta) {
  const ModelInfo& info = run.info;
  int64_t T = 0; // a pass's observations, over every series
  for (const OnlineStream& s : streams)
    T += s.y.size(0);
  std::vector<int64_t> sum_components;
  for (const FunctionalInfo& fi : info.functionals)
    if (fi.sum && functionals)
      for (int64_t k = 0; k < fi.size; ++k)
        sum_components.push_back(fi.offset + k);

  // The per-step estimates of the last pass, streamed to --online-out (renamed into place at
  // the end; removed on failure).
  std::unique_ptr<OutputFile> out;
  const size_t columns = state_columns(info).size();
  if (!o.online_out.empty()) {
    out = std::make_unique<OutputFile>(o.online_out);
    out->write(step_moments_header(info) + ",elbo\n");
  }
  auto write_row = [&](int64_t t, const OnlineRecursion& rec) {
    out->write(step_moments_row(t, columns, rec.filter_mean(), rec.filter_cov(),
                                t > 0 ? rec.one_step_mean() : torch::Tensor(), rec.one_step_cov()) +
               "," + format_double(rec.elbo()) + "\n");
  };

  OnlineTraining result;
  std::vector<torch::Tensor> params = guide->parameters();
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (o.optimizer == "adam")
    optimizer =
        std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.learning_rate));
  else
    optimizer = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1.0));
  // gamma_k / gamma_1, k = 1, 2, ... (RML's schedule, as `rml`)
  auto decay = [&](int64_t k) {
    return k <= o.step_hold ? 1.0 : std::pow(static_cast<double>(k - o.step_hold), -o.step_decay);
  };
  // The parameters before the last update: the guide (and model) under which the last step that
  // succeeded ran, kept when the next one fails (the update in between may be what broke it).
  std::vector<torch::Tensor> before;
  for (const torch::Tensor& p : params)
    before.push_back(p.detach().clone());
  torch::Tensor u_before = theta ? theta->u.detach().clone() : torch::Tensor();
  const int64_t passes = std::max<int64_t>(1, o.epochs); // --epochs 0: one pass, no update
  for (int64_t epoch = 0; epoch < passes; ++epoch) {
    const bool last = epoch + 1 == passes;
    double pass_elbo = 0;
    torch::Tensor pass_sums, pass_gradient;
    int64_t done = 0; // the pass's observations before this series'
    for (const OnlineStream& stream : streams) {
      const torch::Tensor& y = stream.y;
      OnlineRecursion rec(guide, *stream.model, o.samples, sum_components, theta != nullptr);
      std::vector<torch::Tensor> previous; // the gradient estimate of L_{t-1} at lambda_{t-1}
      torch::Tensor previous_u;            // and in u, at u_{t-1}
      for (int64_t t = 0; t < y.size(0); ++t) {
        // Back to the guide (and parameters) under which the last step that succeeded ran.
        auto stop = [&](const std::string& why, const char* hint) {
          torch::NoGradGuard no_grad;
          for (size_t k = 0; k < params.size(); ++k)
            params[k].copy_(before[k]);
          if (theta) {
            theta->u.detach().copy_(u_before);
            theta->move();
          }
          result.failure = fmt::format(
              "smooth --method variational --online: {} at t={}{} ({}) in pass {}; training "
              "stopped with the guide of the last step that succeeded{}",
              why, t, stream.name.empty() ? "" : " of series " + stream.name,
              data_row_text(info, *stream.data, t), epoch + 1, hint);
          return result;
        };
        auto [g, why, elbo, e_functional] = advance_step(rec, t, y[t], info, gen);
        if (why.empty() && last && out)
          write_row(t, rec);
        if (!why.empty()) {
          const char* hint = "";
          if (!elbo && !e_functional)
            hint = " (a smaller --learning-rate may keep the guide in its family)";
          else if (elbo && theta != nullptr && result.updates > 0) // the likelier cause
            hint = " (after the model's parameters moved: a smaller --param-learning-rate may keep "
                   "them where the ELBO is finite)";
          else if (elbo)
            hint = " (the guide is Gaussian: a log-density of the model that is -inf somewhere in "
                   "the state, as one with bounded support, makes the ELBO -inf)";
          return stop(why, hint);
        }
        if (o.epochs == 0) {
          if (o.progress)
            o.progress(done + t + 1, T);
          continue;
        }
        // (4.13): the step follows grad L_t - grad L_{t-1}, each estimated at the parameters
        // current when it was computed (L_t - L_{t-1} is the objective's share of y_t). The
        // optimisers minimise: they are given its negative.
        for (size_t k = 0; k < params.size(); ++k)
          before[k].copy_(params[k].detach());
        optimizer->zero_grad();
        const double gamma =
            o.optimizer == "adam" ? 1.0 : o.learning_rate * decay(result.updates + 1);
        for (size_t k = 0; k < params.size(); ++k) {
          torch::Tensor d = previous.empty() ? -g[k] : previous[k] - g[k];
          if (o.optimizer == "sgd") {
            d = gamma * d;
            if (o.clip > 0)
              d = d.clamp(-o.clip, o.clip);
          }
          params[k].mutable_grad() = d;
        }
        optimizer->step();
        previous = std::move(g);
        if (theta) { // the parameters' step, as the guide's, from the gradient at u_t
          const torch::Tensor g_u =
              torch::tensor(theta->space->gradient(nn::to_vector(theta->u),
                                                   nn::to_vector(rec.parameter_gradient()), false),
                            f64());
          u_before.copy_(theta->u.detach());
          // Robbins-Monro, as `rml`: the increments are noisy, and a step that does not decay
          // (Adam's) keeps the parameters wandering.
          torch::Tensor move = theta->learning_rate * decay(result.updates + 1) *
                               (previous_u.defined() ? g_u - previous_u : g_u);
          if (o.clip > 0 && (move.abs() > o.clip).any().item<bool>()) {
            move = move.clamp(-o.clip, o.clip);
            ++result.clipped_parameter_steps;
          }
          {
            torch::NoGradGuard no_grad;
            theta->u.add_(move);
          }
          try {
            theta->move();
          } catch (const Error& e) {
            return stop(fmt::format("the parameters left their space ({})", e.what()),
                        " (a smaller --param-learning-rate may keep them in it)");
          }
          previous_u = g_u;
        }
        ++result.updates;
        if (o.progress)
          o.progress(epoch * T + done + t + 1, passes * T);
      }
      pass_elbo += rec.elbo();
      pass_sums = pass_sums.defined() ? pass_sums + rec.functional_sums() : rec.functional_sums();
      if (theta)
        pass_gradient = pass_gradient.defined() ? pass_gradient + rec.parameter_gradient()
                                                : rec.parameter_gradient();
      done += y.size(0);
    }
    result.epoch_elbo.push_back(pass_elbo);
    if (last) {
      result.elbo = pass_elbo;
      result.functional_sums = pass_sums;
      result.parameter_gradient = pass_gradient;
    }
  }
  if (out)
    out->commit();
  return result;
}

} // namespace ssm::vsmooth
