// One I/O thread and its Boost.Asio io_context. The HTTP front and the
// gateway's instance links of one process may share a loop, so a call's
// hops from client connection to instance connection and back stay on one
// thread (no cross-thread wake-ups); each creates its own when given none.
#pragma once

#include <chrono>
#include <memory>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace talaria {

// Seconds (a configured timeout or period) as a steady-clock duration, for
// the servers' deadlines on the wall clock.
inline std::chrono::steady_clock::duration WallSeconds(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

class IoLoop {
 public:
  IoLoop();
  ~IoLoop();
  IoLoop(const IoLoop&) = delete;
  IoLoop& operator=(const IoLoop&) = delete;

  // Starts the thread; later calls do nothing.
  void Start();
  // Stops the loop and joins its thread; pending work never runs. Idempotent.
  void Stop();
  boost::asio::io_context& context();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace talaria
