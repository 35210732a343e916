// ember: a from-scratch C++20 tensor engine with reverse-mode autograd.
//
// The one header a program includes: the core engine (tensors, ops,
// autograd, random numbers) in namespace ember, layers in ember::nn,
// optimisers in ember::optim. Start with README.md; core/README.md maps the
// source, and docs/ explains each part.
#pragma once

#include "core/tensor/dtype.h"
#include "core/tensor/error.h"
#include "core/tensor/print.h"
#include "core/tensor/tensor.h"

#include "core/autograd/autograd.h"
#include "core/autograd/checkpoint.h"
#include "core/autograd/draw_graph.h"
#include "core/autograd/function.h"
#include "core/autograd/gradcheck.h"

#include "core/loops/parallel.h"

#include "core/ops/ops.h"

#include "core/random/generator.h"

#include "nn/nn.h"
