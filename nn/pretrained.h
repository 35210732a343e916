// GPT-2 checkpoints: the fast model (nn/fast_gpt.h) read from and written
// to a directory of two files, `config.json` and `model.safetensors`, in
// either of two layouts:
//
//   huggingface: as Hugging Face publishes GPT-2 (openai-community/gpt2
//       and its larger siblings). config.json is GPT2Config's (n_positions,
//       n_embd, n_head, n_layer, activation_function, layer_norm_epsilon,
//       ...). The tensors are named without the fast model's prefixes
//       (wte.weight, h.0.attn.c_attn.weight, ln_f.bias) or with
//       "transformer." (as GPT2LMHeadModel.save_pretrained writes them);
//       the four projections are Conv1D weights, stored (in, out), the
//       transpose of a Linear's (out, in); the attention's causal-mask
//       buffers (h.N.attn.bias, h.N.attn.masked_bias) are ignored;
//       lm_head.weight, tied to wte.weight, may be absent.
//   nanogpt: nanoGPT's own: config.json holds its model_args (n_layer,
//       n_head, n_embd, block_size, bias, vocab_size, dropout); the tensors
//       are its state_dict's, which are the fast model's names and shapes
//       (transformer.h.0.attn.c_attn.weight, (3C, C)). nanoGPT saves a
//       pickled ckpt.pt; examples/nanogpt_to_safetensors.py turns one into
//       this layout.
//
// Reading checks every name and shape before the model is touched, and
// says what is wrong in a typed error. Writing replaces the two files
// atomically, each (nn/safetensors.h). docs/gpt2.md; tests:
// tests/test_pretrained.cpp, against a PyTorch twin's checkpoints.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/fast_gpt.h"
#include "nn/safetensors.h"

namespace ember::nn::fast {

enum class Layout { huggingface, nanogpt };

// "huggingface" or "nanogpt"; layout_from_name throws ValueError for anything else.
const char* layout_name(Layout layout);
Layout layout_from_name(const std::string& name);

// A checkpoint directory that cannot be read as either layout.
class CheckpointError : public Error {
public:
    using Error::Error;
};

// DIR/config.json as a GPTConfig in GPT-2's layout switches, and which
// layout it is (a "model_type" of "gpt2" is Hugging Face's; "block_size"
// is nanoGPT's). Hugging Face's activation_function "gelu_new" is the tanh
// GELU, "gelu" the erf form, "relu" ReLU; nanoGPT's is always the erf form
// (its nn.GELU()). Refuses what the fast model cannot compute (another
// layer_norm_epsilon than 1e-5, n_inner other than 4 n_embd, attention
// scaled otherwise than by hs^-0.5). Dropout is 0 whatever the file says;
// set it on the config to finetune with dropout.
GPTConfig read_config(const std::string& dir, Layout* layout = nullptr);

// The fast model of DIR: read_config's configuration, with `dropout`, and
// the tensors of DIR/model.safetensors. Every tensor the layout names must
// be there with its shape, and no other (the ignored buffers aside).
std::shared_ptr<GPT> from_pretrained(const std::string& dir, double dropout = 0.0, Layout* layout = nullptr);

// Writes `model` to DIR (made if absent) as config.json and model.safetensors
// in `layout`. nanoGPT's layout needs the model to be one it can build:
// GPT-2's switches with the erf GELU (or bias off everywhere, qkv included).
void save_pretrained(const GPT& model, const std::string& dir, Layout layout = Layout::huggingface);

// How well a model predicts a text: the mean next-token cross-entropy over
// ids, cut into chunks of block_size + 1 tokens that overlap by one (chunk
// k = ids[k*block_size : k*block_size + block_size + 1]), each chunk
// predicting its tokens 1.. from 0.., averaged over every predicted token
// (ids.size() - 1 of them: each token but the first is predicted once, from
// up to block_size tokens before it). Eval mode, no graph. `progress`, if
// given, is called after each chunk with the tokens predicted so far.
// ValueError for fewer than 2 ids.
struct TextLoss {
    double mean = 0;    // nats per token; perplexity is exp(mean)
    int64_t tokens = 0; // predicted tokens
    int64_t chunks = 0;
};
TextLoss text_loss(GPT& model, const std::vector<int64_t>& ids,
                   const std::function<void(int64_t done, int64_t total)>& progress = {});

// The fast model's state_dict in Hugging Face's names and shapes (prefix
// "transformer." dropped, Conv1D weights transposed, lm_head.weight left
// out when tied): what save_pretrained writes.
StateDict to_huggingface(const GPT& model);

} // namespace ember::nn::fast
