// Lists the functions the toolkit's NCCL headers declare, by reading them:
//  - nccl.h: every declaration "<type> [*] nccl...(" / "pnccl...(" at file
//    level (comments, string literals and preprocessor lines removed first);
//  - nccl_device.h and every header it includes (quoted includes, followed
//    recursively): the host functions, declared "NCCL_EXTERN_C __host__
//    <type> nccl...(". The NCCL_HOST_DEVICE_INLINE ones are defined in the
//    headers themselves and are not library exports.
#pragma once

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace shimtest {

inline std::string readText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Drops comments and the contents of string and character literals.
inline std::string stripCommentsAndStrings(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size();) {
    if (in.compare(i, 2, "//") == 0) {
      while (i < in.size() && in[i] != '\n') ++i;
    } else if (in.compare(i, 2, "/*") == 0) {
      size_t end = in.find("*/", i + 2);
      i = end == std::string::npos ? in.size() : end + 2;
      out += ' ';
    } else if (in[i] == '"' || in[i] == '\'') {
      const char q = in[i++];
      while (i < in.size() && in[i] != q) i += in[i] == '\\' ? 2 : 1;
      ++i;
      out += q;
      out += q;
    } else {
      out += in[i++];
    }
  }
  return out;
}

// Drops preprocessor lines, with their backslash continuations.
inline std::string dropPreprocessor(const std::string& in) {
  std::string out;
  std::istringstream ss(in);
  std::string line;
  bool cont = false;
  while (std::getline(ss, line)) {
    size_t first = line.find_first_not_of(" \t");
    bool directive = cont || (first != std::string::npos && line[first] == '#');
    cont = directive && !line.empty() && line.back() == '\\';
    if (!directive) out += line + "\n";
  }
  return out;
}

// Names matched by `re` (group 1) in each statement (text between ; { }).
inline void collect(const std::string& text, const std::regex& re, std::set<std::string>* out) {
  std::string stmt;
  for (char c : text) {
    if (c == ';' || c == '{' || c == '}') {
      std::smatch m;
      if (std::regex_search(stmt, m, re)) out->insert(m[1]);
      stmt.clear();
    } else {
      stmt += c;
    }
  }
}

// Functions declared by nccl.h (nccl* and pnccl* names).
inline std::set<std::string> ncclHeaderFunctions(const std::string& includeDir) {
  std::string text = dropPreprocessor(stripCommentsAndStrings(readText(includeDir + "/nccl.h")));
  // A statement that declares a function: optional attributes, a return
  // type (identifiers, maybe const, maybe a pointer), then the name and "(".
  static const std::regex decl(
      R"(^\s*(?:__attribute__\s*\(\(.*\)\)\s*)?(?:[A-Za-z_]\w*\s+)*[A-Za-z_]\w*[\s\*]+(p?nccl\w*)\s*\()");
  std::set<std::string> names;
  collect(text, decl, &names);
  return names;
}

// Host functions of nccl_device.h (nccl* names) and of the headers it includes.
inline std::set<std::string> ncclDeviceHostFunctions(const std::string& includeDir) {
  std::set<std::string> names, seen;
  std::vector<std::string> todo = {includeDir + "/nccl_device.h"};
  static const std::regex include(R"(#\s*include\s*"([^"]+)\")");
  static const std::regex hostDecl(R"(NCCL_EXTERN_C\s+__host__\s+[^(]*?\b(nccl\w*)\s*\()");
  while (!todo.empty()) {
    std::string path = todo.back();
    todo.pop_back();
    if (!seen.insert(path).second) continue;
    std::string raw = readText(path);
    if (raw.empty()) continue;
    // A header for Windows builds only (it stops a Linux build with #error):
    // what it declares is not part of the Linux ABI.
    static const std::regex windowsOnly(
        R"(#\s*if\s*!\s*defined\s*\(?\s*NCCL_OS_WINDOWS\s*\)?\s*\n\s*#\s*error)");
    if (std::regex_search(raw, windowsOnly)) continue;
    const std::string dir = path.substr(0, path.rfind('/'));
    for (std::sregex_iterator it(raw.begin(), raw.end(), include), end; it != end; ++it) {
      const std::string inc = (*it)[1];
      std::ifstream probe(dir + "/" + inc);
      todo.push_back(probe ? dir + "/" + inc : includeDir + "/" + inc);
    }
    collect(dropPreprocessor(stripCommentsAndStrings(raw)), hostDecl, &names);
  }
  return names;
}

}  // namespace shimtest
