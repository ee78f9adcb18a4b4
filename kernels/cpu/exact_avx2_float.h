// The exact-sum kernel's float lanes for the narrow types (f16, bf16, fp8;
// 8 per register): loads widened exactly to float, TwoSum in float, the
// AVG quotient rounded to odd at 24 bits, the rounding of an exact float
// to T, and one group of sixteen (groupFloat). exact_avx2.cc's header
// comment says how they fit into the kernel.
//
// Not a normal header (as vector_loops.h): exact_avx2.cc includes it inside
// its anonymous namespace, after defining WEFT_AVX2_INL and the double
// lanes' helpers it uses (Load, Format, ...), so that every function here
// carries the AVX2 target attributes.
#if !defined(WEFT_AVX2_INL)
#error "exact_avx2.cc includes this inside its namespace, after defining WEFT_AVX2_INL"
#endif

WEFT_AVX2_INL __m256i splat32(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }

// Eight elements of T at p widened to float (exact); fp8 NaN (and e5m2
// infinity) become NaN, which the group's finiteness test sends to the
// double path.
template <typename T>
struct LoadF;
template <>
struct LoadF<half_t> {
  static WEFT_AVX2_INL __m256 run(const half_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
template <>
struct LoadF<bf16_t> {
  static WEFT_AVX2_INL __m256 run(const bf16_t* p) { return Load<bf16_t>::eight(p); }
};
// fp8: the magnitude's bits placed under float's exponent field (kShift),
// scaled by 2^kScale: exact, subnormals included; codes >= kSpecial are NaN.
template <typename T, int kShift, int kScale, uint32_t kSpecial>
struct LoadFp8F {
  static WEFT_AVX2_INL __m256 run(const T* p) {
    const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i mag = _mm256_and_si256(w, splat32(0x7f));
    const __m256 scale = _mm256_castsi256_ps(splat32(static_cast<uint32_t>(127 + kScale) << 23));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, kShift)), scale);
    const __m256i special = _mm256_cmpgt_epi32(mag, splat32(kSpecial - 1));
    v = _mm256_blendv_ps(v, _mm256_castsi256_ps(splat32(0x7fc00000)), _mm256_castsi256_ps(special));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, splat32(0x80)), 24);
    return _mm256_or_ps(v, _mm256_castsi256_ps(sign));
  }
};
template <>
struct LoadF<fp8e4m3_t> : LoadFp8F<fp8e4m3_t, 20, 120, 0x7f> {};
template <>
struct LoadF<fp8e5m2_t> : LoadFp8F<fp8e5m2_t, 21, 112, 0x7c> {};

WEFT_AVX2_INL void twoSumF(__m256 a, __m256 x, __m256* s, __m256* e) {
  *s = _mm256_add_ps(a, x);
  const __m256 bb = _mm256_sub_ps(*s, a);
  *e = _mm256_add_ps(_mm256_sub_ps(a, _mm256_sub_ps(*s, bb)), _mm256_sub_ps(x, bb));
}

