// Answers the pipeline gives itself: OpenAI-shaped errors and small JSON bodies.
#pragma once

#include <string>

#include "relay/common/headers.hpp"
#include "relay/net/exchange.hpp"

namespace relay::pipeline {

// An OpenAI error: {"error":{"message","type","param","code"}}.
struct ApiError {
  int status = 500;
  std::string message;  // says what to fix; never contains a secret
  std::string type = "invalid_request_error";
  std::string code;     // "" -> null
  std::string param;    // "" -> null
  Headers headers;      // extra fields this error needs (retry-after, x-should-retry)
  std::string traceId;  // the request's W3C trace id: "trace_id" in the body; "" = none
};

// Parameters are taken by value: GCC 12 mishandles temporaries bound to
// reference parameters inside a co_await expression, so callers pass named
// objects (moved) and never build the error inline in the co_await.
net::Task<void> respondError(net::ResponseSink& sink, Headers headers, ApiError error);
net::Task<void> respondJson(net::ResponseSink& sink, int status, Headers headers, std::string body);

// The answer respondError() gives, made into `head` and `body` and not
// written: for a caller that writes it with ResponseSink::respondNow() (no
// coroutine; a refused request, the common case under a hot key's limits)
// and awaits respond() only when that cannot.
void errorAnswer(Headers headers, ApiError error, net::ResponseHead& head, std::string& body);

}  // namespace relay::pipeline
