// The backward-factorised Gaussian guide of a state-space model (Chagneux 2023, 4.2 and 4.4.2,
// after Johnson et al. 2016): q(x_{0:T-1}) = q_{T-1}(x_{T-1}) prod_t q_{t-1|t}(x_{t-1} | x_t) with
// q_{t-1|t} proportional to q_{t-1}(x_{t-1}) N(x_t; A x_{t-1} + a, Q). The marginals q_t follow a
// Kalman-like recursion: a predict step through the learned (A, a, Q), then the encoder's natural
// parameters of y_t added, eta_t = eta_{t|t-1} + e(y_t); the backward kernels are the RTS
// kernels of that recursion, linear-Gaussian in closed form. The encoder is amortised (linear, or
// a network) or free: the non-amortised family of 4.4.2's comparison with Campbell et al. 2021,
// each step's natural parameters its own, for one series. On LibTorch, in float64, so that the
// ELBO's gradient in every parameter comes from autograd through the whole recursion.
#pragma once

#include "nn/mlp.h"

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ssm::vsmooth {

// The room's tensors are float64 throughout.
inline torch::TensorOptions f64() {
  return torch::TensorOptions().dtype(torch::kFloat64);
}
inline constexpr double kLog2Pi = 1.8378770664093453; // log(2 pi)

struct GuideSpec {
  int64_t states = 0, observations = 0; // p and the observation components the encoder reads
  std::string encoder = "linear";       // "linear", "mlp" or "free"
  std::vector<int64_t> hidden = {100};  // mlp's hidden widths
  std::string activation = "tanh";      // mlp's (nn::mlp_activations())
  // The network reads the mask of the components present beside y (missing ones as 0); a
  // network the model declares (`net`, `guide x[t] ~ backward(NET(y[t]))`) reads y alone.
  bool mask = true;
  // The columns of the model's y the encoder reads, in order (a model's guide that reads some
  // observations); empty: all of them. Every y given to the guide is the model's whole y.
  std::vector<int64_t> columns;
  // A, Q, R and the prior's covariance diagonal (the thesis code's family), rather than a full
  // matrix and Cholesky factors; the parameters keep their square shape, off-diagonals unread.
  bool diagonal = false;
  int64_t steps = 0; // "free": the series' length, one step's parameters each
};

// One series under the guide; every tensor carries the gradient in the guide's parameters.
struct GuidePass {
  torch::Tensor mean, cov; // q_t: [T, p], [T, p, p]
  // q_{t-1|t}(x | x_t) = N(gain x_t + offset, noise) at index t - 1 for t = 1 .. T-1:
  // [T-1, p, p], [T-1, p], [T-1, p, p], and the noise's Cholesky factor.
  torch::Tensor gain, offset, noise, noise_chol;
  // The guide's own smoothing marginals and Cov(x_{t-1}, x_t) (index t - 1), when asked for.
  torch::Tensor smooth_mean, smooth_cov, cross_cov;
};

// The guide's transition x_t = A x_{t-1} + a + N(0, Q) as its family reads its parameters.
struct GuideTransition {
  torch::Tensor A, a, Q;
};

// q_{t-1|t}(x | x_t) = N(gain x_t + offset, noise): the RTS kernel of q_{t-1} = N(mean, cov) and
// a transition; batched over the leading dimensions of either.
struct BackwardKernel {
  torch::Tensor gain, offset, noise;
};
BackwardKernel backward_kernel(const torch::Tensor& prev_mean, const torch::Tensor& prev_cov,
                               const GuideTransition& transition);

class BackwardGuideImpl : public torch::nn::Module {
public:
  // A guide starting from the prior N(0, I), A = 0.9 I, a = 0, Q = 0.1 I; the linear encoder
  // from B small and random (seeded), d and R the observations' means and variances; the
  // network's inputs standardised by the observations'; the free encoder adding precision I and
  // nothing to the mean's natural parameter at every step. y: [T, m], NaN where missing.
  BackwardGuideImpl(const GuideSpec& spec, const torch::Tensor& y, uint64_t seed);
  // Sets the guide to a linear-Gaussian model's own recursion: the prior N(m0, P0), the
  // transition x_t = F x_{t-1} + c + N(0, Q) and, for the linear encoder, the emission
  // y_t = H x_t + d + N(0, R). For a time-invariant model the guide is then its exact smoothing
  // law. A covariance that is not positive definite, and a matrix that is undefined or not
  // finite, keeps its starting value.
  struct ModelMatrices {
    torch::Tensor m0, P0, F, c, Q, H, d, R;
  };
  void start_from(const ModelMatrices& matrices);
  // Matrices over the model's y (H, d, R in start_from too): the rows of the columns the encoder
  // reads are taken here.
  // For the network encoder: fits it (500 Adam steps on a strided sample of at most about 4000
  // rows of y with a component present) to the linear encoder of the emission y = H x + d +
  // N(0, R), R's diagonal, on the components present: outputs (H' R^-1 (y - d), the diagonal of
  // H' R^-1 H), the natural parameters with the precision's off-diagonal terms dropped (exact
  // when each observed component reads one state). A start that reads the data, where the
  // generic one ignores it. For the free encoder: each step's natural parameters set to the
  // emission's on the components present (exact for a linear-Gaussian model, to a 1e-9 ridge
  // on a precision that is singular). H, d, R may be per step ([T, m, p], [T, m], [T, m, m]):
  // the free encoder reads each step's, the network the first's. Does nothing when the matrices
  // are missing or not finite.
  void start_encoder_at(const torch::Tensor& H, const torch::Tensor& d, const torch::Tensor& R,
                        const torch::Tensor& y);
  // The recursion on one series y ([T, m], NaN where missing; T >= 1; for the free encoder, T
  // its steps: else an ssm::Error).
  GuidePass run(const torch::Tensor& y, bool smoothing);
  // One step of it as the online recursions differentiate it: the tensors q_t depends on besides
  // q_{t-1} (the prior's or the transition's raw parameters, then the encoder's raw parameters or
  // the network's output at y_t), detached, with the index in parameters() of each (-1 for the
  // network's output, kept with its graph in `network_output`).
  struct StepInputs {
    std::vector<torch::Tensor> values;
    std::vector<int64_t> parameter;
    torch::Tensor network_output;
  };
  StepInputs step_inputs(bool first, const torch::Tensor& y_t); // amortised encoders only
  // q_t = N(mean, cov) from q_{t-1} = N(prev_mean, prev_cov) (undefined at t = 0: the prior) and
  // step_inputs' values, batched over a leading dimension of all of them (copies, one per output
  // component, give q_t's Jacobian in one backward pass).
  std::pair<torch::Tensor, torch::Tensor> step_from(const torch::Tensor& prev_mean,
                                                    const torch::Tensor& prev_cov,
                                                    const std::vector<torch::Tensor>& values,
                                                    const torch::Tensor& y_t) const;
  // The raw parameters of the transition (A, a, Q's factor), and the transition they make,
  // batched over leading dimensions (copies of the raw parameters, one per draw, give every
  // draw's gradient in one backward pass).
  std::vector<torch::Tensor> transition_parameters() const {
    return {transition_, transition_offset_, transition_chol_};
  }
  GuideTransition transition(const torch::Tensor& raw_A, const torch::Tensor& a,
                             const torch::Tensor& raw_chol) const;
  const GuideSpec& spec() const { return spec_; }

  // The guide as bytes (LibTorch's archive format), and back: throws ssm::Error when the bytes are
  // not a guide, naming `source`.
  std::string save() const;
  static std::shared_ptr<BackwardGuideImpl> load(const std::string& bytes,
                                                 const std::string& source);

private:
  explicit BackwardGuideImpl(const GuideSpec& spec);
  // The columns of y the encoder reads (the last dimension), and the network's inputs from them.
  torch::Tensor encoder_view(const torch::Tensor& y) const;
  torch::Tensor network_inputs(const torch::Tensor& y_read) const;
  // The Cholesky factor of a covariance from its raw parameter, as the family reads it (batched).
  torch::Tensor factor(const torch::Tensor& raw) const;
  // start_encoder_at's two cases, on the columns the encoder reads.
  void start_network_at(const torch::Tensor& H, const torch::Tensor& d, const torch::Tensor& R,
                        const torch::Tensor& y);
  void start_free_at(const torch::Tensor& H, const torch::Tensor& d, const torch::Tensor& R,
                     const torch::Tensor& y);
  // The observations as the update reads them: q_t's update is a Kalman update by a
  // pseudo-observation z = H x + N(0, noise) of the components present (the free encoder's:
  // z_t = L_t' x + N(0, I), which adds (L_t z_t, L_t L_t') to q_t's natural parameters).
  struct Encoded {
    torch::Tensor z, noise, R; // [T, m] or [T, p]; the network's noise [T, p, p]; linear's R
    torch::Tensor H;           // free: L_t' [T, p, p]
    torch::Tensor seen;        // [T, m]
    std::vector<int64_t> n_seen;
  };
  Encoded encode(const torch::Tensor& y);
  void observe(const Encoded& e, int64_t t, torch::Tensor& mean, torch::Tensor& cov) const;
  // The Kalman update of (mean, cov) by z = H x + N(0, noise), batched over leading dimensions.
  static void update(torch::Tensor& mean, torch::Tensor& cov, const torch::Tensor& z,
                     const torch::Tensor& H, const torch::Tensor& noise);

  GuideSpec spec_;
  torch::Tensor prior_mean_, prior_chol_, transition_, transition_offset_, transition_chol_;
  torch::Tensor emission_, emission_offset_, emission_chol_; // encoder "linear"
  nn::Mlp network_{nullptr};                                 // encoder "mlp"
  torch::Tensor free_z_, free_chol_;                         // encoder "free": [T, p], [T, p, p]
};
TORCH_MODULE(BackwardGuide);

// A lower-triangular matrix with a positive diagonal from an unconstrained square one: the
// strict lower part as it is, the diagonal through exp.
torch::Tensor cholesky_factor(const torch::Tensor& raw);
// log N(x; mean, L L') for L lower-triangular, batched over the leading dimensions (broadcast).
torch::Tensor gaussian_log_density(const torch::Tensor& x, const torch::Tensor& mean,
                                   const torch::Tensor& chol);

} // namespace ssm::vsmooth
