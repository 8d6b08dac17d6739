// SharedMemory: what the verifier reads from a shared buffer cannot change
// after Seal(), and a buffer someone still maps writable is not sealed.
#include "verifier_worker/sandbox/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verifier_worker/sandbox/frame.h"

namespace kforge {
namespace {

TEST(SharedMemoryTest, SealedBytesCannotBeWrittenResizedOrMappedWritable) {
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(buffer->bytes().empty()) << "readable before it is sealed";
  ASSERT_TRUE(buffer->Write(0, "kforge").ok());
  EXPECT_FALSE(buffer->Write(4093, "four").ok()) << "past its end";
  ASSERT_TRUE(buffer->Seal().ok());
  EXPECT_TRUE(buffer->sealed());
  EXPECT_FALSE(buffer->Write(0, "x").ok());
  EXPECT_EQ(buffer->bytes().substr(0, 6), "kforge");

  EXPECT_EQ(::pwrite(buffer->fd(), "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(buffer->fd(), 0), 0);
  void* shared = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, buffer->fd(), 0);
  EXPECT_EQ(shared, MAP_FAILED);
  // A private copy-on-write mapping (how a candidate maps its inputs) is
  // allowed, and its writes stay its own.
  void* priv = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, buffer->fd(), 0);
  ASSERT_NE(priv, MAP_FAILED);
  static_cast<char*>(priv)[0] = 'X';
  EXPECT_EQ(buffer->bytes().substr(0, 6), "kforge");
  ::munmap(priv, 4096);
}

TEST(SharedMemoryTest, ABufferStillMappedWritableElsewhereIsNotSealedNorRead) {
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // Another holder (the candidate, in the verifier) keeps a writable map.
  void* other = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, buffer->fd(), 0);
  ASSERT_NE(other, MAP_FAILED);
  const absl::Status sealed = buffer->Seal();
  EXPECT_EQ(sealed.code(), absl::StatusCode::kFailedPrecondition) << sealed;
  EXPECT_FALSE(buffer->sealed());
  EXPECT_TRUE(buffer->bytes().empty());
  // Once the other mapping is gone it seals, and reads what was written.
  std::memcpy(other, "late", 4);
  ::munmap(other, 4096);
  ASSERT_TRUE(buffer->Seal().ok());
  EXPECT_EQ(buffer->bytes().substr(0, 4), "late");
}

TEST(SharedMemoryTest, AForkOfTheVerifierDoesNotHoldUpTheSeal) {
  // A harness process being started is a fork of the verifier: it must not
  // take a writable mapping of an unsealed buffer with it.
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->Write(0, "reply").ok());
  const pid_t child = ::fork();
  if (child == 0) {
    ::usleep(500000);
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  const absl::Status sealed = buffer->Seal();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(sealed.ok()) << sealed;
  EXPECT_EQ(buffer->bytes().substr(0, 5), "reply");
}

TEST(SharedMemoryTest, AnEmptyBufferSealsAndReadsEmpty) {
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 0);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->Seal().ok());
  EXPECT_TRUE(buffer->bytes().empty());
}

TEST(SharedMemoryTest, ATruncatedBufferHoldsWhatWasWrittenAndNoMore) {
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 1 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->Write(0, "kforge").ok());
  ASSERT_TRUE(buffer->Truncate(6).ok());
  EXPECT_TRUE(buffer->Truncate(1 << 20).ok()) << "never grows";
  ASSERT_TRUE(buffer->Seal().ok());
  EXPECT_EQ(buffer->bytes(), "kforge");
  EXPECT_FALSE(buffer->Truncate(2).ok()) << "sealed";
}

// A peer holding the descriptor (a candidate and its reply buffer) may shrink
// it: mapping past the end would kill the verifier with SIGBUS on the first
// read, so the seal refuses it.
TEST(SharedMemoryTest, ABufferShrunkByAPeerIsNotMapped) {
  absl::StatusOr<SharedMemory> buffer = SharedMemory::Create("test", 1 << 16);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_EQ(::ftruncate(buffer->fd(), 10), 0);
  const absl::Status sealed = buffer->Seal();
  EXPECT_TRUE(absl::IsDataLoss(sealed)) << sealed;
  EXPECT_FALSE(buffer->sealed());
  EXPECT_TRUE(buffer->bytes().empty());
}

// A reply written into the buffer its request offered becomes its payload,
// shrunk to the tensors' span and sealed; a reply claiming a buffer nobody
// offered, or sending a payload too, is garbage.
TEST(SharedMemoryTest, AReplyBufferIsAdoptedOnlyWhereItWasOffered) {
  absl::StatusOr<SharedMemory> made = SharedMemory::Create("reply", 1 << 20);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE(made->Write(0, std::string(64, 'x')).ok());
  Frame request = Frame::Of("run");
  request.OfferReplyBuffer(std::make_shared<SharedMemory>(*std::move(made)));
  Frame reply = Frame::Of("result");
  reply.Set("payload_in_reply_buffer", true);
  google::protobuf::Value entry;
  auto& f = *entry.mutable_struct_value()->mutable_fields();
  f["name"].set_string_value("run0/out0");
  f["dtype"].set_string_value("float32");
  f["shape"].mutable_list_value()->add_values()->set_number_value(16);
  f["offset"].set_number_value(0);
  f["nbytes"].set_number_value(64);
  google::protobuf::Value tensors;
  *tensors.mutable_list_value()->add_values() = entry;
  reply.Set("tensors", tensors);

  Frame not_offered = reply;
  EXPECT_TRUE(absl::IsDataLoss(AdoptReplyBuffer(Frame::Of("run"), not_offered)));
  Frame with_payload = reply;
  with_payload.payload = "more";
  EXPECT_TRUE(absl::IsDataLoss(AdoptReplyBuffer(request, with_payload)));

  ASSERT_TRUE(AdoptReplyBuffer(request, reply).ok());
  EXPECT_TRUE(request.reply_buffer->sealed());
  EXPECT_EQ(reply.PayloadBytes(), std::string(64, 'x'));
  absl::StatusOr<std::vector<TensorEntry>> entries = reply.Tensors();
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->at(0).nbytes, 64u);

  Frame plain = Frame::Of("result");
  EXPECT_TRUE(AdoptReplyBuffer(request, plain).ok()) << "a reply that did not use it";
  EXPECT_EQ(plain.shared_payload, nullptr);
}

}  // namespace
}  // namespace kforge
