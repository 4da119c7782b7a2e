// The caps on open client connections: server.max_connections (all workers,
// one atomic) and server.max_connections_per_ip (per IPv4 address or IPv6
// /64, since one host holds a whole /64). A connection over either is closed
// at accept; one already open keeps being served. Private to net/.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>

namespace relay::net {

class ConnectionLimits : public std::enable_shared_from_this<ConnectionLimits> {
 public:
  ConnectionLimits(std::uint32_t maxConnections, std::uint32_t maxPerIp)
      : max_(maxConnections), maxPerIp_(maxPerIp) {}

  // The connection's place under both caps, released when the returned
  // object is destroyed; nullptr (and a counted limit hit) when it has none.
  std::shared_ptr<void> admit(const boost::asio::ip::tcp::endpoint& peer);

  std::int64_t open() const { return open_.load(std::memory_order_relaxed); }

 private:
  struct PeerKey {
    std::array<std::uint8_t, 16> bytes{};
    bool operator==(const PeerKey&) const = default;
  };
  struct PeerHash {
    std::size_t operator()(const PeerKey& k) const;
  };
  class Slot;
  static PeerKey keyOf(const boost::asio::ip::address& address);
  void release(const PeerKey& key, bool counted);

  const std::uint32_t max_;
  const std::uint32_t maxPerIp_;
  std::atomic<std::int64_t> open_{0};
  std::mutex mutex_;  // per-address counts: touched once per accept and close
  std::unordered_map<PeerKey, std::uint32_t, PeerHash> perIp_;
};

}  // namespace relay::net
