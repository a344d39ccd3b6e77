// loom._C: the LoomBackend class (a torch._C._distributed_c10d.Backend) and library facts.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include "backend.h"

namespace py = pybind11;

namespace loomtorch {
}

namespace {

// torch binds its backends with a holder that drops the GIL while the backend is destroyed
// (destruction waits for queued operations, whose futures may run Python callbacks); the same
// holder is used here so that LoomBackend can derive from torch's Backend class.
template <typename T>
class NoGilDestructorPtr {
 public:
  NoGilDestructorPtr() = default;
  NoGilDestructorPtr(const NoGilDestructorPtr&) = default;
  NoGilDestructorPtr(NoGilDestructorPtr&&) = default;
  NoGilDestructorPtr& operator=(const NoGilDestructorPtr&) = default;
  NoGilDestructorPtr& operator=(NoGilDestructorPtr&&) = default;
  NoGilDestructorPtr(c10::intrusive_ptr<T> impl) : impl_(std::move(impl)) {}  // NOLINT: implicit by design
  explicit NoGilDestructorPtr(T* impl) : impl_(c10::intrusive_ptr<T>::unsafe_steal_from_new(impl)) {}
  ~NoGilDestructorPtr() {
    if (!impl_) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      impl_.reset();
    } else {
      impl_.reset();
    }
  }
  T& operator*() const noexcept { return *impl_; }
  T* operator->() const noexcept { return impl_.get(); }
  T* get() const noexcept { return impl_.get(); }

 private:
  c10::intrusive_ptr<T> impl_;
};

}  // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, NoGilDestructorPtr<T>, true)

PYBIND11_MODULE(_C, m) {
  m.doc() = "Loom collective communication: torch.distributed backend";
  py::object torchBackend = py::module_::import("torch._C._distributed_c10d").attr("Backend");
  py::class_<loomtorch::LoomBackend, NoGilDestructorPtr<loomtorch::LoomBackend>>(m, "LoomBackend", torchBackend)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& groupName) {
             return NoGilDestructorPtr<loomtorch::LoomBackend>(
                 c10::make_intrusive<loomtorch::LoomBackend>(store, rank, size, timeout, groupName));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("group_name") = "",
           py::call_guard<py::gil_scoped_release>());
  m.def("library_path", &loomtorch::LoomBackend::libraryPath, "the libloom file this extension uses");
  m.def("version", [] {
    int v = 0;
    loomGetVersion(&v);
    return v;
  });
}
