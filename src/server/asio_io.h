// The servers' Boost.Asio types, bound to the io_context's own executor
// type instead of asio's type-erased `any_io_executor` (the default of
// `tcp::socket`, `steady_timer`, `awaitable<T>` and `beast::tcp_stream`).
// With the concrete type a completion whose handler runs on the same
// io_context is invoked directly; through the type-erased one every
// completion is wrapped in an executor function, allocated, and its
// executor copied and destroyed through function pointers (Boost 1.74:
// about eight allocations a gateway request, ~3% of its CPU in perf).
// Every server coroutine is a `Task<T>` awaited with `use_task`, every
// connection a `Stream`, every timer a `Timer`.
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>

namespace talaria::io {

using Executor = boost::asio::io_context::executor_type;
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>;
using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::ip::tcp, Executor>;
using Stream = boost::beast::basic_stream<boost::asio::ip::tcp, Executor>;
using Timer = boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                                boost::asio::wait_traits<std::chrono::steady_clock>, Executor>;
template <typename T>
using Task = boost::asio::awaitable<T, Executor>;
// The completion token that makes an asynchronous operation a Task.
inline constexpr boost::asio::use_awaitable_t<Executor> use_task{};

}  // namespace talaria::io
