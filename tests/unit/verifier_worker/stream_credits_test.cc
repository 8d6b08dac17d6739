// The verifier's places shared out as stream credits: what streams hold never
// exceeds the places, a stream that opens late gets its share (from an idle
// stream at once, from a busy one as its requests finish), a closed stream's
// credits go to the others, and unary calls take free or unspent places.
#include "verifier_worker/stream_credits.h"

#include <map>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"

namespace kforge {
namespace {

// What each stream's client has been granted and not spent.
class Clients {
 public:
  StreamCredits::Grant For(int client) {
    return [this, client](int credits) {
      absl::MutexLock lock(&mu_);
      held_[client] += credits;
    };
  }
  int held(int client) {
    absl::MutexLock lock(&mu_);
    return held_[client];
  }
  bool Spend(int client) {
    absl::MutexLock lock(&mu_);
    if (held_[client] <= 0) return false;
    --held_[client];
    return true;
  }

 private:
  absl::Mutex mu_;
  std::map<int, int> held_;
};

TEST(StreamCreditsTest, OneStreamHoldsEveryPlace) {
  StreamCredits credits(66);
  Clients clients;
  credits.Open(clients.For(0));
  EXPECT_EQ(clients.held(0), 66);
  EXPECT_EQ(credits.stats().held, 66);
}

TEST(StreamCreditsTest, CreditsAcrossStreamsNeverExceedThePlaces) {
  StreamCredits credits(10);
  Clients clients;
  std::vector<int64_t> ids;
  for (int c = 0; c < 4; ++c) ids.push_back(credits.Open(clients.For(c)));
  int total = 0;
  for (int c = 0; c < 4; ++c) {
    total += clients.held(c);
    // ceil(10 / 4) = 3 each at most; the places run out one short.
    EXPECT_GE(clients.held(c), 2) << c;
    EXPECT_LE(clients.held(c), 3) << c;
  }
  EXPECT_EQ(total, 10);
  const StreamCredits::Stats s = credits.stats();
  EXPECT_EQ(s.held + s.admitted + s.unary, 10);
}

// An idle stream that opened first cannot starve one that opens later: its
// unspent credits above its share are taken back.
TEST(StreamCreditsTest, ALateStreamTakesItsShareFromAnIdleOne) {
  StreamCredits credits(8);
  Clients clients;
  credits.Open(clients.For(0));
  EXPECT_EQ(clients.held(0), 8);
  credits.Open(clients.For(1));
  EXPECT_EQ(clients.held(0), 4) << "a negative grant took 4 back";
  EXPECT_EQ(clients.held(1), 4);
}

// Admitted requests are never taken back: the late stream gets places as
// the busy stream's requests finish, until both hold their share.
TEST(StreamCreditsTest, ALateStreamGetsPlacesAsABusyStreamsRequestsFinish) {
  StreamCredits credits(8);
  Clients clients;
  const int64_t a = credits.Open(clients.For(0));
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(clients.Spend(0));
    ASSERT_TRUE(credits.Spend(a));
  }
  credits.Open(clients.For(1));
  EXPECT_EQ(clients.held(1), 0);
  EXPECT_FALSE(credits.Spend(a)) << "a request sent without a credit is refused";
  for (int i = 0; i < 4; ++i) credits.Finish(a);
  EXPECT_EQ(clients.held(1), 4);
  EXPECT_EQ(clients.held(0), 0);
  credits.Finish(a);
  EXPECT_EQ(clients.held(0), 1) << "below its share again, the busy stream gets the place";
}

TEST(StreamCreditsTest, AClosedStreamsCreditsGoToTheOthers) {
  StreamCredits credits(8);
  Clients clients;
  const int64_t a = credits.Open(clients.For(0));
  const int64_t b = credits.Open(clients.For(1));
  EXPECT_EQ(clients.held(0), 4);
  EXPECT_EQ(clients.held(1), 4);
  credits.Close(a);
  EXPECT_EQ(clients.held(1), 8);
  EXPECT_EQ(credits.stats().streams, 1);
  credits.Close(b);
  EXPECT_EQ(credits.stats().held, 0);
}

TEST(StreamCreditsTest, AUnaryCallTakesAFreePlaceOrAnUnspentCreditBack) {
  StreamCredits credits(4);
  EXPECT_TRUE(credits.TakeUnary());
  Clients clients;
  const int64_t a = credits.Open(clients.For(0));
  EXPECT_EQ(clients.held(0), 3);
  EXPECT_TRUE(credits.TakeUnary()) << "an idle stream's credit is taken back";
  EXPECT_EQ(clients.held(0), 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(clients.Spend(0));
    ASSERT_TRUE(credits.Spend(a));
  }
  EXPECT_FALSE(credits.TakeUnary()) << "every place is working";
  credits.FinishUnary();
  credits.FinishUnary();
  EXPECT_EQ(clients.held(0), 2) << "the freed places went back to the stream";
  credits.Finish(a);
  credits.Finish(a);
  EXPECT_EQ(clients.held(0), 4);
  const StreamCredits::Stats s = credits.stats();
  EXPECT_EQ(s.held + s.admitted + s.unary, 4);
}

TEST(StreamCreditsTest, MoreStreamsThanPlacesTakeTurns) {
  StreamCredits credits(2);
  Clients clients;
  std::vector<int64_t> ids;
  for (int c = 0; c < 4; ++c) ids.push_back(credits.Open(clients.For(c)));
  EXPECT_EQ(clients.held(0), 1);
  EXPECT_EQ(clients.held(1), 1);
  EXPECT_EQ(clients.held(2), 0);
  EXPECT_EQ(clients.held(3), 0);
  // As stream 0's request finishes, the place goes to a stream with none.
  ASSERT_TRUE(clients.Spend(0));
  ASSERT_TRUE(credits.Spend(ids[0]));
  credits.Finish(ids[0]);
  EXPECT_EQ(clients.held(0), 0);
  EXPECT_EQ(clients.held(2) + clients.held(3), 1);
}

// Many threads sending with their credits, finishing, and streams opening
// and closing: the ledger never grants more than the places. A request
// whose credit was taken back on its way is refused and its client's count
// made whole, as the verifier does; at the end nothing is held.
TEST(StreamCreditsTest, UnderConcurrentUseThePlacesAreNeverOvercommitted) {
  constexpr int kPlaces = 12;
  StreamCredits credits(kPlaces);
  Clients clients;
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(c);
      for (int life = 0; life < 4; ++life) {
        const int64_t id = credits.Open(clients.For(c));
        int running = 0;
        for (int i = 0; i < 500; ++i) {
          if (rng() % 2 == 0 && clients.Spend(c)) {
            if (credits.Spend(id)) {
              ++running;
            } else {
              clients.For(c)(1);  // refused: the spent credit comes back
            }
          } else if (running > 0) {
            credits.Finish(id);
            --running;
          }
          const StreamCredits::Stats s = credits.stats();
          ASSERT_LE(s.held + s.admitted + s.unary, kPlaces);
        }
        while (running-- > 0) credits.Finish(id);
        credits.Close(id);
        clients.For(c)(-clients.held(c));  // a new stream starts from nothing
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const StreamCredits::Stats s = credits.stats();
  EXPECT_EQ(s.streams, 0);
  EXPECT_EQ(s.held + s.admitted, 0);
}

}  // namespace
}  // namespace kforge
