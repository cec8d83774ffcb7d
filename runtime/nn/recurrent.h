// Recurrent networks over sequences of tokens (Kim, Wiseman & Rush 2018, section 5's models): a
// token embedding, `layers` stacked LSTM or GRU layers and a linear output, batched over padded
// sequences on LibTorch. Two uses: an encoder (`rnn`: the last real token's hidden state, with
// the context, mapped to `outputs` values: a VAE's q(z | x)), and a language model (`rnn_lm`:
// log p(tokens | context) = sum_t log softmax(W h_t)[token_t], where the input at step t is the
// previous token's embedding, a start symbol at t = 0, with the context beside it at every step,
// as a VAE's decoder reads its code).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace ssm::nn {

struct RecurrentSpec {
  bool language_model = false; // rnn_lm, else rnn
  int64_t vocab = 0, context = 0, outputs = 0, embedding = 32, hidden = 64, layers = 1;
  std::string cell = "lstm"; // lstm | gru
  bool single = false;       // weights in float32; inputs and outputs stay float64
};

class RecurrentImpl : public torch::nn::Module {
public:
  explicit RecurrentImpl(const RecurrentSpec& spec);
  // tokens: [R, L] int64 (0 after each row's end), lengths: [R] (each at least 1), context:
  // [R, context] float64 (undefined without one).
  // rnn: [R, outputs]. rnn_lm: log p of each row's tokens, [R, 1]. Both float64.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& lengths,
                        const torch::Tensor& context);
  // rnn_lm: R sequences drawn token by token, each token from p(. | the tokens before, context),
  // the uniform behind row r's token at position t from `uniform(r, t)` (inverse CDF), so that
  // draws depend on the caller's streams alone. A row ends after `end` (if >= 0) or at
  // `max_length` tokens. Returns the tokens [R, L] (0 past each row's end) and lengths [R].
  std::pair<torch::Tensor, torch::Tensor>
  sample(const torch::Tensor& context, int64_t R, int64_t max_length, int64_t end,
         const std::function<double(int64_t, int64_t)>& uniform);
  const RecurrentSpec& spec() const { return spec_; }

private:
  // The top layer's outputs [R, L, hidden] for inputs [R, L, embedding + context].
  torch::Tensor run(const torch::Tensor& inputs);

  RecurrentSpec spec_;
  torch::nn::Embedding embed_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::GRU gru_{nullptr};
  torch::nn::Linear out_{nullptr};
};
TORCH_MODULE(Recurrent);

} // namespace ssm::nn
