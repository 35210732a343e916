// estimate_loss and sample: see evaluate.h.
#include "evaluate.h"

#include <algorithm>
#include <optional>

#include "guard.h"

namespace train {

using namespace ember;

std::optional<std::pair<double, double>> estimate_loss(nn::Module& model, const Splits& data, const Options& o) {
    NoGradGuard no_grad;
    model.eval();
    double means[2];
    const Tensor* splits[2] = {&data.train, &data.val};
    for (int s = 0; s < 2; ++s) {
        double total = 0;
        // Ctrl-C ends the estimate early (it may take minutes); every rank
        // still takes part in both exchanges below, so none waits forever.
        for (int64_t k = 0; k < o.eval_iters && !interrupt_requested(); ++k) {
            auto [x, y] = get_batch_share(*splits[s], o.batch_size, o.model.block_size);
            Tensor logits = model.forward(x); // (B/N,T,V): this rank's share
            total += cross_entropy(logits.view({-1, logits.size(-1)}), y.reshape({-1})).item();
        }
        // Equal shares: the mean over the ranks of their mean losses is the batch's mean loss.
        means[s] = distributed::all_reduce_mean(total / static_cast<double>(o.eval_iters));
    }
    model.train();
    if (interrupt_requested()) return std::nullopt;
    return std::pair{means[0], means[1]};
}

std::string sample(nn::Module& model, const Vocab& vocab, const Options& o, int64_t block_size) {
    Generator gen(o.sample_seed);
    model.eval();
    // The lecture starts from token 0 (a newline in Shakespeare); with BPE
    // token 0 is a byte the text never holds, and a sample starts from a
    // newline's token.
    Tensor context = zeros({1, 1}, kInt64);
    if (!vocab.is_chars()) {
        const auto& tokens = vocab.tokens();
        const auto newline = std::find(tokens.begin(), tokens.end(), "\n");
        if (newline != tokens.end()) context.fill_(static_cast<double>(newline - tokens.begin()));
    }
    std::optional<int64_t> top_k = o.top_k > 0 ? std::optional<int64_t>(o.top_k) : std::nullopt;
    // The fast model samples with its key/value cache: the same tokens, faster.
    auto* fast = dynamic_cast<nn::fast::GPT*>(&model);
    Tensor ids = fast ? fast->generate(context, o.sample_tokens, o.temperature, top_k, &gen)
                      : nn::generate(model, block_size, context, o.sample_tokens, o.temperature, top_k, &gen);
    return vocab.decode(ids[0].slice(0, 1));
}

} // namespace train
