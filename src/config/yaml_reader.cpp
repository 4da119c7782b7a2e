#include "yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "env_expand.hpp"
#include "key_suggest.hpp"

namespace relay::config::detail {

namespace {

constexpr std::size_t kMaxEchoed = 60;  // longer values are cut in messages
constexpr int kMaxMergeDepth = 8;

std::string kindOf(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "empty";
    case YAML::NodeType::Undefined:
      break;
  }
  return "undefined";
}

bool isPlainKey(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string formatNumber(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// uint32/uint64 fields with no bound of their own are "non-negative".
bool isTypeLimit(std::uint64_t max) {
  return max == std::numeric_limits<std::uint64_t>::max() ||
         max == std::numeric_limits<std::uint32_t>::max();
}

std::string describeInteger(std::uint64_t min, std::uint64_t max) {
  if (isTypeLimit(max)) {
    return min == 0 ? "a non-negative integer" : "an integer >= " + std::to_string(min);
  }
  return "an integer between " + std::to_string(min) + " and " + std::to_string(max);
}

struct RawEntry {
  std::string key;
  YAML::Node keyNode;
  YAML::Node value;
};

// Appends the entries of `map`: its own keys first (a repeated key is an
// error), then those pulled in by YAML merge keys (`<<: *anchor`), which never
// override a key already present.
void resolveMap(const Source& source, const std::string& path, const YAML::Node& map,
                std::vector<RawEntry>& out, int depth) {
  if (depth > kMaxMergeDepth) throwAt(source, map.Mark(), path, "merge keys ('<<') nest too deep");
  std::vector<std::pair<std::string, YAML::Mark>> own;
  std::vector<YAML::Node> merges;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node keyNode = it->first;  // copies: `it->` yields a temporary
    const YAML::Node valueNode = it->second;
    if (!keyNode.IsScalar()) throwAt(source, keyNode.Mark(), path, "keys must be plain strings");
    const std::string& key = keyNode.Scalar();
    for (const auto& [seen, mark] : own) {
      if (seen == key) {
        throwAt(
            source, keyNode.Mark(), path,
            "duplicate key '" + key + "' (first at line " + std::to_string(mark.line + 1) + ")");
      }
    }
    own.emplace_back(key, keyNode.Mark());
    if (key == "<<") {
      const YAML::Node& v = valueNode;
      if (v.IsMap()) {
        merges.push_back(v);
      } else if (v.IsSequence() &&
                 std::all_of(v.begin(), v.end(), [](const YAML::Node& n) { return n.IsMap(); })) {
        for (const YAML::Node& m : v) {
          merges.push_back(m);
        }
      } else {
        throwAt(source, keyNode.Mark(), path,
                "the value of a merge key ('<<') must be a map or a list of maps");
      }
      continue;
    }
    const bool present =
        std::any_of(out.begin(), out.end(), [&](const RawEntry& e) { return e.key == key; });
    if (!present) out.push_back({key, keyNode, valueNode});
  }
  for (const YAML::Node& m : merges) {
    resolveMap(source, path, m, out, depth + 1);
  }
}

}  // namespace

void throwAt(const Source& source, const YAML::Mark& mark, std::string_view path,
             std::string_view message) {
  std::string text = source.name;
  if (mark.line >= 0 && mark.column >= 0) {
    text += ':' + std::to_string(mark.line + 1) + ':' + std::to_string(mark.column + 1);
  }
  text += ": ";
  if (!path.empty()) {
    text += path;
    text += ": ";
  }
  text += message;
  throw ConfigError(text);
}

std::string childPath(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (isPlainKey(key)) {
    if (!out.empty()) out += '.';
    out += key;
  } else {
    out += "[\"";
    out += key;
    out += "\"]";
  }
  return out;
}

Value::Value(const Source& source, const YAML::Node& node, std::string path, YAML::Mark mark)
    : source_(&source), node_(node), path_(std::move(path)), mark_(mark) {}

void Value::fail(std::string_view message) const {
  throwAt(*source_, mark_, path_, message);
}

void Value::failAt(const YAML::Mark& mark, std::string_view message) const {
  throwAt(*source_, mark, path_, message);
}

MapView Value::map(std::initializer_list<std::string_view> knownKeys) const {
  MapView view = freeMap();
  for (std::size_t i = 0; i < view.entries_.size(); ++i) {
    const std::string& key = view.entries_[i].first;
    if (std::find(knownKeys.begin(), knownKeys.end(), key) != knownKeys.end()) continue;
    std::string message = "unknown key '" + key + "'";
    const std::vector<std::string_view> known(knownKeys);
    if (auto close = closestKey(key, known)) {
      message += " (did you mean '" + std::string(*close) + "'?)";
    } else {
      message += " (known keys: ";
      for (std::size_t k = 0; k < known.size(); ++k) {
        if (k > 0) message += ", ";
        message += known[k];
      }
      message += ')';
    }
    throwAt(*source_, view.keyMarks_[i], path_, message);
  }
  return view;
}

MapView Value::freeMap() const {
  MapView view(*this);
  if (isNull()) return view;
  if (!isMap()) fail("must be a map, not " + kindOf(node_));
  std::vector<RawEntry> raw;
  resolveMap(*source_, path_, node_, raw, 0);
  view.entries_.reserve(raw.size());
  view.keyMarks_.reserve(raw.size());
  for (RawEntry& e : raw) {
    // An empty value's own mark points past the line; the key is clearer.
    const YAML::Mark mark =
        e.value.IsNull() || e.value.Mark().line < 0 ? e.keyNode.Mark() : e.value.Mark();
    std::string path = childPath(path_, e.key);
    view.entries_.emplace_back(e.key, Value(*source_, e.value, std::move(path), mark));
    view.keyMarks_.push_back(e.keyNode.Mark());
  }
  return view;
}

std::vector<Value> Value::list() const {
  std::vector<Value> out;
  if (isNull()) return out;
  if (!isList()) fail("must be a list, not " + kindOf(node_));
  std::size_t i = 0;
  for (const YAML::Node& item : node_) {
    const YAML::Mark mark = item.IsNull() || item.Mark().line < 0 ? mark_ : item.Mark();
    out.emplace_back(*source_, item, path_ + '[' + std::to_string(i) + ']', mark);
    ++i;
  }
  return out;
}

Value::Scalar Value::scalar(std::string_view expected) const {
  if (isNull()) fail("must be " + std::string(expected) + ", got no value");
  if (!node_.IsScalar()) fail("must be " + std::string(expected) + ", not " + kindOf(node_));
  Expansion e = expandEnv(node_.Scalar(), *source_->env);
  if (!e.error.empty()) fail(e.error);
  return Scalar{std::move(e.text), e.substituted};
}

std::string Value::quoted(const Scalar& s) const {
  // What came from the environment may be a secret put in the wrong place:
  // show what the file says instead.
  const std::string& shown = s.fromEnv ? node_.Scalar() : s.text;
  std::string out = "'" + shown.substr(0, kMaxEchoed) + (shown.size() > kMaxEchoed ? "...'" : "'");
  if (s.fromEnv) out += " (expanded value not shown)";
  return out;
}

std::string Value::echo() const {
  if (!node_.IsScalar()) return kindOf(node_);
  const Expansion e = expandEnv(node_.Scalar(), *source_->env);
  return quoted(Scalar{e.text, e.substituted || !e.error.empty()});
}

std::string Value::string() const {
  return scalar("a string").text;
}

std::string Value::secret() const {
  // Same as string(); expansion errors never quote the value, and callers
  // must not quote what this returns.
  std::string text = scalar("a string").text;
  // Secrets go into HTTP header lines: a newline (common at the end of a
  // mounted secret file) would split the request. Say so without the value.
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      fail(u == '\n' || u == '\r'
               ? "contains a line break (a trailing newline from a secret file?); remove it"
               : "contains a control character; remove it");
    }
  }
  return text;
}

