#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/io_loop.h"

#include <boost/asio.hpp>
#include <mutex>
#include <optional>
#include <thread>

namespace talaria {

struct IoLoop::Impl {
  boost::asio::io_context io{1};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::mutex mu;
  std::thread thread;
  bool started = false;
};

IoLoop::IoLoop() : impl_(std::make_unique<Impl>()) {}

IoLoop::~IoLoop() { Stop(); }

void IoLoop::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->started) return;
  impl_->started = true;
  impl_->work.emplace(impl_->io.get_executor());
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

void IoLoop::Stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

boost::asio::io_context& IoLoop::context() { return impl_->io; }

}  // namespace talaria