// q = S / n rounded to odd at 24 bits (S exact, n <= 2^24 exact in float):
// divideToOdd's steps in float. The residual fma(-q, n, S) is exact (a
// multiple of ulp(q) below 2^24 ulp(q)).
WEFT_AVX2_INL __m256 divideToOddF(__m256 s, __m256 n) {
  const __m256 q = _mm256_div_ps(s, n);
  const __m256 r = _mm256_fnmadd_ps(q, n, s);
  const __m256i qb = _mm256_castps_si256(q);
  const __m256i one = splat32(1);
  const __m256i even = _mm256_cmpeq_epi32(_mm256_and_si256(qb, one), _mm256_setzero_si256());
  const __m256i inexact = _mm256_castps_si256(_mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  const __m256i away = _mm256_srli_epi32(_mm256_xor_si256(_mm256_castps_si256(r), qb), 31);
  const __m256i step = _mm256_sub_epi32(one, _mm256_add_epi32(away, away));  // +1 or -1
  return _mm256_castsi256_ps(
      _mm256_add_epi32(qb, _mm256_and_si256(step, _mm256_and_si256(inexact, even))));
}

// fp8: ops.h's detail::roundMagnitude in 32-bit lanes (finite x; x is never
// a float subnormal: every nonzero sum of fp8 values is >= 2^-16, every
// quotient >= 2^-40), saturated to the largest finite code, sign included.
template <typename T>
WEFT_AVX2_INL __m256i fp8Code(__m256 x) {
  using F = Format<T>;
  constexpr int MB = F::kMant, BIAS = F::kBias;
  const __m256i xb = _mm256_castps_si256(x);
  const __m256i a = _mm256_and_si256(xb, splat32(0x7fffffff));
  const __m256i one = splat32(1);
  const __m256i normal = _mm256_sub_epi32(
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(a, splat32((1u << (22 - MB)) - 1)),
                                         _mm256_and_si256(_mm256_srli_epi32(a, 23 - MB), one)),
                        23 - MB),
      splat32(static_cast<uint32_t>(127 - BIAS) << MB));
  // Subnormal in T: quanta of 2^(1 - BIAS - MB), the shift clamped to 25.
  __m256i shift =
      _mm256_sub_epi32(splat32(static_cast<uint32_t>(151 - BIAS - MB)), _mm256_srli_epi32(a, 23));
  shift = _mm256_min_epi32(shift, splat32(25));
  const __m256i m = _mm256_or_si256(_mm256_and_si256(a, splat32(0x7fffff)), splat32(0x800000));
  const __m256i sub = _mm256_srlv_epi32(
      _mm256_add_epi32(
          _mm256_add_epi32(
              m, _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one)), one)),
          _mm256_and_si256(_mm256_srlv_epi32(m, shift), one)),
      shift);
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - BIAS + 1) << 23;
  const __m256i isNormal = _mm256_cmpgt_epi32(a, splat32(kMinNormal - 1));
  __m256i code = _mm256_blendv_epi8(sub, normal, isNormal);
  code = _mm256_min_epu32(code, splat32(static_cast<uint32_t>(F::kMaxCode)));
  return _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(xb, 24), splat32(0x80)));
}

// Stores sixteen exact floats (two registers) rounded once to T.
template <typename T>
WEFT_AVX2_INL void storeNarrow(const __m256* q, T* out) {
  if constexpr (std::is_same<T, half_t>::value) {
    for (int v = 0; v < 2; ++v) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * v),
                       _mm256_cvtps_ph(q[v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  } else if constexpr (std::is_same<T, bf16_t>::value) {
    __m256i c[2];
    for (int v = 0; v < 2; ++v) {
      const __m256i x = _mm256_castps_si256(q[v]);  // finite: ops.h's floatToBf16
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), splat32(1));
      c[v] = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, splat32(0x7fff)), lsb), 16);
    }
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(c[0], c[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), w);
  } else {
    const __m256i w =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(fp8Code<T>(q[0]), fp8Code<T>(q[1])), 0xd8);
    const __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), b);
  }
}

// One group of sixteen narrow elements at i in float lanes: sums, rounds
// into out, returns the lanes whose float sum is not proven exact and
// finite (bit j for element i + j; out's value there is meaningless).
template <typename T, bool kCheck>
WEFT_AVX2_INL uint32_t groupFloat(const void* const* srcs, int nsrc, size_t i, bool average,
                                  __m256 n, T* out) {
  const T* s0 = static_cast<const T*>(srcs[0]) + i;
  __m256 hi[2] = {LoadF<T>::run(s0), LoadF<T>::run(s0 + 8)};
  __m256i flag[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int k = 1; k < nsrc; ++k) {
    const T* sk = static_cast<const T*>(srcs[k]) + i;
    const __m256 x[2] = {LoadF<T>::run(sk), LoadF<T>::run(sk + 8)};
    for (int v = 0; v < 2; ++v) {
      if constexpr (kCheck) {
        __m256 s, e;
        twoSumF(hi[v], x[v], &s, &e);
        hi[v] = s;
        flag[v] = _mm256_or_si256(flag[v], _mm256_castps_si256(e));
      } else {
        hi[v] = _mm256_add_ps(hi[v], x[v]);
      }
    }
  }
  uint32_t mask = 0;
  __m256 q[2];
  for (int v = 0; v < 2; ++v) {
    // The error bits without their sign (a -0 error is no error), and non-finite sums.
    const __m256i e = _mm256_and_si256(flag[v], splat32(0x7fffffff));
    const __m256i exp = _mm256_and_si256(_mm256_castps_si256(hi[v]), splat32(0x7f800000));
    const __m256i bad = _mm256_or_si256(
        _mm256_xor_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()), splat32(~0u)),
        _mm256_cmpeq_epi32(exp, splat32(0x7f800000)));
    mask |= static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(bad))) << (8 * v);
    q[v] = average ? divideToOddF(hi[v], n) : hi[v];
  }
  storeNarrow<T>(q, out);
  return mask;
}
