#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include "server/asio_timer.h"

#include "server/asio_io.h"

#include <boost/asio.hpp>
#include <chrono>

#include "core/error.h"

namespace talaria {

AsioTimer::AsioTimer(std::shared_ptr<const Clock> clock, double time_scale)
    : clock_(std::move(clock)), time_scale_(time_scale) {
  TALARIA_CHECK(clock_ != nullptr && time_scale > 0, "AsioTimer needs a clock and a positive time scale");
}

AsioTimer::~AsioTimer() { Stop(); }

void AsioTimer::At(TimePoint at, std::function<void()> fn) {
  const Duration ahead = std::max(Duration::zero(), at - clock_->Now());
  const auto wall = std::chrono::duration_cast<std::chrono::steady_clock::duration>(ahead / time_scale_);
  auto& io = loop_.context();
  boost::asio::post(io, [&io, wall, fn = std::move(fn)]() mutable {
    auto timer = std::make_shared<io::Timer>(io, wall);
    timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
      if (!ec) fn();
    });
  });
}

}  // namespace talaria
