// ember::nn: modules, layers, attention, a small GPT, optimisers and
// checkpoints, built on the core engine (../core). Included by ember.h.
#pragma once

#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/gpt.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/optim.h"
