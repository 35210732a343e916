// Printing helpers for the attention_* examples, so that their output reads
// like the notebook cells they reproduce: torch.Size([4, 8, 16]), True/False.
#pragma once

#include <string>

#include <ember.h>

// Python's print(t.shape): "torch.Size([4, 8, 16])".
inline std::string torch_size(const ember::Shape& shape) {
    std::string s = "torch.Size([";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "])";
}

// Python's print(bool): "True" or "False".
inline const char* py_bool(bool b) { return b ? "True" : "False"; }
