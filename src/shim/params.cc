// NCCL's parameter API (nccl.h, NCCL 2.30): read access to the settings the
// library runs with, keyed by their environment variables' names. The shim's
// parameters are the NCCL_* variables it knows (ncclVariables: translated
// into weft's, read by the shim itself, or ignored with a reason) and every
// WEFT_* setting of weft's Config, with the value in effect. Values are read
// at each access (NCCL's are live too); a handle is bound to its key for the
// life of the process.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/config.h"
#include "shim/shim.h"

#if NCCL_VERSION_CODE >= 23000

struct ncclParamHandle {
  std::string key;
};

using namespace weft::shim;

namespace {

std::vector<std::pair<std::string, std::string>> parameters() {
  std::vector<std::pair<std::string, std::string>> all = ncclVariables();
  for (auto& e : weft::Config::fromEnv().entries()) all.push_back(std::move(e));
  return all;
}

bool valueOf(const std::string& key, std::string* out) {
  for (auto& [k, v] : parameters()) {
    if (k == key) {
      *out = v;
      return true;
    }
  }
  return false;
}

struct Handles {
  std::mutex mu;
  std::deque<ncclParamHandle> all;  // stable addresses
  std::map<std::string, ncclParamHandle*> byKey;
};

Handles& handles() {
  static Handles* h = new Handles;  // never destroyed: handles outlive static destruction
  return *h;
}

ncclResult_t unknownKey(const char* fn, const char* key) {
  return setError(nullptr, ncclInvalidArgument,
                  std::string(fn) + ": \"" + (key ? key : "(null)") +
                      "\" is not a parameter of weft's NCCL shim (ncclParamGetAllParameterKeys "
                      "lists them)");
}

ncclResult_t valueOfHandle(const char* fn, ncclParamHandle_t h, std::string* out) {
  if (!h) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": handle is NULL");
  if (!valueOf(h->key, out)) return unknownKey(fn, h->key.c_str());
  return ncclSuccess;
}

// The value as an integer in [lo, hi] (signed) or [0, uhi] (unsigned).
template <typename T>
ncclResult_t getInt(const char* fn, ncclParamHandle_t h, T* out) {
  if (!out) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": out is NULL");
  std::string v;
  if (ncclResult_t r = valueOfHandle(fn, h, &v); r != ncclSuccess) return r;
  const char* s = v.c_str();
  char* end = nullptr;
  errno = 0;
  bool ok = !v.empty();
  T x = 0;
  if (ok && std::is_signed<T>::value) {
    const long long n = strtoll(s, &end, 0);
    ok = errno == 0 && *end == '\0' && n >= static_cast<long long>(std::numeric_limits<T>::min()) &&
         n <= static_cast<long long>(std::numeric_limits<T>::max());
    x = static_cast<T>(n);
  } else if (ok) {
    const unsigned long long n = strtoull(s, &end, 0);
    ok = errno == 0 && *end == '\0' && v[0] != '-' &&
         n <= static_cast<unsigned long long>(std::numeric_limits<T>::max());
    x = static_cast<T>(n);
  }
  if (!ok)
    return setError(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": " + h->key + " is \"" + v + "\", not a number that fits");
  *out = x;
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  const char* fn = "ncclParamBind";
  if (!out || !key)
    return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": out or key is NULL");
  std::string v;
  if (!valueOf(key, &v)) return unknownKey(fn, key);
  Handles& hs = handles();
  std::lock_guard<std::mutex> lk(hs.mu);
  auto it = hs.byKey.find(key);
  if (it == hs.byKey.end()) {
    hs.all.push_back(ncclParamHandle{key});
    it = hs.byKey.emplace(key, &hs.all.back()).first;
  }
  *out = it->second;
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclParamBind)

#define WEFT_PARAM_GET(NAME, T)                                     \
  ncclResult_t pncclParamGet##NAME(ncclParamHandle_t h, T* out) {   \
    return getInt("ncclParamGet" #NAME, h, out);                    \
  }                                                                 \
  WEFT_NCCL_ALIAS(ncclParamGet##NAME)
WEFT_PARAM_GET(I8, int8_t)
WEFT_PARAM_GET(I16, int16_t)
WEFT_PARAM_GET(I32, int32_t)
WEFT_PARAM_GET(I64, int64_t)
WEFT_PARAM_GET(U8, uint8_t)
WEFT_PARAM_GET(U16, uint16_t)
WEFT_PARAM_GET(U32, uint32_t)
WEFT_PARAM_GET(U64, uint64_t)
#undef WEFT_PARAM_GET

ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out) {
  const char* fn = "ncclParamGetStr";
  if (!out) return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": out is NULL");
  thread_local std::string held;  // valid until this thread's next call
  std::string v;
  if (ncclResult_t r = valueOfHandle(fn, h, &v); r != ncclSuccess) return r;
  held = std::move(v);
  *out = held.c_str();
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclParamGetStr)

// The raw bytes are the value's characters and its terminating NUL; *len
// says how many, also when maxLen is too small (then nothing is copied).
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const char* fn = "ncclParamGet";
  if (!len || (!out && maxLen > 0))
    return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": out or len is NULL");
  std::string v;
  if (ncclResult_t r = valueOfHandle(fn, h, &v); r != ncclSuccess) return r;
  if (v.size() + 1 > static_cast<size_t>(INT_MAX))
    return setError(nullptr, ncclInternalError, std::string(fn) + ": value too long");
  *len = static_cast<int>(v.size() + 1);
  if (maxLen < *len)
    return setError(nullptr, ncclInvalidArgument,
                    std::string(fn) + ": " + h->key + " needs " + std::to_string(*len) +
                        " bytes, maxLen is " + std::to_string(maxLen));
  memcpy(out, v.c_str(), v.size() + 1);
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclParamGet)

ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  const char* fn = "ncclParamGetParameter";
  if (!key || !value || !valueLen)
    return setError(nullptr, ncclInvalidArgument, std::string(fn) + ": an argument is NULL");
  thread_local std::string held;
  std::string v;
  if (!valueOf(key, &v)) return unknownKey(fn, key);
  held = std::move(v);
  *value = held.c_str();
  *valueLen = static_cast<int>(held.size());
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclParamGetParameter)

ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (!table || !tableLen)
    return setError(nullptr, ncclInvalidArgument,
                    "ncclParamGetAllParameterKeys: table or tableLen is NULL");
  thread_local std::vector<std::string> keys;
  thread_local std::vector<const char*> ptrs;
  keys.clear();
  ptrs.clear();
  for (auto& kv : parameters()) keys.push_back(kv.first);
  for (const std::string& k : keys) ptrs.push_back(k.c_str());
  *table = ptrs.data();
  *tableLen = static_cast<int>(ptrs.size());
  return ncclSuccess;
}
WEFT_NCCL_ALIAS(ncclParamGetAllParameterKeys)

void pncclParamDumpAll(void) {
  for (auto& [k, v] : parameters()) printf("weft (NCCL shim) parameter %s=%s\n", k.c_str(), v.c_str());
  fflush(stdout);
}
WEFT_NCCL_ALIAS(ncclParamDumpAll)

}  // extern "C"

#endif  // NCCL_VERSION_CODE >= 23000
