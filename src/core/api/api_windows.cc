// Windows (include/loom.h: loomCommWindowRegister): collective registrations of device buffers, kept
// by the communicator's device layer (device/peer_windows.h), which maps them for rank processes that
// share a GPU; core keeps the handles and routes collectives on buffers in windows to the device tuner
// that offers peer-memory plans (core/run/planner.h, PlanFor::DeviceInWindows).
#include <algorithm>
#include <memory>
#include <mutex>

#include "core/api/api_result.h"
#include "core/communicator.h"
#include "device/device_layer.h"

using namespace loom;

namespace {

Status checkWindowed(loomComm_t comm, const char* function) {
  if (!comm) return invalidArgument("{}: comm is NULL", function);
  if (!comm->device)
    return errorStatus(loomInvalidUsage, "{}: {} serves no device memory (a build without CUDA)", function,
                       comm->describe());
  return Status::Ok();
}

// The window's place among comm's, or windows.end(): a handle this communicator did not make (or one
// deregistered already) is an error, not a crash.
auto findWindow(loomComm_t comm, loomWindow_t win) {
  return std::find_if(comm->windows.begin(), comm->windows.end(), [&](const auto& w) { return w.get() == win; });
}

}  // namespace

LOOM_API loomResult_t loomCommWindowRegister(loomComm_t comm, void* buff, size_t size, loomWindow_t* win) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomCommWindowRegister"));
    if (!win) return invalidArgument("loomCommWindowRegister: win is NULL");
    *win = nullptr;
    std::lock_guard<std::mutex> lock(comm->busy);
    LOOM_TRY(checkCommUsable(comm));
    auto window = std::make_unique<loomWindow>();
    window->comm = comm;
    LOOM_TRY(comm->device->registerWindow(buff, size, &window->slot).withContext("loomCommWindowRegister"));
    *win = window.get();
    comm->windows.push_back(std::move(window));
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomCommWindowDeregister(loomComm_t comm, loomWindow_t win) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomCommWindowDeregister"));
    std::lock_guard<std::mutex> lock(comm->busy);
    auto found = findWindow(comm, win);
    if (found == comm->windows.end())
      return invalidArgument("loomCommWindowDeregister: the window is not one of {} (another communicator's, or "
                             "deregistered already)",
                             comm->describe());
    LOOM_TRY(checkCommUsable(comm));
    LOOM_TRY(comm->device->deregisterWindow(win->slot).withContext("loomCommWindowDeregister"));
    comm->windows.erase(found);
    return Status::Ok();
  });
}

LOOM_API loomResult_t loomWindowGetUserPtr(loomComm_t comm, loomWindow_t win, void** buff) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomWindowGetUserPtr"));
    if (!buff) return invalidArgument("loomWindowGetUserPtr: buff is NULL");
    std::lock_guard<std::mutex> lock(comm->busy);
    if (findWindow(comm, win) == comm->windows.end())
      return invalidArgument("loomWindowGetUserPtr: the window is not one of {}", comm->describe());
    *buff = comm->device->window(win->slot).first;
    return Status::Ok();
  });
}
