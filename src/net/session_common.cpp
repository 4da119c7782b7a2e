#include "session_common.hpp"

#include <boost/asio/socket_base.hpp>

#include "relay/common/request_id.hpp"

namespace relay::net {

void resetConnection(tcp::socket& socket) {
  boost::system::error_code ec;
  socket.set_option(asio::socket_base::linger(true, 0), ec);
  socket.close(ec);
}

std::string peerAddress(tcp::socket& socket) {
  boost::system::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return {};
  std::string host = ep.address().to_string();
  if (ep.address().is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

bool isHopByHopHeader(std::string_view n) {
  // By length first: every field of every head passes here, and most names
  // have a length no hop-by-hop name has (one compare, no memcmp call).
  switch (n.size()) {
    case 2:
      return n == "te";
    case 7:
      return n == "upgrade" || n == "trailer";
    case 10:
      return n == "connection" || n == "keep-alive";
    case 14:
      return n == "http2-settings";
    case 16:
      return n == "proxy-connection";
    case 17:
      return n == "transfer-encoding";
    default:
      return false;
  }
}

ResponseHead sessionErrorHead(int status, std::string_view requestId) {
  ResponseHead head;
  head.status = status;
  head.headers.add("content-type", "application/json");
  head.headers.add("x-request-id", requestIdFrom(requestId));
  return head;
}

std::string sessionErrorBody(std::string_view message, std::string_view code) {
  return openAiErrorJson(message, "invalid_request_error", code);
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return status < 300   ? "OK"
             : status < 400 ? "Redirect"
             : status < 500 ? "Client Error"
                            : "Server Error";
  }
}

}  // namespace relay::net
