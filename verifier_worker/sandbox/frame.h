// Frames exchanged with the Python harness processes: a JSON header (held as
// a google::protobuf::Struct) and a raw payload whose tensors the header
// describes. Wire format and the Python twin: harness/kforge_harness/protocol.py.
//
//   Frame request = Frame::Of("run");
//   request.Set("set", "seed_17").Set("repeat", 2);
//   request.AddTensor("seed_17/in0", tensor_bytes, "float32", {16, 1024});
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verifier_worker/sandbox/shared_memory.h"

namespace kforge {

struct TensorEntry {
  std::string name;
  std::string dtype;  // torch name: "float32", "bfloat16", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

class Frame {
 public:
  static Frame Of(absl::string_view type);

  Frame& Set(const std::string& key, absl::string_view value);
  Frame& Set(const std::string& key, const char* value) { return Set(key, absl::string_view(value)); }
  Frame& Set(const std::string& key, double value);
  Frame& Set(const std::string& key, int value) { return Set(key, static_cast<double>(value)); }
  Frame& Set(const std::string& key, int64_t value) { return Set(key, static_cast<double>(value)); }
  Frame& Set(const std::string& key, bool value);
  Frame& Set(const std::string& key, google::protobuf::Value value);

  std::string type() const { return GetString("type"); }
  std::string GetString(const std::string& key) const;
  double GetNumber(const std::string& key, double fallback = 0) const;
  bool GetBool(const std::string& key) const;
  const google::protobuf::Value* Get(const std::string& key) const;

  // Appends a tensor's bytes to the payload and describes it in "tensors".
  void AddTensor(const std::string& name, absl::string_view bytes, const std::string& dtype,
                 const std::vector<int64_t>& shape);
  // The "tensors" entries of the header, checked against the payload size.
  absl::StatusOr<std::vector<TensorEntry>> Tensors() const;

  // Sends `buffer`'s descriptor with the frame (a sealed buffer the peer
  // maps to read); returns its index among the frame's descriptors, by
  // which header fields name it.
  int Attach(std::shared_ptr<const SharedMemory> buffer);
  // Describes a tensor lying at `offset` of attached buffer `buffer` in
  // the header's "shared_tensors" (its bytes are not in the payload).
  void AddSharedTensor(const std::string& name, int buffer, uint64_t offset, uint64_t nbytes,
                       const std::string& dtype, const std::vector<int64_t>& shape);
  // Offers the peer `buffer` (not sealed) to write its reply's payload into:
  // the header says "reply_buffer" (the descriptor's index) and
  // "reply_capacity"; a reply that used it says "payload_in_reply_buffer".
  void OfferReplyBuffer(std::shared_ptr<SharedMemory> buffer);
  // The descriptors that travel with the frame, in order.
  std::vector<int> AttachedFds() const;
  absl::string_view TensorBytes(const TensorEntry& entry) const {
    return PayloadBytes().substr(entry.offset, entry.nbytes);
  }
  // The payload's bytes: those that came through the socket, or a sealed
  // shared buffer's when the peer wrote them there (shared_payload).
  absl::string_view PayloadBytes() const {
    return shared_payload != nullptr ? shared_payload->bytes() : absl::string_view(payload);
  }

  google::protobuf::Struct header;
  std::string payload;
  std::shared_ptr<const SharedMemory> shared_payload;
  // Kept alive while the frame is: what Attach and OfferReplyBuffer sent.
  std::vector<std::shared_ptr<const SharedMemory>> attachments;
  std::shared_ptr<SharedMemory> reply_buffer;
};

// Where `reply` says its payload lies in the buffer `request` offered
// ("payload_in_reply_buffer"): shrinks that buffer to the bytes the reply's
// tensors span, seals it (from here on nothing the peer left running or
// mapped can change a byte) and makes it the reply's payload. OK and
// nothing done for a reply that did not use the buffer; DATA_LOSS for one
// that claims a buffer that was not offered, or sends a payload as well;
// FAILED_PRECONDITION when the peer still maps it writable.
absl::Status AdoptReplyBuffer(const Frame& request, Frame& reply);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_H_
