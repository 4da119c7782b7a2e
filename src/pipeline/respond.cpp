#include "relay/pipeline/respond.hpp"

#include "relay/common/json_write.hpp"

namespace relay::pipeline {

namespace {

void jsonHead(int status, Headers headers, net::ResponseHead& head) {
  head.status = status;
  head.headers = std::move(headers);
  head.headers.set("content-type", "application/json");
}

}  // namespace

void errorAnswer(Headers headers, ApiError error, net::ResponseHead& head, std::string& body) {
  for (const HeaderField& f : error.headers)
    headers.add(f.name, f.value);
  body = openAiErrorJson(error.message, error.type, error.code, error.param, error.traceId);
  jsonHead(error.status, std::move(headers), head);
}

net::Task<void> respondError(net::ResponseSink& sink, Headers headers, ApiError error) {
  net::ResponseHead head;
  std::string body;
  errorAnswer(std::move(headers), std::move(error), head, body);
  co_await sink.respond(std::move(head), std::move(body));
}

net::Task<void> respondJson(net::ResponseSink& sink, int status, Headers headers,
                            std::string body) {
  net::ResponseHead head;
  jsonHead(status, std::move(headers), head);
  co_await sink.respond(std::move(head), std::move(body));
}

}  // namespace relay::pipeline
