// weft._C: the Python module of the torch backend. weft/torch/__init__.py
// registers create_backend with torch.distributed as backend "weft".
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <pybind11/chrono.h>

#include "placement.h"
#include "process_group.h"

namespace {

c10::intrusive_ptr<c10d::Backend> createBackend(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int size, double timeoutS,
                                                const std::string& groupName) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "weft: rank ", rank,
              " of a group of size ", size);
  TORCH_CHECK(timeoutS > 0, "weft: the timeout must be positive, not ", timeoutS, " s");
  auto ms = std::chrono::milliseconds(static_cast<int64_t>(timeoutS * 1000));
  py::gil_scoped_release noGil;  // joining waits for the other ranks
  return c10::make_intrusive<weft_torch::ProcessGroupWeft>(store, rank, size, ms, groupName);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "weft's torch.distributed backend";
  py::module::import("torch.distributed");
  m.def("create_backend", &createBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_s"), py::arg("group_name") = "",
        "Creates the weft c10d backend of one process group (collective over its ranks).");
  m.def("comm_handle", [](const c10::intrusive_ptr<c10d::Backend>& b) {
    auto* w = dynamic_cast<weft_torch::ProcessGroupWeft*>(b.get());
    TORCH_CHECK(w, "weft: not a weft backend");
    return reinterpret_cast<uintptr_t>(w->comm());
  }, "The weft_comm_t of a weft backend, as an integer (for ctypes).");
  m.def("allreduce_wire",
        [](const c10::intrusive_ptr<c10d::Backend>& b, at::Tensor t, int wire, bool average) {
          auto* w = dynamic_cast<weft_torch::ProcessGroupWeft*>(b.get());
          TORCH_CHECK(w, "weft: not a weft backend");
          return w->allreduceWire(std::move(t), wire, average);
        },
        py::arg("backend"), py::arg("tensor"), py::arg("wire"), py::arg("average") = true,
        "Allreduces a float32 CPU tensor in place with its data carried as `wire` (1 none, 2 "
        "bf16, 3 fp16: weft_wire_t) and accumulated in float32; returns the Work "
        "(docs/compression.md).");
  m.def("cuda_supported", &weft_torch::cudaTensorsSupported,
        "Whether this build takes CUDA tensors (weft and torch both built with CUDA).");
  int v = 0;
  weft_get_version(&v);
  m.attr("weft_version_code") = v;
}
