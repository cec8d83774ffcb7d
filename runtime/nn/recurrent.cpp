// Recurrent networks over sequences of tokens: see recurrent.h.
#include "nn/recurrent.h"

namespace ssm::nn {

RecurrentImpl::RecurrentImpl(const RecurrentSpec& spec) : spec_(spec) {
  // A language model's start symbol is one more token.
  const int64_t tokens = spec.vocab + (spec.language_model ? 1 : 0);
  embed_ = register_module("embedding", torch::nn::Embedding(tokens, spec.embedding));
  // The encoder reads the context at its output; the language model beside every token.
  const int64_t in = spec.embedding + (spec.language_model ? spec.context : 0);
  if (spec.cell == "gru")
    gru_ = register_module(
        "gru",
        torch::nn::GRU(
            torch::nn::GRUOptions(in, spec.hidden).num_layers(spec.layers).batch_first(true)));
  else
    lstm_ = register_module(
        "lstm",
        torch::nn::LSTM(
            torch::nn::LSTMOptions(in, spec.hidden).num_layers(spec.layers).batch_first(true)));
  out_ = register_module("output",
                         torch::nn::Linear(spec.hidden + (spec.language_model ? 0 : spec.context),
                                           spec.language_model ? spec.vocab : spec.outputs));
  to(spec.single ? torch::kFloat32 : torch::kFloat64);
}

torch::Tensor RecurrentImpl::run(const torch::Tensor& inputs) {
  if (gru_)
    return std::get<0>(gru_->forward(inputs));
  return std::get<0>(lstm_->forward(inputs));
}

torch::Tensor RecurrentImpl::forward(const torch::Tensor& tokens, const torch::Tensor& lengths,
                                     const torch::Tensor& context) {
  const torch::Dtype dtype = spec_.single ? torch::kFloat32 : torch::kFloat64;
  const int64_t R = tokens.size(0), L = tokens.size(1);
  const torch::Tensor ctx =
      context.defined() && context.size(1) > 0 ? context.to(dtype) : torch::Tensor();
  if (!spec_.language_model) {
    const torch::Tensor h = run(embed_->forward(tokens)); // [R, L, H]
    // A unidirectional network's output at the last real token: its summary of the sequence.
    const torch::Tensor last = (lengths - 1).view({R, 1, 1}).expand({R, 1, spec_.hidden});
    torch::Tensor summary = h.gather(1, last).squeeze(1);
    if (ctx.defined())
      summary = torch::cat({summary, ctx}, 1);
    return out_->forward(summary).to(torch::kFloat64);
  }
  // Inputs: the start symbol, then every token but the last; each predicts the token at its step.
  const torch::Tensor start = torch::full({R, 1}, spec_.vocab, torch::kInt64);
  const torch::Tensor previous = torch::cat({start, tokens.narrow(1, 0, L - 1)}, 1);
  torch::Tensor inputs = embed_->forward(previous); // [R, L, E]
  if (ctx.defined())
    inputs = torch::cat({inputs, ctx.unsqueeze(1).expand({R, L, ctx.size(1)})}, 2);
  const torch::Tensor log_p = torch::log_softmax(out_->forward(run(inputs)), 2); // [R, L, V]
  const torch::Tensor each = log_p.gather(2, tokens.unsqueeze(2)).squeeze(2);    // [R, L]
  const torch::Tensor real = torch::arange(L, torch::kInt64).view({1, L}) < lengths.view({R, 1});
  return torch::where(real, each, torch::zeros_like(each)).sum(1, true).to(torch::kFloat64);
}

std::pair<torch::Tensor, torch::Tensor>
RecurrentImpl::sample(const torch::Tensor& context, int64_t R, int64_t max_length, int64_t end,
                      const std::function<double(int64_t, int64_t)>& uniform) {
  torch::NoGradGuard no_grad;
  const torch::Dtype dtype = spec_.single ? torch::kFloat32 : torch::kFloat64;
  const torch::Tensor ctx = context.defined() && context.size(1) > 0
                                ? context.to(dtype).unsqueeze(1) // [R, 1, context]
                                : torch::Tensor();
  torch::Tensor tokens = torch::zeros({R, max_length}, torch::kInt64);
  torch::Tensor lengths = torch::full({R}, max_length, torch::kInt64);
  int64_t* tok = tokens.data_ptr<int64_t>();
  int64_t* len = lengths.data_ptr<int64_t>();
  std::vector<bool> done(static_cast<size_t>(R), false);
  torch::Tensor previous = torch::full({R, 1}, spec_.vocab, torch::kInt64); // the start symbol
  // The GRU's state, or the LSTM's (h, c): none (zeros) before the first token.
  torch::Tensor h;
  torch::optional<std::tuple<torch::Tensor, torch::Tensor>> hc;
  for (int64_t t = 0; t < max_length; ++t) {
    torch::Tensor input = embed_->forward(previous); // [R, 1, E]
    if (ctx.defined())
      input = torch::cat({input, ctx}, 2);
    torch::Tensor out;
    if (gru_)
      std::tie(out, h) = gru_->forward(input, h);
    else
      std::tie(out, hc) = lstm_->forward(input, hc);
    const torch::Tensor p =
        torch::softmax(out_->forward(out.squeeze(1)).to(torch::kFloat64), 1).contiguous();
    const double* pp = p.data_ptr<double>();
    int64_t* prev = previous.data_ptr<int64_t>();
    bool all_done = true;
    for (int64_t r = 0; r < R; ++r) {
      if (done[r])
        continue;
      const double u = uniform(r, t);
      int64_t v = 0;
      for (double acc = pp[r * spec_.vocab]; acc < u && v + 1 < spec_.vocab;)
        acc += pp[r * spec_.vocab + ++v];
      tok[r * max_length + t] = v;
      prev[r] = v;
      if (v == end) {
        done[r] = true;
        len[r] = t + 1;
      } else {
        all_done = false;
      }
    }
    if (all_done)
      break;
  }
  return {tokens, lengths};
}

} // namespace ssm::nn
