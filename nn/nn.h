// ember::nn: modules, layers, attention, a small GPT, optimisers and
// checkpoints, built on the core engine (../core). Included by ember.h.
#pragma once

#include "attention.h"
#include "checkpoint.h"
#include "gpt.h"
#include "init.h"
#include "layers.h"
#include "linear.h"
#include "module.h"
#include "optim.h"
