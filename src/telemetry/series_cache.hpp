// A map from a packed 64-bit label-id key to resolved metric series, built for
// a read path that never locks (internal to the module).
//
// Why: prometheus::Family::Add takes the family's mutex and hashes the label
// strings. Label ids are small integers from the config, so each combination
// is resolved once (under this cache's mutex) and afterwards found by a
// lock-free probe of an open-addressed table — a few loads, no stores, so
// workers sharing it do not bounce cache lines.
//
// Invariants: keys are never 0 (0 marks an empty slot) and entries are never
// removed or changed, which is what makes lock-free readers safe: a writer
// stores the value pointer, then publishes the key with release; a reader that
// acquires the key sees the value. A reader that misses (even while the entry
// is being inserted) takes the mutex and finds or creates it there.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace relay::telemetry::detail {

template <class T>
class SeriesCache {
 public:
  // `capacity` must be a power of two; at most half the slots are filled so
  // probes stay short, later entries go to an overflow map behind the mutex.
  explicit SeriesCache(std::size_t capacity)
      : slots_(std::make_unique<Slot[]>(capacity)), mask_(capacity - 1) {}

  // The entry of `key` (nonzero), made by `make()` the first time.
  template <class Make>
  const T& get(std::uint64_t key, Make&& make) {
    std::size_t i = mix(key) & mask_;
    for (std::size_t n = 0; n <= mask_; ++n, i = (i + 1) & mask_) {
      const std::uint64_t k = slots_[i].key.load(std::memory_order_acquire);
      if (k == key) return *slots_[i].value.load(std::memory_order_relaxed);
      if (k == 0) break;
    }
    return slowGet(key, make);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return storage_.size();
  }

 private:
  struct Slot {
    std::atomic<std::uint64_t> key{0};
    std::atomic<const T*> value{nullptr};
  };

  static std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }

  template <class Make>
  const T& slowGet(std::uint64_t key, Make& make) {
    std::lock_guard lock(mutex_);
    std::size_t i = mix(key) & mask_;
    for (;; i = (i + 1) & mask_) {  // terminates: the table is at most half full
      const std::uint64_t k = slots_[i].key.load(std::memory_order_relaxed);
      if (k == key) return *slots_[i].value.load(std::memory_order_relaxed);
      if (k == 0) break;
    }
    if (auto it = overflow_.find(key); it != overflow_.end()) return *it->second;
    const T* made = &storage_.emplace_back(make());
    if (inTable_ < (mask_ + 1) / 2) {
      slots_[i].value.store(made, std::memory_order_relaxed);
      slots_[i].key.store(key, std::memory_order_release);
      ++inTable_;
    } else {
      overflow_.emplace(key, made);
    }
    return *made;
  }

  std::unique_ptr<Slot[]> slots_;
  const std::size_t mask_;
  mutable std::mutex mutex_;
  std::deque<T> storage_;  // stable addresses
  std::size_t inTable_ = 0;
  std::unordered_map<std::uint64_t, const T*> overflow_;
};

}  // namespace relay::telemetry::detail
