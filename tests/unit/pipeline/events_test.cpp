// The relay event bus (events.hpp): filters, bounded queues, resume.
#include "relay/pipeline/events.hpp"

#include <string>

#include <gtest/gtest.h>

#include "relay/common/limits.hpp"

namespace relay::pipeline {
namespace {

RelayEvent request(std::string_view kind, std::string_view key, std::string_view node = {}) {
  RelayEvent e;
  e.kind = kind;
  e.key = key;
  e.node = node;
  e.requestId = "req_1";
  return e;
}

std::size_t count(const std::string& frames, std::string_view what) {
  std::size_t n = 0;
  for (std::size_t at = frames.find(what); at != std::string::npos; at = frames.find(what, at + 1)) ++n;
  return n;
}

TEST(EventBus, NothingIsBuiltWithoutSubscribers) {
  EventBus bus;
  EXPECT_FALSE(bus.active());
  bus.publish(request("request.routed", "a"));
  auto sub = bus.subscribe(EventFilter{.key = "a"}, 0);  // resume from the start: nothing kept
  ASSERT_TRUE(sub);
  EXPECT_TRUE(sub->take().empty());
}

TEST(EventBus, AKeySeesItsOwnRequestsAndTheAdminSeesEverything) {
  EventBus bus;
  auto a = bus.subscribe(EventFilter{.key = "a"}, std::nullopt);
  auto admin = bus.subscribe(EventFilter{.admin = true}, std::nullopt);
  auto ejections = bus.subscribe(EventFilter{.admin = true, .kind = "upstream."}, std::nullopt);
  bus.publish(request("request.routed", "a", "n1"));
  bus.publish(request("request.routed", "b"));
  RelayEvent ejected;
  ejected.kind = "upstream.ejected";
  ejected.upstream = "moonshot";
  bus.publish(ejected);
  std::string forA = a->take();
  EXPECT_EQ(count(forA, "event: "), 1u);
  EXPECT_NE(forA.find("\"key\":\"a\""), std::string::npos);
  EXPECT_NE(forA.find("\"node\":\"n1\""), std::string::npos);
  EXPECT_EQ(count(admin->take(), "event: "), 3u);
  std::string up = ejections->take();
  EXPECT_EQ(count(up, "event: "), 1u);
  EXPECT_NE(up.find("event: upstream.ejected\ndata: {"), std::string::npos);
}

TEST(EventBus, ASlowReaderLosesTheOldestEventsAndIsToldHowMany) {
  EventBus bus;
  auto sub = bus.subscribe(EventFilter{.key = "a"}, std::nullopt);
  const std::uint64_t before = limitCount(Limit::kEventsDropped);
  for (std::size_t i = 0; i < EventBus::kQueueEvents + 5; ++i) bus.publish(request("request.routed", "a"));
  std::string frames = sub->take();
  EXPECT_NE(frames.find("event: events.dropped\ndata: {\"kind\":\"events.dropped\",\"count\":5,"),
            std::string::npos);
  EXPECT_EQ(count(frames, "event: request.routed"), EventBus::kQueueEvents);
  EXPECT_NE(frames.find("id: 6\n"), std::string::npos);  // 1..5 were dropped
  EXPECT_EQ(limitCount(Limit::kEventsDropped) - before, 5u);
  EXPECT_TRUE(sub->take().empty());
}

TEST(EventBus, LastEventIdResumesFromTheRingAndReportsAGap) {
  EventBus bus;
  auto keepAlive = bus.subscribe(EventFilter{.admin = true}, std::nullopt);
  for (int i = 0; i < 10; ++i) bus.publish(request("request.routed", "a"));
  auto resumed = bus.subscribe(EventFilter{.key = "a"}, 7);
  std::string frames = resumed->take();
  EXPECT_EQ(count(frames, "event: request.routed"), 3u);  // 8, 9, 10
  EXPECT_NE(frames.find("id: 8\n"), std::string::npos);
  bus.publish(request("request.routed", "a"));
  EXPECT_NE(resumed->take().find("id: 11\n"), std::string::npos);

  for (std::size_t i = 0; i < EventBus::kRingEvents; ++i) bus.publish(request("request.routed", "b"));
  auto late = bus.subscribe(EventFilter{.key = "a"}, 5);  // 6..(ring start - 1) are gone
  EXPECT_NE(late->take().find("event: events.dropped"), std::string::npos);
}

TEST(EventBus, StreamsPerKeyAreCapped) {
  EventBus bus;
  std::vector<std::shared_ptr<EventSubscription>> open;
  for (std::size_t i = 0; i < EventBus::kMaxSubscribersPerKey; ++i)
    open.push_back(bus.subscribe(EventFilter{.key = "a"}, std::nullopt));
  for (const auto& s : open) EXPECT_TRUE(s);
  EXPECT_FALSE(bus.subscribe(EventFilter{.key = "a"}, std::nullopt));
  EXPECT_TRUE(bus.subscribe(EventFilter{.key = "b"}, std::nullopt));  // another key is not affected
  open.pop_back();
  EXPECT_TRUE(bus.subscribe(EventFilter{.key = "a"}, std::nullopt));
}

TEST(EventBus, EventsAreKeptForAWhileAfterTheLastSubscriberLeaves) {
  EventBus bus;
  bus.subscribe(EventFilter{.key = "a"}, std::nullopt);  // subscribes and leaves at once
  EXPECT_TRUE(bus.active());  // lingers, so a reconnecting client can resume
  bus.publish(request("request.routed", "a"));
  auto back = bus.subscribe(EventFilter{.key = "a"}, 0);
  EXPECT_EQ(count(back->take(), "event: request.routed"), 1u);
}

}  // namespace
}  // namespace relay::pipeline
