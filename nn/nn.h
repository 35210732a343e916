// ember::nn: modules, layers, the notebooks' attention, the lecture's GPT
// and the fast GPT, sampling, optimisers, checkpoints, GPT-2's checkpoints
// (pretrained.h), the model summary, byte-level BPE and GPT-2's tokenizer
// (tokenizer.h, gpt2_tokenizer.h), built on the core engine (../core).
// Included by ember.h. Tests: tests/test_module.cpp, test_layers.cpp,
// test_attention.cpp, test_gpt.cpp, test_fast_gpt.cpp, test_pretrained.cpp,
// test_summary.cpp, test_tokenizer.cpp, test_gpt2_tokenizer.cpp.
#pragma once

#include "nn/attention.h"
#include "nn/distributed.h"
#include "nn/fast_gpt.h"
#include "nn/generate.h"
#include "nn/gpt.h"
#include "nn/gpt2_tokenizer.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/pretrained.h"
#include "nn/safetensors.h"
#include "nn/summary.h"
#include "nn/tokenizer.h"
