// The host reduction kernels (kernels/cpu/reduce.h): names and the choice
// of instruction set. Conversions: test_convert.cc; reductions:
// test_reduce.cc, test_reduce_rules.cc.
#include "kernels/kernel_ref.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

using namespace kref;

// ---- Names -----------------------------------------------------------------------

TEST_CASE("datatype and op names match nccl-tests", "[kernels]") {
  const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  for (int dt = 0; dt < WEFT_NUM_DATATYPES; ++dt) {
    CHECK(std::string(datatypeName(static_cast<weft_datatype_t>(dt))) == names[dt]);
    CHECK(datatypeSize(static_cast<weft_datatype_t>(dt)) == sizes[dt]);
  }
  CHECK(datatypeSize(static_cast<weft_datatype_t>(WEFT_NUM_DATATYPES)) == 0);
  const char* ops[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  for (int op = 0; op < WEFT_NUM_OPS; ++op) {
    CHECK(std::string(opName(static_cast<weft_op_t>(op))) == ops[op]);
  }
}

TEST_CASE("the best ISA is chosen and can be forced", "[kernels]") {
  const std::string isa = hostReduceIsa();
  CHECK((isa == "avx512" || isa == "avx2" || isa == "portable"));
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kPortable));
  if (cpu::hostIsaSupported(cpu::HostIsa::kAvx512)) {
    CHECK(isa == "avx512");
  } else if (cpu::hostIsaSupported(cpu::HostIsa::kAvx2)) {
    CHECK(isa == "avx2");
  }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  // libgcc's view of the CPU (it checks the OS's saved state as well).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
                    __builtin_cpu_supports("fma");
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kAvx2) == avx2);
  CHECK(cpu::hostIsaSupported(cpu::HostIsa::kAvx512) ==
        (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")));
#endif
  {
    IsaGuard g(cpu::HostIsa::kPortable);
    REQUIRE(g.ok);
    CHECK(std::string(hostReduceIsa()) == "portable");
  }
  CHECK(std::string(hostReduceIsa()) == isa);
}
