// ember: a from-scratch C++20 tensor engine with reverse-mode autograd.
//
// The one header a program includes. Start with README.md; docs/tensor.md
// and docs/autograd.md explain the two halves of the engine.
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
