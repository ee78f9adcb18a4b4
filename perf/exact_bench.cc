// weft-exact-bench: the exact-sum kernel (kernels/cpu/exact_sum.h, behind
// WEFT_REPRO=exact) against reduceHostN, the default reduction kernel, on the
// same buffers: random normal data, nsrc sources of `count` elements, GB/s of
// output (count x element size / time), best of `reps` runs, and how many
// elements took the slow path (and, for the narrow types, what share of the
// AVG's elements finished in float lanes). A kernel benchmark without peers; the figures
// and their method are in docs/reproducibility.md ("The exact mode's
// arithmetic").
//
//   weft-exact-bench [count] [reps] [isa] [type]
//     isa: portable, avx2, avx512 or best (default: the best this CPU runs)
//     type: f32, bf16, f64, f16, e4m3 or e5m2 (default: all)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/exact_sum.h"
#include "kernels/cpu/reduce.h"
#include "kernels/ops.h"

using namespace weft;

namespace {

void store(weft_datatype_t dt, uint8_t* p, double x) {
  switch (dt) {
    case WEFT_FLOAT64:
      std::memcpy(p, &x, 8);
      break;
    case WEFT_FLOAT32: {
      const float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
      break;
    }
    case WEFT_FLOAT16: {
      const half_t h = floatToHalf(static_cast<float>(x));
      std::memcpy(p, &h, 2);
      break;
    }
    case WEFT_BFLOAT16: {
      const bf16_t h = floatToBf16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
      break;
    }
    case WEFT_FP8_E4M3: {
      const fp8e4m3_t h = floatToFp8e4m3(static_cast<float>(x));
      std::memcpy(p, &h, 1);
      break;
    }
    default: {
      const fp8e5m2_t h = floatToFp8e5m2(static_cast<float>(x));
      std::memcpy(p, &h, 1);
      break;
    }
  }
}

template <typename F>
double bestSeconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = s < best ? s : best;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{4} << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  if (argc > 3 && std::strcmp(argv[3], "best") != 0) {
    const char* isa = argv[3];
    const cpu::HostIsa want = !std::strcmp(isa, "portable") ? cpu::HostIsa::kPortable
                              : !std::strcmp(isa, "avx2")   ? cpu::HostIsa::kAvx2
                                                            : cpu::HostIsa::kAvx512;
    if (!cpu::forceHostIsa(want)) {
      std::fprintf(stderr, "isa %s is not supported here\n", isa);
      return 2;
    }
  }
  const struct {
    weft_datatype_t dt;
    const char* name;
  } types[] = {{WEFT_FLOAT32, "f32"}, {WEFT_BFLOAT16, "bf16"}, {WEFT_FLOAT64, "f64"},
               {WEFT_FLOAT16, "f16"}, {WEFT_FP8_E4M3, "e4m3"}, {WEFT_FP8_E5M2, "e5m2"}};
  std::printf("count %zu, best of %d, isa %d; GB/s of output\n", count, reps,
              static_cast<int>(cpu::activeHostIsa()));
  std::printf("%-5s %2s %9s %9s %6s %9s %6s %10s %7s\n", "type", "n", "exactSUM", "reduceN",
              "ratio", "exactAVG", "ratio", "slow(AVG)", "float%");
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const auto& t : types) {
    if (argc > 4 && std::strcmp(argv[4], t.name) != 0) continue;
    const size_t es = datatypeSize(t.dt);
    for (int n : {2, 4, 8}) {
      std::vector<std::vector<uint8_t>> src(n, std::vector<uint8_t>(count * es));
      for (auto& s : src) {
        for (size_t i = 0; i < count; ++i) store(t.dt, s.data() + i * es, normal(rng));
      }
      std::vector<const void*> p;
      for (auto& s : src) p.push_back(s.data());
      std::vector<uint8_t> dst(count * es);
      const double bytes = static_cast<double>(count * es);
      const double tRed =
          bestSeconds(reps, [&] { reduceHostN(dst.data(), p.data(), n, count, t.dt, WEFT_SUM); });
      const double tSum =
          bestSeconds(reps, [&] { exactSumHost(dst.data(), p.data(), n, count, t.dt, false); });
      const ExactSumCounters before = exactSumCounters();
      const double tAvg =
          bestSeconds(reps, [&] { exactSumHost(dst.data(), p.data(), n, count, t.dt, true); });
      const double slow = static_cast<double>(exactSumCounters().slow - before.slow) / reps;
      const double inFloat = 100.0 *
                             static_cast<double>(exactSumCounters().floatFast - before.floatFast) /
                             (static_cast<double>(count) * reps);
      std::printf("%-5s %2d %9.2f %9.2f %5.1fx %9.2f %5.1fx %10.0f %6.1f%%\n", t.name, n,
                  bytes / tSum / 1e9, bytes / tRed / 1e9, tSum / tRed, bytes / tAvg / 1e9,
                  tAvg / tRed, slow, inFloat);
    }
  }
  return 0;
}
