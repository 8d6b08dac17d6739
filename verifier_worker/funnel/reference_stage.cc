// The reference work a verification needs: input sets with secret seeds and
// the reference outputs, computed by the trusted reference server once per
// task and reference epoch and shared by every candidate of the epoch
// (ReferenceCache). Not a stage of its own: a reference that cannot run is
// the verifier's problem (OUTCOME_INTERNAL_ERROR), reported on stage 2.
#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging/logger.h"
#include "verifier_worker/funnel/verification.h"

namespace kforge {
namespace {

// Where a new epoch's time went: the reference server's work (GPU waits
// left out), bytes fetched that did not fit the offered buffer, and the
// sets' inputs copied into the buffers candidates map.
struct EpochTimings {
  absl::Duration compute;
  absl::Duration transfer;
  absl::Duration share;
  int64_t bytes = 0;
  bool in_buffer = false;
  // The server's own account, "inputs_s:0.120,forward_s:0.050,copy_s:1.800".
  std::string server_parts;
};

std::string ServerParts(const Frame& reply) {
  std::string parts;
  if (const google::protobuf::Value* timings = reply.Get("timings"); timings != nullptr) {
    for (const auto& [part, seconds] : timings->struct_value().fields()) {
      absl::StrAppend(&parts, parts.empty() ? "" : ",", part, ":",
                      absl::StrFormat("%.3f", seconds.number_value()));
    }
  }
  return parts;
}

// A new epoch: fresh secret seeds, a fresh init seed, and the reference
// server's answer for every set of the plan.
absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> MakeEpoch(
    ReferenceClient& reference, const v1::VerifyRequest& request, const std::string& device,
    absl::Duration timeout, GpuArbiter& gpu, absl::Duration& device_wait, EpochTimings& timings) {
  const v1::VerifierOptions& options = request.options();
  const bool cuda = device.rfind("cuda", 0) == 0;
  absl::BitGen rng;
  auto epoch = std::make_shared<ReferenceEpoch>();
  epoch->plan = BuildInputPlan(options.multi_input(), cuda ? "bfloat16" : "",
                               options.timing().enabled() ? options.timing().fresh_input_probes() : 0,
                               options.timing().enabled() ? options.timing().input_pool() : 1, rng);
  epoch->init_seed = absl::Uniform<uint64_t>(rng, 1, uint64_t{1} << 31);
  Frame prepare = Frame::Of("prepare");
  prepare.Set("task_key", HexHash(request.task().reference_source()))
      .Set("source", request.task().reference_source())
      .Set("device", device)
      .Set("init_seed", static_cast<int64_t>(epoch->init_seed))
      .Set("max_set_bytes", options.multi_input().max_set_bytes())
      .Set("max_model_bytes", options.multi_input().max_model_bytes())
      .Set("device_budget_bytes", options.multi_input().reference_device_bytes())
      .Set("defer_payload", true);
  const std::vector<InputSetSpec> all = epoch->plan.All();
  google::protobuf::Value sets;
  for (const InputSetSpec& spec : all) *sets.mutable_list_value()->add_values() = spec.ToValue();
  prepare.Set("sets", std::move(sets));
  // The server writes the tensors straight into this buffer (sparse until
  // written, shrunk to what was written): through the socket, gigabytes of
  // sets took seconds an epoch. Were it too small, the server sends them
  // as before, fetched below.
  constexpr uint64_t kMaxCapacity = uint64_t{1} << 40;  // no product wraps past it
  const uint64_t per_set =
      std::min<uint64_t>(kMaxCapacity, std::max<int64_t>(0, options.multi_input().max_set_bytes()));
  const uint64_t capacity = std::min(kMaxCapacity, 2 * all.size() * per_set);
  if (absl::StatusOr<SharedMemory> buffer =
          SharedMemory::Create("kforge-reference-epoch", capacity);
      buffer.ok()) {
    prepare.OfferReplyBuffer(std::make_shared<SharedMemory>(*std::move(buffer)));
  }
  const absl::Time start = absl::Now();
  absl::Time computed_at;
  absl::StatusOr<Frame> computed;
  absl::StatusOr<Frame> prepared;
  {
    // The server, then the GPU: the order a timing takes them in.
    ReferenceClient::Held server(reference);
    {
      // Reference outputs are GPU work: not while a candidate is timed.
      // Bytes that did not fit the buffer cross afterwards, without the
      // GPU: a timing waiting behind them would stall every candidate
      // behind it.
      GpuArbiter::Shared use(gpu, /*pgid=*/0, &device_wait);  // waited for, never stopped
      computed = server.Call(prepare, timeout);
    }
    computed_at = absl::Now();
    if (!computed.ok()) return computed.status();
    timings.server_parts = ServerParts(*computed);
    if (computed->type() == "prepared") {
      prepared = std::move(computed);
    } else {
      // What the server wrote before the buffer ran out is not needed: its
      // pages go now, not after the same bytes have crossed the socket.
      if (prepare.reply_buffer != nullptr) (void)prepare.reply_buffer->Truncate(0);
      Frame fetch = Frame::Of("fetch");
      fetch.Set("ticket", computed->GetNumber("ticket"));
      prepared = server.Call(fetch, timeout);
    }
  }
  if (!prepared.ok()) return prepared.status();
  timings.in_buffer = prepared->shared_payload != nullptr;
  timings.compute = computed_at - start - device_wait;
  timings.transfer = absl::Now() - computed_at;
  epoch->prepared = *std::move(prepared);
  absl::StatusOr<std::map<std::string, ReferenceSet>> parsed = ParsePrepared(epoch->prepared, all);
  if (!parsed.ok()) return parsed.status();
  epoch->sets = *std::move(parsed);
  const ReferenceSet& own = epoch->sets["task_inputs"];
  if (!own.ok) return absl::FailedPreconditionError(own.message);
  const absl::Time shared_at = absl::Now();
  for (auto& [name, set] : epoch->sets) {
    // A set without a shared buffer still works, its inputs copied into
    // every request: slower, not wrong.
    if (set.ok && !set.inputs.empty()) (void)ShareInputs(epoch->prepared, set);
  }
  timings.share = absl::Now() - shared_at;
  timings.bytes = epoch->bytes();
  return std::shared_ptr<const ReferenceEpoch>(std::move(epoch));
}

}  // namespace

std::string Funnel::ReferenceScope(const v1::VerifyRequest& request) {
  const v1::VerifierOptions& options = request.options();
  // One scope per task and input-plan configuration on this device.
  return absl::StrCat(HexHash(request.task().reference_source()), ":",
                      HexHash(options.multi_input().SerializeAsString()), ":",
                      options.timing().enabled() ? options.timing().fresh_input_probes() : 0, ":",
                      options.timing().enabled() ? options.timing().input_pool() : 1);
}

absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> Funnel::MakeReferenceEpoch(
    const v1::VerifyRequest& request, bool ahead, absl::Duration& device_wait) {
  EpochTimings timings;
  auto made = MakeEpoch(reference_.For(HexHash(request.task().reference_source())), request,
                        config_.harness.device,
                        absl::Seconds(request.options().limits().reference_timeout_s()), gpu_,
                        device_wait, timings);
  if (!made.ok()) return made;
  if (metrics_ != nullptr) {
    metrics_->RecordReferenceEpoch(absl::ToDoubleSeconds(timings.compute),
                                   absl::ToDoubleSeconds(timings.transfer),
                                   absl::ToDoubleSeconds(timings.share));
  }
  Logger("verifier").Info(
      "reference epoch made",
      {{"task", request.task().id()},
       {"batch", request.batch_id()},
       {"ahead", ahead},
       {"bytes", timings.bytes},
       {"in_buffer", timings.in_buffer},
       {"compute_s", absl::StrFormat("%.3f", absl::ToDoubleSeconds(timings.compute))},
       {"transfer_s", absl::StrFormat("%.3f", absl::ToDoubleSeconds(timings.transfer))},
       {"share_s", absl::StrFormat("%.3f", absl::ToDoubleSeconds(timings.share))},
       {"gpu_wait_s", absl::StrFormat("%.3f", absl::ToDoubleSeconds(device_wait))},
       {"server", timings.server_parts}});
  return made;
}

void Funnel::PrefetchNextReference(const v1::VerifyRequest& request, const std::string& scope) {
  const std::string& next = request.next_batch_id();
  if (next.empty() || next == request.batch_id()) return;
  if (references_.Holds(scope, next)) return;
  // What the make reads of the request, kept beyond it: the task and the
  // options, under the next batch's name.
  auto ahead = std::make_shared<v1::VerifyRequest>();
  *ahead->mutable_task() = request.task();
  *ahead->mutable_options() = request.options();
  ahead->set_batch_id(next);
  const ReferencePrefetcher::Queued queued =
      prefetcher_.Enqueue(ReferenceCache::Key(scope, next), [this, ahead, scope] {
        absl::StatusOr<bool> made = references_.Prefetch(scope, ahead->batch_id(), [&] {
          absl::Duration waited;
          return MakeReferenceEpoch(*ahead, /*ahead=*/true, waited);
        });
        if (metrics_ != nullptr) {
          metrics_->RecordReferencePrefetch(!made.ok() ? "failed" : *made ? "made" : "held");
        }
        if (!made.ok()) {
          // The batch's first candidate makes it again and reports what
          // fails then as its verdict.
          Logger("verifier").Warning("reference epoch not made ahead",
                                     {{"task", ahead->task().id()},
                                      {"batch", ahead->batch_id()},
                                      {"error", made.status().message()}});
        }
      });
  if (queued == ReferencePrefetcher::Queued::kFull && metrics_ != nullptr) {
    metrics_->RecordReferencePrefetch("full");
  }
}

bool Funnel::Run::PrepareReference() {
  const v1::MultiInputOptions& multi = options_.multi_input();
  bool reused = false;
  const std::string scope = ReferenceScope(request_);
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> epoch = f_.references_.Get(
      scope, request_.batch_id(),
      {.max_uses = multi.reference_reuse_candidates(),
       .max_age = absl::Seconds(multi.reference_reuse_s())},
      [&] {
        absl::Duration waited;
        auto made = f_.MakeReferenceEpoch(request_, /*ahead=*/false, waited);
        AddDeviceWait(waited);
        return made;
      },
      &reused);
  if (f_.metrics_ != nullptr) f_.metrics_->RecordReferenceLookup(reused);
  if (!epoch.ok()) {
    internal_error_ = true;
    v1::StageResult* stage = Begin(v1::STAGE_COMPILE);
    End(stage, v1::OUTCOME_INTERNAL_ERROR,
        absl::StrCat("the task's reference could not run: ", epoch.status().message()));
    return false;
  }
  epoch_ = *std::move(epoch);
  verdict_.set_reference_reused(reused);
  // The reference runs: the next batch's epoch can be made while this
  // candidate and the rest of its batch are verified.
  f_.PrefetchNextReference(request_, scope);
  return true;
}

}  // namespace kforge
