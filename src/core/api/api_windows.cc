// Windows (include/loom.h: loomCommWindowRegister): collective registrations of device buffers, kept
// by the communicator's device layer (device/peer_windows.h), which maps them for rank processes that
// share a GPU; core keeps the handles and routes collectives on buffers in windows to the device tuner
// that offers peer-memory plans (core/run/planner.h, PlanFor::DeviceInWindows).
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/api/api_result.h"
#include "core/communicator.h"
#include "core/run/group.h"
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

// Inside a group (nccl-tests registers its buffers between ncclGroupStart and ncclGroupEnd, and one
// thread may drive several communicators' ranks) registrations and deregistrations run at the group's
// end: each communicator's in call order (every rank then gives a window the same slot), side by side
// with the other communicators' (each waits for its peers, which may be the others).
struct QueuedWindowSteps {
  loomComm_t comm = nullptr;
  std::vector<std::function<Status()>> steps;
  std::atomic<bool> started{false};  // the group's end took them: later calls start a new queue
};
thread_local std::vector<std::shared_ptr<QueuedWindowSteps>> tlsQueued;

void queueForGroupEnd(loomComm_t comm, std::function<Status()> step) {
  std::erase_if(tlsQueued, [](const auto& q) { return q->started.load(); });
  auto found = std::find_if(tlsQueued.begin(), tlsQueued.end(), [&](const auto& q) { return q->comm == comm; });
  if (found == tlsQueued.end()) {
    auto queue = std::make_shared<QueuedWindowSteps>();
    queue->comm = comm;
    tlsQueued.push_back(queue);
    deferToGroupEnd([queue]() -> Status {
      queue->started = true;
      for (auto& step : queue->steps) LOOM_TRY(step());
      return Status::Ok();
    });
    found = tlsQueued.end() - 1;
  }
  (*found)->steps.push_back(std::move(step));
}

Status registerNow(loomComm_t comm, void* buff, size_t size, loomWindow* window) {
  std::lock_guard<std::mutex> lock(comm->busy);
  LOOM_TRY(checkCommUsable(comm));
  Status registered = comm->device->registerWindow(buff, size, &window->slot).withContext("loomCommWindowRegister");
  if (registered.ok()) window->registered = true;
  else std::erase_if(comm->windows, [&](const auto& w) { return w.get() == window; });
  return registered;
}

Status deregisterNow(loomComm_t comm, loomWindow* window) {
  std::lock_guard<std::mutex> lock(comm->busy);
  auto found = findWindow(comm, window);
  if (found == comm->windows.end() || !window->registered)
    return invalidArgument("loomCommWindowDeregister: the window is not one of {} (another communicator's, or "
                           "deregistered already)",
                           comm->describe());
  LOOM_TRY(checkCommUsable(comm));
  LOOM_TRY(comm->device->deregisterWindow(window->slot).withContext("loomCommWindowDeregister"));
  comm->windows.erase(found);
  return Status::Ok();
}

}  // namespace

LOOM_API loomResult_t loomCommWindowRegister(loomComm_t comm, void* buff, size_t size, loomWindow_t* win) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomCommWindowRegister"));
    if (!win) return invalidArgument("loomCommWindowRegister: win is NULL");
    loomWindow* window = nullptr;
    {
      std::lock_guard<std::mutex> lock(comm->busy);
      comm->windows.push_back(std::make_unique<loomWindow>());
      window = comm->windows.back().get();
      window->comm = comm;
    }
    *win = window;
    if (inGroup()) {
      queueForGroupEnd(comm, [=] { return registerNow(comm, buff, size, window); });
      return Status::Ok();
    }
    Status registered = registerNow(comm, buff, size, window);
    if (!registered.ok()) *win = nullptr;
    return registered;
  });
}

LOOM_API loomResult_t loomCommWindowDeregister(loomComm_t comm, loomWindow_t win) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomCommWindowDeregister"));
    if (inGroup()) {
      queueForGroupEnd(comm, [=] { return deregisterNow(comm, win); });
      return Status::Ok();
    }
    return deregisterNow(comm, win);
  });
}

LOOM_API loomResult_t loomWindowGetUserPtr(loomComm_t comm, loomWindow_t win, void** buff) {
  return apiCall(comm, [&]() -> Status {
    LOOM_TRY(checkWindowed(comm, "loomWindowGetUserPtr"));
    if (!buff) return invalidArgument("loomWindowGetUserPtr: buff is NULL");
    std::lock_guard<std::mutex> lock(comm->busy);
    if (findWindow(comm, win) == comm->windows.end() || !win->registered)
      return invalidArgument("loomWindowGetUserPtr: the window is not one of {} (or not registered yet: inside a "
                             "group, at its end)",
                             comm->describe());
    *buff = comm->device->window(win->slot).first;
    return Status::Ok();
  });
}
