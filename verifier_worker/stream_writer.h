// StreamWriter: the one thread ("kf-stream-w") that writes a VerifyStream's
// messages (acks, verdicts, credit grants) to its client. Threads that are
// not the stream's own (the verification pool answering, another stream's
// thread handing this one a freed place) only queue, so a client that stops
// reading holds up nothing but its own stream.
//
//   auto writer = std::make_shared<StreamWriter>(stream, /*max_acks=*/66);
//   writer->Ack(ack);       // the reader: waits while max_acks are unwritten
//   writer->Send(result);   // never waits
//   writer->Grant(+3);      // never waits; merges with a grant still queued
//   writer->Close();        // writes what is queued, then joins the thread
//
// After Close (or once a write failed: the client went away) messages are
// dropped. Grants may come after the stream's call has returned (a grant
// holds a shared_ptr); they are dropped too. Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_STREAM_WRITER_H_
#define KFORGE_VERIFIER_WORKER_STREAM_WRITER_H_

#include <deque>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "kforge/v1/verifier_service.grpc.pb.h"

namespace kforge {

class StreamWriter {
 public:
  using Stream =
      grpc::ServerReaderWriter<kforge::v1::VerifyStreamResponse, kforge::v1::VerifyRequest>;

  // `stream` outlives Close(). `max_acks`: acks queued at most before Ack
  // waits, which pushes back on a client that sends but does not read.
  StreamWriter(Stream* stream, int max_acks);
  ~StreamWriter();  // Close()
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // An acknowledgement, from the stream's reader.
  void Ack(kforge::v1::VerifyStreamResponse message) ABSL_LOCKS_EXCLUDED(mu_);
  // A verdict or any other message that must not wait.
  void Send(kforge::v1::VerifyStreamResponse message) ABSL_LOCKS_EXCLUDED(mu_);
  // Credits granted (or, negative, taken back).
  void Grant(int credits) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes what is queued (unless the client is gone), then stops and
  // joins the thread. Call it before the stream's call returns.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  // A write failed: the client went away.
  bool broken() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run();
  bool Open() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !closing_ && !broken_; }

  Stream* const stream_;
  const int max_acks_;
  mutable absl::Mutex mu_;
  std::deque<kforge::v1::VerifyStreamResponse> queue_ ABSL_GUARDED_BY(mu_);
  int acks_queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_STREAM_WRITER_H_
