// EMBER_VECTOR_CLONES: compile a function twice, for baseline x86-64 and for
// AVX2, and run the AVX2 copy on CPUs that have it (GCC's target_clones).
// Both copies give the same bits. Only the fast kernels of this folder use
// it (a reference build, -Dkernels=reference, compiles none of them). Private.
// Tests: tests/test_kernels.cpp runs the copies against the definitions.
#pragma once

// The library is built for baseline x86-64 (SSE2: 4 floats per vector) so
// that it runs on any x86-64 CPU. The matrix kernels pick AVX2 and FMA at
// run time from a file compiled for them (gemm_avx2.cpp). Element-wise loops
// get the same choice from target_clones: the function is compiled once per
// target, and the dynamic loader binds calls to the copy the CPU supports
// (an ifunc). The loops must be in the marked function itself (or inlined
// into it): a lambda handed to parallel_for is compiled for the baseline.
//
// Both copies perform the same float operations in the same order, the AVX2
// one on 8 lanes instead of 4: the build passes -ffp-contract=off, and the
// "avx2" target does not enable FMA, so no multiply and add are fused.
// Marked where a copy measured faster (docs/performance.md): softmax's rows,
// the fused attention softmax's backward, cross-entropy, LayerNorm's rows
// and its weight and bias gradients, AdamW's update. Where the loops are shared with the
// definition through a header (core/ops/softmax.h, ...), the marked function
// is also [[gnu::flatten]], so that they are inlined into each copy.

// EMBER_VECTOR_CLONES_512 adds a third copy for AVX-512 (16 floats per
// vector), for loops that measured faster with it (FlashAttention's steps,
// a Linear layer's dot products, the Mersenne Twister, dropout's bits).

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__)
#define EMBER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define EMBER_VECTOR_CLONES_512 __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EMBER_VECTOR_CLONES
#define EMBER_VECTOR_CLONES_512
#endif
