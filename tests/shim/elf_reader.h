// Reads what the symbol tests need from a 64-bit ELF shared library: its
// SONAME and its exported (defined, global or weak) dynamic symbols. A
// small reader of the file itself, so the test does not depend on readelf.
#pragma once

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace shimtest {

struct ElfExports {
  std::string error;  // empty when the file was read
  std::string soname;
  std::vector<std::string> symbols;  // defined GLOBAL/WEAK functions and objects
};

inline ElfExports readElfExports(const std::string& path) {
  ElfExports out;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    out.error = "cannot open " + path;
    return out;
  }
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (b.size() < sizeof(Elf64_Ehdr) || memcmp(b.data(), ELFMAG, SELFMAG) != 0 ||
      b[EI_CLASS] != ELFCLASS64) {
    out.error = path + " is not a 64-bit ELF file";
    return out;
  }
  Elf64_Ehdr eh;
  memcpy(&eh, b.data(), sizeof eh);
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    memcpy(&sh, b.data() + eh.e_shoff + i * eh.e_shentsize, sizeof sh);
    return sh;
  };
  if (eh.e_shoff + static_cast<size_t>(eh.e_shnum) * eh.e_shentsize > b.size()) {
    out.error = path + ": section headers past the end of the file";
    return out;
  }
  auto str = [&](const Elf64_Shdr& strtab, size_t off) -> std::string {
    if (strtab.sh_offset + off >= b.size()) return "";
    return std::string(b.data() + strtab.sh_offset + off);
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_type == SHT_DYNAMIC) {
      Elf64_Shdr strtab = section(sh.sh_link);
      for (size_t off = 0; off + sizeof(Elf64_Dyn) <= sh.sh_size; off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        memcpy(&d, b.data() + sh.sh_offset + off, sizeof d);
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_SONAME) out.soname = str(strtab, d.d_un.d_val);
      }
    } else if (sh.sh_type == SHT_DYNSYM) {
      Elf64_Shdr strtab = section(sh.sh_link);
      for (size_t off = sizeof(Elf64_Sym); off + sizeof(Elf64_Sym) <= sh.sh_size;
           off += sizeof(Elf64_Sym)) {
        Elf64_Sym s;
        memcpy(&s, b.data() + sh.sh_offset + off, sizeof s);
        const int bind = ELF64_ST_BIND(s.st_info), type = ELF64_ST_TYPE(s.st_info);
        if (s.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
        if (type != STT_FUNC && type != STT_OBJECT && type != STT_GNU_IFUNC) continue;
        out.symbols.push_back(str(strtab, s.st_name));
      }
    }
  }
  return out;
}

}  // namespace shimtest
