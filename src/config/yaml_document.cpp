#include "yaml_document.hpp"

#include <sstream>
#include <string>

#include <yaml-cpp/eventhandler.h>

namespace relay::config::detail {

namespace {

// Records where a document starts. yaml-cpp 0.7 does not consume a token it
// cannot start a document with (a stray ',' before any content): each call to
// HandleNextDocument then reports another empty document at the same place,
// which is why YAML::LoadAll never returns on such input and allocates until
// the process dies. Comparing the start of two documents detects it.
class DocumentStart final : public YAML::EventHandler {
 public:
  YAML::Mark start;

  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

bool samePlace(const YAML::Mark& a, const YAML::Mark& b) {
  return a.pos == b.pos && a.line == b.line && a.column == b.column;
}

// yaml-cpp reports a tab used for indentation as some other error.
std::string tabHint(std::string_view text, int line) {
  std::size_t start = 0;
  for (int i = 0; i < line && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos || start >= text.size()) return "";
  const std::size_t indentEnd = text.find_first_not_of(" \t", start);
  const std::string_view indent = text.substr(start, indentEnd - start);
  if (indent.find('\t') == std::string_view::npos) return "";
  return " (this line is indented with a tab; YAML indents with spaces only)";
}

std::string unexpectedAt(std::string_view text, const YAML::Mark& mark) {
  if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text.size()) return "unexpected token";
  const char c = text[static_cast<std::size_t>(mark.pos)];
  if (c < 0x20 || c == 0x7f) return "unexpected character";
  return std::string("unexpected '") + c + "'";
}

}  // namespace

YAML::Node loadSingleDocument(std::string_view text, const Source& source) {
  const std::string owned(text);
  try {
    std::istringstream in(owned);
    YAML::Parser parser(in);
    DocumentStart first;
    DocumentStart second;
    if (!parser.HandleNextDocument(first)) {
      throw ConfigError(source.name + ": the file holds no configuration");
    }
    if (parser.HandleNextDocument(second)) {
      if (samePlace(first.start, second.start)) {
        throwAt(source, first.start, "", "invalid YAML: " + unexpectedAt(text, first.start));
      }
      throwAt(source, second.start, "", "expected one YAML document; a second one starts here");
    }
    YAML::Node root = YAML::Load(owned);
    if (root.IsNull()) throw ConfigError(source.name + ": the file holds no configuration");
    return root;
  } catch (const YAML::ParserException& e) {
    throwAt(source, e.mark, "", "invalid YAML: " + e.msg + tabHint(text, e.mark.line));
  } catch (const YAML::Exception& e) {
    throwAt(source, e.mark, "", "invalid YAML: " + e.msg);
  }
}

}  // namespace relay::config::detail
