// What a timing reply from the candidate's process must hold to be a reply
// the harness wrote: every time a clock can give, and every fresh-input
// call it was sent. The harness reads its clocks in the candidate's
// process, so a reply is the candidate's word until these hold; each
// returns why it does not ("" if it does), and the timing stage flags it as
// HACK_RESULT_FORGERY.
//
//   if (std::string why = ImpossibleTime(reply); !why.empty()) ...
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_TIMED_REPLY_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_TIMED_REPLY_H_

#include <cstddef>
#include <string>

#include "verifier_worker/sandbox/frame.h"

namespace kforge {

// A time in event_ms, host_ms, fresh_ms or fresh_cpu_ms (a list of times, or
// one) that is
// not a finite number of milliseconds, or is below zero. A red team that
// reached the method packing the reply sent negative times, which passed
// the timing stage.
std::string ImpossibleTime(const Frame& reply);

// Fewer (or more) fresh-input calls in fresh_sets, or times in fresh_ms (and
// with `cpu`, the CPU device's, CPU times in fresh_cpu_ms), than the `sent`
// the request asked for: the harness times every one.
std::string FreshCallsNotAsSent(const Frame& reply, size_t sent, bool cpu);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_TIMED_REPLY_H_