bool Value::boolean() const {
  const Scalar s = scalar("true or false");
  if (s.text == "true" || s.text == "True" || s.text == "TRUE") return true;
  if (s.text == "false" || s.text == "False" || s.text == "FALSE") return false;
  fail("must be true or false, got " + quoted(s));
}

std::uint64_t Value::integer(std::uint64_t min, std::uint64_t max) const {
  const std::string expected = describeInteger(min, max);
  const Scalar s = scalar(expected);
  const std::string& t = s.text;
  std::uint64_t v = 0;
  const bool digits =
      !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) fail("must be " + expected + ", got " + quoted(s));
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > max)) {
    const std::string limit = isTypeLimit(max) ? " (at most " + std::to_string(max) + ")" : "";
    fail("must be " + expected + limit + ", got " + quoted(s));
  }
  if (ec != std::errc() || end != t.data() + t.size()) {
    fail("must be " + expected + ", got " + quoted(s));
  }
  if (v < min) fail("must be " + expected + ", got " + quoted(s));
  return v;
}

double Value::number(double min, std::optional<double> max) const {
  const std::string expected =
      max ? "a number between " + formatNumber(min) + " and " + formatNumber(*max)
          : "a number >= " + formatNumber(min);
  const Scalar s = scalar(expected);
  const std::string& t = s.text;
  double v = 0;
  const char* first = t.data();
  if (!t.empty() && t.front() == '+') ++first;
  const auto [end, ec] = std::from_chars(first, t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) {
    fail("must be " + expected + ", got " + quoted(s));
  }
  if (v < min || (max && v > *max)) fail("must be " + expected + ", got " + quoted(s));
  return v;
}

std::optional<Value> MapView::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return v;
  }
  return std::nullopt;
}

void MapView::failAtKey(std::string_view key, std::string_view message) const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first == key) entries_[i].second.failAt(keyMarks_[i], message);
  }
  self_.fail(message);
}

Value MapView::require(std::string_view key) const {
  if (auto v = find(key)) return *v;
  self_.fail("missing required key '" + std::string(key) + "'");
}

}  // namespace relay::config::detail
