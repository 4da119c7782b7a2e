// Everything derived from one loaded config, immutable and shared by every
// worker through a shared_ptr. A reload builds a new snapshot; exchanges in
// flight keep the one they started with.
#pragma once

#include "relay/admission/key_store.hpp"
#include "relay/config/config.hpp"
#include "relay/upstream/catalog.hpp"

namespace relay::pipeline {

struct Snapshot {
  // Throws std::invalid_argument when the config cannot be served (a bad base_url).
  explicit Snapshot(config::Config cfg)
      : config(std::move(cfg)), keys(config.keys), catalog(config.upstreams) {}
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  const config::Config config;     // first: the members below point into it
  const admission::KeyStore keys;
  const upstream::Catalog catalog;
};

}  // namespace relay::pipeline
