// Which implementation an op runs where it has two: the plain loop in its op
// file, or the fast kernel in core/kernels/ that computes the same result
// (core/kernels/README.md lists the pairs). A reference build
// (-Dkernels=reference) has no fast kernel, and the switch stays off. Private
// (ember's files, tests, benchmarks). Tests: tests/test_kernels.cpp.
#pragma once

// For the element-wise and row kernels the two give identical bits (the same
// operations in the same order); the AVX2 matrix kernel fuses each
// multiply-add, so its products differ from the portable ones in the last
// bits (docs/matmul.md). The choice is global, as PyTorch's torch.backends
// flags are; tests switch it with ReferenceKernelsGuard to compare the two in
// one process.

namespace ember::internal {

// True when this build contains the fast kernels (not -Dkernels=reference).
#ifdef EMBER_REFERENCE_KERNELS
inline constexpr bool kFastKernelsBuilt = false;
#else
inline constexpr bool kFastKernelsBuilt = true;
#endif

// True when ops should call their fast kernels: built in, and not switched off.
bool use_fast_kernels();

// Switches the fast kernels off (false) or back on (true, the default). In
// a reference build they stay off.
void set_fast_kernels(bool on);

// Runs the reference loops for a scope: { ReferenceKernelsGuard reference; ... }
class ReferenceKernelsGuard {
public:
    ReferenceKernelsGuard() : previous_(use_fast_kernels()) { set_fast_kernels(false); }
    ~ReferenceKernelsGuard() { set_fast_kernels(previous_); }
    ReferenceKernelsGuard(const ReferenceKernelsGuard&) = delete;
    ReferenceKernelsGuard& operator=(const ReferenceKernelsGuard&) = delete;

private:
    bool previous_;
};

// True when this CPU (checked once, at run time) has AVX2 and FMA; AVX-512F.
bool cpu_has_avx2_fma();
bool cpu_has_avx512f();

} // namespace ember::internal
