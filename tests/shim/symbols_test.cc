// Symbol completeness: every function the installed NCCL headers declare is
// exported by the shim, with its pnccl* profiling alias, from a library
// whose SONAME is libnccl.so.2 and which exports nothing else. A missing
// symbol breaks `import torch`, so this reads the headers themselves rather
// than a list that could go stale.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "shim/elf_reader.h"
#include "shim/header_parser.h"

namespace {

std::string realPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("the headers are parsed into a plausible list", "[shim][symbols]") {
  std::set<std::string> fns = shimtest::ncclHeaderFunctions(WEFT_NCCL_INCLUDE_DIR);
  std::set<std::string> dev = shimtest::ncclDeviceHostFunctions(WEFT_NCCL_INCLUDE_DIR);
  INFO("nccl.h functions: " << fns.size() << ", nccl_device.h host functions: " << dev.size());
  // NCCL 2.28 declares 41 functions, each twice (nccl*, pnccl*), and 11
  // host functions in nccl_device.h: a parser that broke would find far fewer.
  CHECK(fns.size() >= 80);
  CHECK(dev.size() >= 10);
  for (const char* must :
       {"ncclAllReduce", "pncclAllReduce", "ncclCommInitRankConfig", "ncclGetLastError",
        "ncclResetDebugInit", "ncclRecv", "pncclRecv", "ncclCommShrink", "ncclGroupSimulateEnd"})
    CHECK(fns.count(must) == 1);
  for (const char* must : {"ncclDevCommCreate", "ncclTeamWorld", "ncclLLA2ACalcSlots"})
    CHECK(dev.count(must) == 1);
  // The header declares each nccl* function with its pnccl* twin.
  for (const std::string& f : fns) {
    INFO(f);
    if (startsWith(f, "nccl")) CHECK(fns.count("p" + f) == 1);
  }
}

TEST_CASE("every declared function and its pnccl alias is exported by the shim",
          "[shim][symbols]") {
  std::set<std::string> want = shimtest::ncclHeaderFunctions(WEFT_NCCL_INCLUDE_DIR);
  for (const std::string& d : shimtest::ncclDeviceHostFunctions(WEFT_NCCL_INCLUDE_DIR)) {
    want.insert(d);
    want.insert("p" + d);
  }
  for (const std::string& f : std::set<std::string>(want))
    if (startsWith(f, "nccl")) want.insert("p" + f);
  REQUIRE(want.size() >= 100);

  void* h = dlopen(WEFT_SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
  INFO("dlopen " << WEFT_SHIM_PATH << ": " << (h ? "ok" : dlerror()));
  REQUIRE(h != nullptr);
  const std::string shim = realPath(WEFT_SHIM_PATH);
  std::string missing, foreign;
  for (const std::string& name : want) {
    void* f = dlsym(h, name.c_str());
    if (!f) {
      missing += " " + name;
      continue;
    }
    Dl_info info;
    if (!dladdr(f, &info) || realPath(info.dli_fname) != shim) foreign += " " + name;
  }
  INFO("checked " << want.size() << " names");
  CHECK(missing == "");
  CHECK(foreign == "");  // each must be defined by the shim itself
  dlclose(h);
}

TEST_CASE("SONAME libnccl.so.2 and only nccl*/pnccl* exports", "[shim][symbols]") {
  shimtest::ElfExports shim = shimtest::readElfExports(WEFT_SHIM_PATH);
  REQUIRE(shim.error == "");
  CHECK(shim.soname == "libnccl.so.2");
  std::string others;
  for (const std::string& s : shim.symbols)
    if (!startsWith(s, "nccl") && !startsWith(s, "pnccl")) others += " " + s;
  INFO("exports " << shim.symbols.size() << " symbols");
  CHECK(others == "");  // weft's own API and internals stay local
  CHECK(shim.symbols.size() >= 100);

  // The drop-in name next to it is the same library.
  const std::string dir =
      std::string(WEFT_SHIM_PATH).substr(0, std::string(WEFT_SHIM_PATH).rfind('/'));
  CHECK(realPath(dir + "/libnccl.so.2") == realPath(WEFT_SHIM_PATH));

  // libweft.so keeps its own SONAME: nothing else claims libnccl.so.2.
  shimtest::ElfExports weft = shimtest::readElfExports(WEFT_LIB_PATH);
  REQUIRE(weft.error == "");
  CHECK(weft.soname != "libnccl.so.2");
  CHECK(startsWith(weft.soname, "libweft.so"));
}

TEST_CASE("exports what the toolkit's real libnccl.so.2 exports", "[shim][symbols]") {
  const std::string real = WEFT_REAL_NCCL_PATH;
  if (real.empty()) {
    WARN("no real libnccl.so.2 was found at configure time; comparison skipped");
    return;
  }
  shimtest::ElfExports r = shimtest::readElfExports(realPath(real));
  REQUIRE(r.error == "");
  CHECK(r.soname == "libnccl.so.2");
  shimtest::ElfExports s = shimtest::readElfExports(WEFT_SHIM_PATH);
  std::set<std::string> ours(s.symbols.begin(), s.symbols.end());
  std::string missing;
  size_t n = 0;
  for (const std::string& sym : r.symbols) {
    if (!startsWith(sym, "nccl") && !startsWith(sym, "pnccl")) continue;
    ++n;
    if (!ours.count(sym)) missing += " " + sym;
  }
  INFO("the real library exports " << n << " nccl*/pnccl* symbols");
  CHECK(n > 0);
  CHECK(missing == "");
}
