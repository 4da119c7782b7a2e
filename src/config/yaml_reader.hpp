// A thin, strict view over yaml-cpp nodes for the config parser.
//
// Every value carries the file name, its position and its key path, so that a
// mistake anywhere becomes "FILE:LINE:COLUMN: KEY.PATH: message". Maps are read
// through MapView, which refuses unknown and duplicate keys. String scalars are
// `${ENV}`-expanded when read. Private to src/config.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "relay/config/parse.hpp"

namespace relay::config::detail {

// Shared by every Value of one parse; must outlive them.
struct Source {
  std::string name;
  const EnvLookup* env = nullptr;
};

// Throws ConfigError "NAME:LINE:COLUMN: PATH: message" (1-based; parts that are
// unknown are left out).
[[noreturn]] void throwAt(const Source& source, const YAML::Mark& mark, std::string_view path,
                          std::string_view message);

// "upstreams[1]" + "weight" -> "upstreams[1].weight"; keys that are not plain
// identifiers are bracketed: routes["gpt-4.1"].
std::string childPath(std::string_view parent, std::string_view key);

class MapView;

class Value {
 public:
  Value(const Source& source, const YAML::Node& node, std::string path, YAML::Mark mark);

  const std::string& path() const { return path_; }
  const YAML::Mark& mark() const { return mark_; }
  bool isNull() const { return node_.IsNull(); }
  bool isMap() const { return node_.IsMap(); }
  bool isList() const { return node_.IsSequence(); }

  [[noreturn]] void fail(std::string_view message) const;
  [[noreturn]] void failAt(const YAML::Mark& mark, std::string_view message) const;

  // A map with a fixed set of keys; unknown keys are refused. Null = empty.
  MapView map(std::initializer_list<std::string_view> knownKeys) const;
  // A map whose keys are the user's (model ids, route names). Null = empty.
  MapView freeMap() const;
  // Null = empty; anything but a list is refused.
  std::vector<Value> list() const;

  // Scalars, after ${ENV} expansion. Values are quoted in error messages,
  // except those read with secret() (and any that came from the environment).
  std::string string() const;
  std::string secret() const;
  // The value as an error message may show it: 'text', or for a value that
  // came from the environment, what the file says ('${NAME}'), never the
  // expansion. Never call it on a secret.
  std::string echo() const;
  bool boolean() const;
  double number(double min, std::optional<double> max = std::nullopt) const;
  std::uint64_t integer(std::uint64_t min, std::uint64_t max) const;

  template <typename T>
  T unsignedInt(T min = 0, T max = std::numeric_limits<T>::max()) const {
    return static_cast<T>(integer(min, max));
  }

 private:
  struct Scalar {
    std::string text;
    bool fromEnv = false;  // some ${NAME} was expanded: echo the reference, not the text
  };
  Scalar scalar(std::string_view expected) const;
  std::string quoted(const Scalar& s) const;

  const Source* source_;
  YAML::Node node_;
  std::string path_;
  YAML::Mark mark_;
};

class MapView {
 public:
  using Entry = std::pair<std::string, Value>;

  explicit MapView(Value self) : self_(std::move(self)) {}

  std::optional<Value> find(std::string_view key) const;
  // Missing -> "PATH: missing required key 'KEY'" at the map's position.
  Value require(std::string_view key) const;
  const std::vector<Entry>& entries() const { return entries_; }
  const Value& self() const { return self_; }

  // Throws at the position of `key` itself (rather than of its value).
  [[noreturn]] void failAtKey(std::string_view key, std::string_view message) const;

  // Reads `key` with `read(value)` when present.
  template <typename F>
  void with(std::string_view key, F&& read) const {
    if (auto v = find(key)) read(*v);
  }

 private:
  friend class Value;
  Value self_;
  std::vector<Entry> entries_;
  std::vector<YAML::Mark> keyMarks_;  // parallel to entries_
};

}  // namespace relay::config::detail
