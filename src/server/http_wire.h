// HTTP/1.1 messages with a string body written as the bytes Beast's
// serializer would write (start line, fields in order, blank line, body),
// rendered into one string and sent by one plain write; a head alone the
// same way (a chunked answer's, a HEAD request's). Beast's generic
// serializer walks a concatenation of buffer sequences per write; on the
// HTTP front's hot path (every answer) that machinery cost more than the
// rest of the write. A whole message with a chunked body goes through Beast.
#pragma once

#include <utility>  // before Boost 1.74's asio (see http_server.cc)

#include <boost/asio.hpp>
#include <array>
#include <boost/beast.hpp>
#include <string>
#include <string_view>

#include "server/asio_io.h"

namespace talaria::http_wire {

namespace http = boost::beast::http;

// Appends `msg`'s start line and header block (ending in the blank line).
template <bool kRequest, typename Fields>
void AppendHead(std::string& out, const http::header<kRequest, Fields>& msg) {
  const int version = msg.version();
  const char minor = static_cast<char>('0' + version % 10);
  const char major = static_cast<char>('0' + version / 10);
  if constexpr (kRequest) {
    const auto method = msg.method_string();
    const auto target = msg.target();
    out.append(method.data(), method.size()).append(1, ' ').append(target.data(), target.size());
    out.append(" HTTP/").append(1, major).append(1, '.').append(1, minor).append("\r\n");
  } else {
    const auto reason = msg.reason();
    out.append("HTTP/").append(1, major).append(1, '.').append(1, minor).append(1, ' ');
    out.append(std::to_string(msg.result_int())).append(1, ' ').append(reason.data(), reason.size()).append("\r\n");
  }
  for (const auto& field : msg) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.append(name.data(), name.size()).append(": ").append(value.data(), value.size()).append("\r\n");
  }
  out.append("\r\n");
}

// Writes `header` alone (its body, if any, follows in chunks or not at all).
template <typename Stream, bool kRequest, typename Fields>
io::Task<void> WriteHead(Stream& stream, const http::header<kRequest, Fields>& header, boost::system::error_code& ec) {
  std::string head;
  head.reserve(256);
  AppendHead(head, header);
  co_await boost::asio::async_write(stream, boost::asio::buffer(head), boost::asio::redirect_error(io::use_task, ec));
}

// Writes `msg` whole: one rendered head and the body, in one write when
// its body is delimited by Content-Length (or empty), else through Beast.
template <typename Stream, bool kRequest, typename Fields>
io::Task<void> Write(Stream& stream, const http::message<kRequest, http::string_body, Fields>& msg,
                     boost::system::error_code& ec) {
  if (msg.chunked()) {
    co_await http::async_write(stream, msg, boost::asio::redirect_error(io::use_task, ec));
    co_return;
  }
  std::string head;
  head.reserve(256);
  AppendHead(head, msg.base());
  const std::array<boost::asio::const_buffer, 2> bytes{boost::asio::buffer(head), boost::asio::buffer(msg.body())};
  co_await boost::asio::async_write(stream, bytes, boost::asio::redirect_error(io::use_task, ec));
}

}  // namespace talaria::http_wire
