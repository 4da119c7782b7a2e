#include "relay/pipeline/respond.hpp"

#include "relay/common/json_write.hpp"

namespace relay::pipeline {

net::Task<void> respondError(net::ResponseSink& sink, Headers headers, ApiError error) {
  for (const HeaderField& f : error.headers)
    headers.add(f.name, f.value);
  co_await respondJson(
      sink, error.status, std::move(headers),
      openAiErrorJson(error.message, error.type, error.code, error.param, error.traceId));
}

net::Task<void> respondJson(net::ResponseSink& sink, int status, Headers headers,
                            std::string body) {
  net::ResponseHead head;
  head.status = status;
  head.headers = std::move(headers);
  head.headers.set("content-type", "application/json");
  co_await sink.respond(std::move(head), std::move(body));
}

}  // namespace relay::pipeline
