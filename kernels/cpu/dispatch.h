// Internal to the host reduction kernels: the per-ISA kernel tables behind
// reduce.h, and a hook that lets tests force one instruction set so that the
// vectorized and portable paths can be compared bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/exact_sum.h"
#include "kernels/ops.h"
#include "weft.h"

namespace weft {
namespace cpu {

enum class HostIsa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// Kernels take element counts. Ops are indexed by weft_op_t; AVG's slot is
// empty (AVG reduces as SUM), and so are the bitwise ops' slots of the
// floating types. The arithmetic ops (SUM .. MIN) have vector kernels; the
// bitwise ones are portable loops (which the compiler vectorizes).
constexpr int kNumArithOps = 4;
constexpr int kNumKernelOps = WEFT_NUM_OPS;
using Reduce2Fn = void (*)(void* dst, const void* a, const void* b, size_t count);
using ReduceNFn = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count);
using DivideFn = void (*)(void* dst, size_t count, uint64_t n);
// exactSumHost's kernel for one type (exact_sum.h): nsrc >= 1, counters
// receive the fast and slow element counts.
using ExactSumFn = void (*)(void* dst, const void* const* srcs, int nsrc, size_t count,
                            bool average, ExactSumCounters& counters);

struct HostKernels {
  Reduce2Fn reduce2[WEFT_NUM_DATATYPES][kNumKernelOps];
  ReduceNFn reduceN[WEFT_NUM_DATATYPES][kNumKernelOps];
  DivideFn divide[WEFT_NUM_DATATYPES];
  ExactSumFn exactSum[WEFT_NUM_DATATYPES];  // float types only, else null
};

// Destinations of at least this many bytes are written by the vector kernels
// with non-temporal stores (once the destination is aligned): the result goes
// to memory without the line being read first, about 1.35x faster on buffers
// far larger than the caches, at the price of not leaving the result cached.
constexpr size_t kStreamStoreBytes = size_t{8} << 20;

// Whether op OP has a kernel for T: not AVG, and bitwise only on integers.
template <typename T, int OP>
constexpr bool kHasKernel = OP != WEFT_AVG &&
                            (OP < WEFT_BAND || std::is_integral<T>::value) && OP < kNumKernelOps;

// The scalar functor of ops.h for op OP (SUM .. MIN, BAND .. BXOR) on T.
template <typename T, int OP>
using OpFunctor = std::conditional_t<
    OP == WEFT_SUM, Sum<T>,
    std::conditional_t<
        OP == WEFT_PROD, Prod<T>,
        std::conditional_t<
            OP == WEFT_MAX, Max<T>,
            std::conditional_t<
                OP == WEFT_MIN, Min<T>,
                std::conditional_t<OP == WEFT_BAND, BitAnd<T>,
                                   std::conditional_t<OP == WEFT_BOR, BitOr<T>, BitXor<T>>>>>>>;

// Float and narrow-float AVG divide: x / float(n) (double for double),
// rounded back once. Integers: C division, truncating toward zero.

// Fill `k` with one ISA's kernels, entries it lacks left as they are (so a
// table starts as the portable one). The vector ones return false when the
// build has no such code path (not x86).
void fillPortableKernels(HostKernels* k);
bool fillAvx2Kernels(HostKernels* k);
bool fillAvx512Kernels(HostKernels* k);
// The exact-sum entries (exact_sum.cc, exact_avx2.cc); the fill functions
// above call them.
void fillPortableExactSum(HostKernels* k);
bool fillAvx2ExactSum(HostKernels* k);

// The table in use now (the best supported ISA unless forced).
const HostKernels& activeHostKernels();

// True when the ISA is compiled in and this CPU runs it.
bool hostIsaSupported(HostIsa isa);
// The table used now (the best supported ISA unless forced).
HostIsa activeHostIsa();
// Tests only: makes reduceHost & co. use `isa`; false (and no change) when it
// is not supported. Not to be called while another thread reduces.
bool forceHostIsa(HostIsa isa);
// Back to the best supported ISA.
void resetHostIsa();

}  // namespace cpu
}  // namespace weft
