// The default corpus of train_gpt: a generated play (see corpus.cpp).
#pragma once

#include <cstddef>
#include <string>

namespace train {

// About `target_chars` characters of play, the same on every machine.
std::string default_corpus(size_t target_chars = 250000);

} // namespace train
