// How long ago a moment of the steady clock was, in seconds: what the fault tests hold their limits to.
#pragma once

#include <chrono>

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
