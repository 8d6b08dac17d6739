// What a timing reply must hold to be one the harness wrote (timed_reply.h):
// times a clock can give, and every fresh-input call the request sent. The
// harness cannot send anything else, so these replies are written here as a
// candidate that reached the reply's packing would.
#include "verifier_worker/funnel/timed_reply.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::HasSubstr;

google::protobuf::Value Numbers(std::initializer_list<double> values) {
  google::protobuf::Value list;
  for (double v : values) list.mutable_list_value()->add_values()->set_number_value(v);
  return list;
}

google::protobuf::Value Names(std::initializer_list<const char*> names) {
  google::protobuf::Value list;
  for (const char* n : names) list.mutable_list_value()->add_values()->set_string_value(n);
  return list;
}

Frame Timed() {
  Frame reply = Frame::Of("timed");
  google::protobuf::Value none;
  none.set_null_value(google::protobuf::NULL_VALUE);
  reply.Set("event_ms", none)  // the CPU: no events
      .Set("host_ms", Numbers({0.5, 0.4, 0.6}))
      .Set("fresh_sets", Names({"fresh_0", "fresh_1"}))
      .Set("fresh_ms", Numbers({0.5, 0.55}))
      .Set("fresh_cpu_ms", Numbers({0.5, 0.55}));
  return reply;
}

TEST(TimedReplyTest, TheHarnesssReplyHoldsEveryTimeAndEveryFreshCall) {
  EXPECT_EQ(ImpossibleTime(Timed()), "");
  EXPECT_EQ(FreshCallsNotAsSent(Timed(), 2, /*cpu=*/true), "");
}

TEST(TimedReplyTest, ATimeNoClockGivesIsNamed) {
  for (double bad : {-0.1, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    Frame reply = Timed();
    reply.Set("fresh_ms", Numbers({0.5, bad}));
    EXPECT_THAT(ImpossibleTime(reply), HasSubstr("fresh_ms holds")) << bad;
    reply = Timed();
    reply.Set("fresh_cpu_ms", Numbers({bad, 0.5}));
    EXPECT_THAT(ImpossibleTime(reply), HasSubstr("fresh_cpu_ms holds")) << bad;
    reply = Timed();
    reply.Set("host_ms", Numbers({bad}));
    EXPECT_THAT(ImpossibleTime(reply), HasSubstr("host_ms holds")) << bad;
  }
  Frame reply = Timed();
  reply.Set("event_ms", Names({"0.1"}));
  EXPECT_THAT(ImpossibleTime(reply), HasSubstr("event_ms holds a non-number"));
}

TEST(TimedReplyTest, FewerFreshCallsThanSentOrTimesThanCallsAreNamed) {
  // A reply leaving out the fresh call its cache missed on.
  Frame fewer = Timed();
  fewer.Set("fresh_sets", Names({"fresh_0"})).Set("fresh_ms", Numbers({0.5}));
  EXPECT_THAT(FreshCallsNotAsSent(fewer, 2, true),
              HasSubstr("holds 1 fresh-input calls and 1 times of them, for the 2 sent"));
  Frame untimed = Timed();
  untimed.Set("fresh_ms", Numbers({0.5}));
  EXPECT_THAT(FreshCallsNotAsSent(untimed, 2, true), HasSubstr("2 fresh-input calls and 1 times"));
  EXPECT_THAT(FreshCallsNotAsSent(Frame::Of("timed"), 2, true), HasSubstr("holds 0 fresh-input"));
  EXPECT_THAT(FreshCallsNotAsSent(Timed(), 3, true), HasSubstr("for the 3 sent"));
  // On the CPU each fresh call's CPU time comes too; a GPU's reply has none.
  Frame no_cpu = Timed();
  no_cpu.Set("fresh_cpu_ms", Numbers({0.5}));
  EXPECT_THAT(FreshCallsNotAsSent(no_cpu, 2, /*cpu=*/true),
              HasSubstr("holds 1 CPU times of its 2 fresh-input calls"));
  EXPECT_EQ(FreshCallsNotAsSent(no_cpu, 2, /*cpu=*/false), "");
}

}  // namespace
}  // namespace kforge
