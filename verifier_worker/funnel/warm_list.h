// Which of a reference epoch's input sets make a candidate's Triton kernels
// compile again on their first call, and what the sandbox needs to warm
// them up (MultiInputOptions.warm_variant_sets): their shapes and dtypes,
// never their values.
//
//   google::protobuf::Value sets = WarmList(epoch, tiny);  // the "warm" request's "sets"
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_WARM_LIST_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_WARM_LIST_H_

#include <set>
#include <string>

#include <google/protobuf/struct.pb.h>

#include "verifier_worker/funnel/reference_cache.h"
#include "verifier_worker/funnel/reference_set.h"

namespace kforge {

// What a set's first call compiles for, as Triton specialises: its dtype,
// its inputs' dtypes, and the class (1, a multiple of 16, 64-bit, other) of
// each integer it brings: in its init inputs and plain numbers, its inputs'
// dimensions, element counts and contiguous strides. Two sets of one
// signature compile once; a set whose kernels take other integers than
// those may still compile on its first call (slower, never wrong).
std::string CompileSignature(const ReferenceSet& set);

// The sets whose first call compiles again: their signature is neither the
// tiny set's nor the task's own inputs'. Sets the reference could not run
// are left out.
std::set<std::string> RecompilingSets(const ReferenceEpoch& epoch, const ReferenceSet& tiny);

// The stage-4 sets to warm up (before the first set runs, or in the
// background beside the sets): one entry per
// signature that neither `tiny` nor the task's own inputs share, in the
// plan's order, each {set, init_inputs, dtype, scalars, tensors: [{position,
// dtype, shape}]}. Sets the reference could not run are left out.
google::protobuf::Value WarmList(const ReferenceEpoch& epoch, const ReferenceSet& tiny);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_WARM_LIST_H_
