#include "chat_request.hpp"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

namespace relay::mock {

namespace {

using Json = nlohmann::json;

// Where the parser stands, as far as the mock cares. Anything outside these
// places is skipped (only its depth is tracked).
enum class Place {
  kOther,
  kRoot,           // the top-level object
  kStreamOptions,  // root.stream_options
  kMessages,       // root.messages (array)
  kMessage,        // root.messages[i]
  kParts,          // root.messages[i].content (array)
  kPart,           // root.messages[i].content[j]
};

class Extractor : public nlohmann::json_sax<Json> {
 public:
  explicit Extractor(ChatRequestResult& out) : out_(out), req_(out.request) {}

  bool null() override { return scalar(); }
  bool boolean(bool value) override {
    if (in(Place::kRoot) && key_ == "stream") req_.stream = value;
    if (in(Place::kStreamOptions) && key_ == "include_usage") req_.includeUsage = value;
    return scalar();
  }
  bool number_integer(number_integer_t value) override {
    if (value >= 0) noteMaxTokens(static_cast<std::uint64_t>(value));
    return scalar();
  }
  bool number_unsigned(number_unsigned_t value) override {
    noteMaxTokens(value);
    return scalar();
  }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }

  bool string(string_t& value) override {
    if (in(Place::kRoot) && key_ == "model") {
      req_.model = std::move(value);
      sawModel_ = true;
    } else if (in(Place::kMessage) && key_ == "role") {
      messageIsUser_ = value == "user";
    } else if (in(Place::kMessage) && key_ == "content") {
      addContent(value);
    } else if (in(Place::kPart) && key_ == "text") {
      addContent(value);
    }
    return scalar();
  }

  bool start_object(std::size_t) override {
    Place next = Place::kOther;
    if (stack_.empty()) {
      next = Place::kRoot;
    } else if (in(Place::kRoot) && key_ == "stream_options") {
      next = Place::kStreamOptions;
    } else if (in(Place::kMessages)) {
      next = Place::kMessage;
      messageIsUser_ = false;
      messageText_.clear();
    } else if (in(Place::kParts)) {
      next = Place::kPart;
    }
    if (stack_.empty() && next != Place::kRoot) return fail("the body must be a JSON object");
    stack_.push_back(next);
    return true;
  }

  bool end_object() override {
    Place done = stack_.back();
    stack_.pop_back();
    if (done == Place::kMessage) {
      ++req_.messageCount;
      if (messageIsUser_) {
        req_.lastUserContent = std::move(messageText_);
        req_.hasUserMessage = true;
      }
      messageText_.clear();
    }
    key_.clear();
    return true;
  }

  bool start_array(std::size_t) override {
    if (stack_.empty()) return fail("the body must be a JSON object");
    Place next = Place::kOther;
    if (in(Place::kRoot) && key_ == "messages") {
      next = Place::kMessages;
      sawMessages_ = true;
    } else if (in(Place::kMessage) && key_ == "content") {
      next = Place::kParts;
    }
    stack_.push_back(next);
    return true;
  }

  bool end_array() override {
    stack_.pop_back();
    key_.clear();
    return true;
  }

  bool key(string_t& value) override {
    // Keys that matter are short, so this stays within the small-string buffer.
    key_ = std::move(value);
    if (in(Place::kRoot) && key_ == "messages") rootMessagesKeySeen_ = true;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    if (out_.error.empty()) {
      out_.error = "We could not parse the JSON body of your request (error at byte " +
                   std::to_string(position) + "). Send valid JSON.";
    }
    return false;
  }

  void finish() {
    if (!out_.error.empty()) return;
    if (!sawModel_ || req_.model.empty()) {
      out_.error = "you must provide a model parameter";
      out_.param = "model";
    } else if (!sawMessages_) {
      out_.error = rootMessagesKeySeen_ ? "'messages' must be an array"
                                        : "Missing required parameter: 'messages'.";
      out_.param = "messages";
    } else if (req_.messageCount == 0) {
      out_.error = "'messages' must be a non-empty array of message objects";
      out_.param = "messages";
    }
  }

 private:
  bool in(Place p) const { return stack_.size() >= 1 && stack_.back() == p; }

  bool scalar() {
    if (stack_.empty()) return fail("the body must be a JSON object");
    return true;
  }

  bool fail(const char* why) {
    out_.error = why;
    return false;
  }

  void noteMaxTokens(std::uint64_t value) {
    if (!in(Place::kRoot) || (key_ != "max_tokens" && key_ != "max_completion_tokens")) return;
    req_.maxTokens = req_.maxTokens ? std::min(*req_.maxTokens, value) : value;
  }

  void addContent(const std::string& text) {
    req_.contentChars += countCodePoints(text);
    messageText_ += text;
  }

  ChatRequestResult& out_;
  ChatRequest& req_;
  std::vector<Place> stack_;
  std::string key_;          // the last key read in the innermost object
  std::string messageText_;  // content of the message being read
  bool messageIsUser_ = false;
  bool sawModel_ = false;
  bool sawMessages_ = false;
  bool rootMessagesKeySeen_ = false;
};

}  // namespace

std::uint64_t countCodePoints(std::string_view utf8) {
  std::uint64_t n = 0;
  for (char c : utf8)
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

ChatRequestResult parseChatRequest(std::string_view body) {
  ChatRequestResult result;
  Extractor extractor(result);
  bool parsed = Json::sax_parse(body, &extractor);
  if (parsed) extractor.finish();
  if (!parsed && result.error.empty())
    result.error = "We could not parse the JSON body of your request.";
  return result;
}

}  // namespace relay::mock
