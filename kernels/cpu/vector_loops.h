// The loop drivers of the vector reduction kernels, shared by every
// instruction set: reduce2, reduceN and divide over a lane type P (its
// V, W, load, store, storeNT, kStreamable and arithmetic), unrolled, with
// non-temporal stores for large destinations and scalar tails that reuse
// the functors of kernels/ops.h (so every ISA gives the portable bits).
//
// Not a normal header: each ISA's kernel file (reduce_avx2.cc,
// reduce_avx512.cc) includes it inside its anonymous namespace, after
// defining WEFT_ISA and WEFT_ISA_INL (its target attributes: a function
// that uses vector instructions must carry them, so the loops cannot be
// one template compiled once) and kVectorBytes (its vector width).
#if !defined(WEFT_ISA) || !defined(WEFT_ISA_INL)
#error "define WEFT_ISA and WEFT_ISA_INL before including vector_loops.h"
#endif

template <class P, int OP>
WEFT_ISA_INL typename P::V apply(typename P::V a, typename P::V b) {
  if constexpr (OP == WEFT_SUM) return P::add(a, b);
  if constexpr (OP == WEFT_PROD) return P::mul(a, b);
  if constexpr (OP == WEFT_MAX) return P::max(a, b);
  if constexpr (OP == WEFT_MIN) return P::min(a, b);
}

template <class P, bool kNT>
WEFT_ISA_INL void put(typename P::T* p, typename P::V v) {
  if constexpr (kNT) {
    P::storeNT(p, v);
  } else {
    P::store(p, v);
  }
}

// Where non-temporal stores start: the number of leading elements to do one
// by one until dst is kVectorBytes-aligned, or SIZE_MAX for regular stores.
template <class P>
WEFT_ISA_INL size_t streamHead(const void* dst, size_t count) {
  using T = typename P::T;
  if (!P::kStreamable || count * sizeof(T) < kStreamStoreBytes) return SIZE_MAX;
  const size_t mis = reinterpret_cast<uintptr_t>(dst) % kVectorBytes;
  if (mis % sizeof(T) != 0) return SIZE_MAX;
  return mis ? (kVectorBytes - mis) / sizeof(T) : 0;
}

// Whole vectors from element i on; returns where it stopped (< W left).
template <class P, int OP, bool kNT>
WEFT_ISA_INL size_t body2(typename P::T* d, const typename P::T* x, const typename P::T* y,
                          size_t i, size_t count) {
  constexpr size_t W = P::W;
  for (; i + 4 * W <= count; i += 4 * W) {
    const typename P::V r0 = apply<P, OP>(P::load(x + i), P::load(y + i));
    const typename P::V r1 = apply<P, OP>(P::load(x + i + W), P::load(y + i + W));
    const typename P::V r2 = apply<P, OP>(P::load(x + i + 2 * W), P::load(y + i + 2 * W));
    const typename P::V r3 = apply<P, OP>(P::load(x + i + 3 * W), P::load(y + i + 3 * W));
    put<P, kNT>(d + i, r0);
    put<P, kNT>(d + i + W, r1);
    put<P, kNT>(d + i + 2 * W, r2);
    put<P, kNT>(d + i + 3 * W, r3);
  }
  for (; i + W <= count; i += W) put<P, kNT>(d + i, apply<P, OP>(P::load(x + i), P::load(y + i)));
  return i;
}

template <class P, int OP>
WEFT_ISA void reduce2(void* dst, const void* a, const void* b, size_t count) {
  using T = typename P::T;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  const OpFunctor<T, OP> f;
  size_t i = 0;
  if constexpr (P::kStreamable) {
    const size_t head = streamHead<P>(d, count);
    if (head != SIZE_MAX) {
      for (; i < head; ++i) d[i] = f(x[i], y[i]);
      i = body2<P, OP, true>(d, x, y, i, count);
      _mm_sfence();
    }
  }
  i = body2<P, OP, false>(d, x, y, i, count);
  for (; i < count; ++i) d[i] = f(x[i], y[i]);
}

// Element i of the multi-source reduction, in scalar arithmetic.
template <typename T, int OP>
WEFT_ISA_INL void scalarN(T* d, const void* const* srcs, int nsrc, size_t i) {
  using A = Arith<T>;
  typename A::Acc acc = A::toAcc(static_cast<const T*>(srcs[0])[i]);
  for (int k = 1; k < nsrc; ++k) {
    acc = OpFunctor<T, OP>::combine(acc, A::toAcc(static_cast<const T*>(srcs[k])[i]));
  }
  d[i] = A::fromAcc(acc);
}

template <class P, int OP, bool kNT>
WEFT_ISA_INL size_t bodyN(typename P::T* d, const void* const* srcs, int nsrc, size_t i,
                          size_t count) {
  using T = typename P::T;
  using V = typename P::V;
  constexpr size_t W = P::W;
  const T* s0 = static_cast<const T*>(srcs[0]);
  for (; i + 2 * W <= count; i += 2 * W) {
    V acc0 = P::load(s0 + i), acc1 = P::load(s0 + i + W);
    for (int k = 1; k < nsrc; ++k) {
      const T* s = static_cast<const T*>(srcs[k]) + i;
      acc0 = apply<P, OP>(acc0, P::load(s));
      acc1 = apply<P, OP>(acc1, P::load(s + W));
    }
    put<P, kNT>(d + i, acc0);
    put<P, kNT>(d + i + W, acc1);
  }
  for (; i + W <= count; i += W) {
    V acc = P::load(s0 + i);
    for (int k = 1; k < nsrc; ++k) {
      acc = apply<P, OP>(acc, P::load(static_cast<const T*>(srcs[k]) + i));
    }
    put<P, kNT>(d + i, acc);
  }
  return i;
}

template <class P, int OP>
WEFT_ISA void reduceN(void* dst, const void* const* srcs, int nsrc, size_t count) {
  using T = typename P::T;
  T* d = static_cast<T*>(dst);
  size_t i = 0;
  if constexpr (P::kStreamable) {
    const size_t head = streamHead<P>(d, count);
    if (head != SIZE_MAX) {
      for (; i < head; ++i) scalarN<T, OP>(d, srcs, nsrc, i);
      i = bodyN<P, OP, true>(d, srcs, nsrc, i, count);
      _mm_sfence();
    }
  }
  i = bodyN<P, OP, false>(d, srcs, nsrc, i, count);
  for (; i < count; ++i) scalarN<T, OP>(d, srcs, nsrc, i);
}

// AVG's final step for floating types: x / n, rounded back once.
template <class P>
WEFT_ISA void divide(void* dst, size_t count, uint64_t n) {
  using T = typename P::T;
  using A = Arith<T>;
  using Acc = typename A::Acc;
  T* d = static_cast<T*>(dst);
  const Acc dv = static_cast<Acc>(n);
  const typename P::V vd = P::splat(dv);
  size_t i = 0;
  for (; i + P::W <= count; i += P::W) P::store(d + i, P::div(P::load(d + i), vd));
  for (; i < count; ++i) d[i] = A::fromAcc(A::toAcc(d[i]) / dv);
}

template <class P, int... OPS>
void fillType(HostKernels* k, int dt, std::integer_sequence<int, OPS...>) {
  ((k->reduce2[dt][OPS] = &reduce2<P, OPS>), ...);
  ((k->reduceN[dt][OPS] = &reduceN<P, OPS>), ...);
}

template <class P>
void fillType(HostKernels* k, int dt) {
  fillType<P>(k, dt, std::make_integer_sequence<int, kNumArithOps>());
}
