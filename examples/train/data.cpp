// Vocabulary, split and batches: see data.h.
#include "data.h"

#include <algorithm>
#include <stdexcept>

namespace train {

using namespace ember;

Vocab Vocab::from_text(const std::string& text) {
    std::string chars = text;
    std::sort(chars.begin(), chars.end(),
              [](char a, char b) { return static_cast<unsigned char>(a) < static_cast<unsigned char>(b); });
    chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
    return from_chars(chars);
}

Vocab Vocab::from_chars(std::string chars) {
    Vocab v;
    v.chars_ = std::move(chars);
    for (size_t i = 0; i < v.chars_.size(); ++i) {
        int& slot = v.index_[static_cast<unsigned char>(v.chars_[i])];
        if (slot >= 0) throw std::invalid_argument("vocabulary has a repeated character");
        slot = static_cast<int>(i);
    }
    return v;
}

std::vector<int64_t> Vocab::encode(const std::string& text) const {
    std::vector<int64_t> ids;
    ids.reserve(text.size());
    for (char c : text) {
        int id = index_[static_cast<unsigned char>(c)];
        if (id < 0)
            throw std::invalid_argument("character " + std::to_string(static_cast<int>(static_cast<unsigned char>(c))) +
                                        " ('" + std::string(1, c) + "') is not in the vocabulary");
        ids.push_back(id);
    }
    return ids;
}

std::string Vocab::decode(const Tensor& ids) const {
    Tensor flat = ids.contiguous().view({-1});
    const int64_t* p = flat.data_ptr<int64_t>();
    std::string out;
    for (int64_t i = 0; i < flat.numel(); ++i) {
        if (p[i] < 0 || p[i] >= size())
            throw std::invalid_argument("token id " + std::to_string(p[i]) + " is out of range");
        out += chars_[static_cast<size_t>(p[i])];
    }
    return out;
}

Splits split_90_10(const Tensor& data) {
    const int64_t n = static_cast<int64_t>(0.9 * static_cast<double>(data.numel())); // Python's int(0.9*len)
    return {data.slice(0, 0, n), data.slice(0, n)};
}

std::pair<Tensor, Tensor> get_batch(const Tensor& data, int64_t batch_size, int64_t block_size) {
    Tensor ix = randint(data.numel() - block_size, {batch_size});
    const int64_t* starts = ix.data_ptr<int64_t>();
    std::vector<Tensor> xs, ys;
    for (int64_t b = 0; b < batch_size; ++b) {
        xs.push_back(data.slice(0, starts[b], starts[b] + block_size));
        ys.push_back(data.slice(0, starts[b] + 1, starts[b] + block_size + 1));
    }
    return {stack(xs), stack(ys)};
}

uint64_t fingerprint(const std::string& text) {
    uint64_t h = 1469598103934665603ull;
    for (char c : text) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

} // namespace train
