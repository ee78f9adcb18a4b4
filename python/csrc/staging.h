// What the backend's ops share: staging of tensors weft cannot use in
// place, byte views, and several weft calls issued as one group.
#pragma once

#include <weft.h>

#include <ATen/ATen.h>

#include <functional>
#include <utility>
#include <vector>

namespace weft_torch {

// A contiguous tensor weft may write: `t` itself, or a staging copy whose
// contents go back to `t` after the op (copyBack).
inline at::Tensor writable(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
inline void copyBack(const at::Tensor& user, const at::Tensor& buf) {
  if (!user.is_same(buf)) user.copy_(buf);
}
inline void* ptr(const at::Tensor& t) { return t.data_ptr(); }
inline size_t bytes(const at::Tensor& t) { return t.nbytes(); }

// Several weft calls as one group (nested groups are fine: the outermost issues).
template <typename F>
weft_result_t grouped(F&& calls) {
  weft_result_t r = weft_group_start();
  if (r != WEFT_SUCCESS) return r;
  weft_result_t first = calls();
  weft_result_t end = weft_group_end();
  return first != WEFT_SUCCESS ? first : end;
}

// Calls call(0) .. call(n - 1) as one group; the first failure is returned.
template <typename F>
weft_result_t groupedEach(size_t n, F&& call) {
  return grouped([&] {
    for (size_t i = 0; i < n; ++i)
      if (weft_result_t e = call(i); e != WEFT_SUCCESS) return e;
    return WEFT_SUCCESS;
  });
}

// After the op: each staging buffer back into its user tensor.
inline std::function<void()> copyBackAll(std::vector<at::Tensor> users, std::vector<at::Tensor> bufs) {
  return [users = std::move(users), bufs = std::move(bufs)]() {
    for (size_t i = 0; i < users.size(); ++i) copyBack(users[i], bufs[i]);
  };
}

// Every tensor of `list` flattened, one after the other, into a new tensor.
inline at::Tensor flatCat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const at::Tensor& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies block i of `flat` (numel each) into list[i].
inline void scatterInto(const at::Tensor& flat, std::vector<at::Tensor>& list) {
  int64_t off = 0;
  for (at::Tensor& t : list) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}


}  // namespace weft_torch
