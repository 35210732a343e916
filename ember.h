// ember: a from-scratch C++20 tensor engine with reverse-mode autograd.
//
// The one header a program includes: the core engine (tensors, ops,
// autograd, random numbers) in namespace ember, layers in ember::nn,
// optimisers in ember::optim. Start with README.md; docs/ explains each part.
#pragma once

#include "core/autograd.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/function.h"
#include "core/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/print.h"
#include "core/random.h"
#include "core/tensor.h"
#include "nn/nn.h"
