#include "connection_limits.hpp"

#include <cstring>
#include <string_view>

#include "relay/common/limits.hpp"

namespace relay::net {

class ConnectionLimits::Slot {
 public:
  Slot(std::shared_ptr<ConnectionLimits> owner, PeerKey key, bool counted)
      : owner_(std::move(owner)), key_(key), counted_(counted) {}
  ~Slot() { owner_->release(key_, counted_); }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::shared_ptr<ConnectionLimits> owner_;
  PeerKey key_;
  bool counted_;
};

std::size_t ConnectionLimits::PeerHash::operator()(const PeerKey& k) const {
  std::uint64_t a = 0, b = 0;
  std::memcpy(&a, k.bytes.data(), 8);
  std::memcpy(&b, k.bytes.data() + 8, 8);
  return std::hash<std::uint64_t>()(a * 0x9E3779B97F4A7C15ull ^ b);
}

ConnectionLimits::PeerKey ConnectionLimits::keyOf(const boost::asio::ip::address& address) {
  PeerKey key;
  if (address.is_v4()) {
    auto b = address.to_v4().to_bytes();
    std::memcpy(key.bytes.data(), b.data(), 4);
  } else if (address.to_v6().is_v4_mapped()) {
    auto b = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6()).to_bytes();
    std::memcpy(key.bytes.data(), b.data(), 4);
  } else {
    auto b = address.to_v6().to_bytes();
    std::memcpy(key.bytes.data(), b.data(), 8);  // the /64
    key.bytes[15] = 6;                           // never equal to an IPv4 key
  }
  return key;
}

std::shared_ptr<void> ConnectionLimits::admit(const boost::asio::ip::tcp::endpoint& peer) {
  if (max_ != 0) {
    std::int64_t now = open_.fetch_add(1, std::memory_order_relaxed);
    if (now >= max_) {
      open_.fetch_sub(1, std::memory_order_relaxed);
      countLimit(Limit::kMaxConnections);
      return nullptr;
    }
  } else {
    open_.fetch_add(1, std::memory_order_relaxed);
  }
  PeerKey key = keyOf(peer.address());
  bool counted = false;
  if (maxPerIp_ != 0) {
    std::lock_guard lock(mutex_);
    std::uint32_t& n = perIp_[key];
    if (n >= maxPerIp_) {
      if (n == 0) perIp_.erase(key);
      open_.fetch_sub(1, std::memory_order_relaxed);
      countLimit(Limit::kMaxConnectionsPerIp);
      return nullptr;
    }
    ++n;
    counted = true;
  }
  openClientConnections().fetch_add(1, std::memory_order_relaxed);
  return std::make_shared<Slot>(shared_from_this(), key, counted);
}

void ConnectionLimits::release(const PeerKey& key, bool counted) {
  open_.fetch_sub(1, std::memory_order_relaxed);
  openClientConnections().fetch_sub(1, std::memory_order_relaxed);
  if (!counted) return;
  std::lock_guard lock(mutex_);
  auto it = perIp_.find(key);
  if (it != perIp_.end() && --it->second == 0) perIp_.erase(it);
}

}  // namespace relay::net
