#include "verifier_worker/sandbox/frame.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kforge {

using google::protobuf::Value;

Frame Frame::Of(absl::string_view type) {
  Frame frame;
  frame.Set("type", type);
  return frame;
}

Frame& Frame::Set(const std::string& key, absl::string_view value) {
  (*header.mutable_fields())[key].set_string_value(std::string(value));
  return *this;
}

Frame& Frame::Set(const std::string& key, double value) {
  (*header.mutable_fields())[key].set_number_value(value);
  return *this;
}

Frame& Frame::Set(const std::string& key, bool value) {
  (*header.mutable_fields())[key].set_bool_value(value);
  return *this;
}

Frame& Frame::Set(const std::string& key, Value value) {
  (*header.mutable_fields())[key] = std::move(value);
  return *this;
}

const Value* Frame::Get(const std::string& key) const {
  auto it = header.fields().find(key);
  return it == header.fields().end() ? nullptr : &it->second;
}

std::string Frame::GetString(const std::string& key) const {
  const Value* v = Get(key);
  return v != nullptr && v->has_string_value() ? v->string_value() : "";
}

double Frame::GetNumber(const std::string& key, double fallback) const {
  const Value* v = Get(key);
  return v != nullptr && v->kind_case() == Value::kNumberValue ? v->number_value() : fallback;
}

bool Frame::GetBool(const std::string& key) const {
  const Value* v = Get(key);
  return v != nullptr && v->bool_value();
}

namespace {

// One "tensors" (or "shared_tensors") entry of a header.
Value TensorEntryValue(const std::string& name, const std::string& dtype,
                       const std::vector<int64_t>& shape, uint64_t offset, uint64_t nbytes) {
  Value entry;
  auto& fields = *entry.mutable_struct_value()->mutable_fields();
  fields["name"].set_string_value(name);
  fields["dtype"].set_string_value(dtype);
  auto& dims = *fields["shape"].mutable_list_value();  // [] for a scalar
  for (int64_t d : shape) dims.add_values()->set_number_value(static_cast<double>(d));
  fields["offset"].set_number_value(static_cast<double>(offset));
  fields["nbytes"].set_number_value(static_cast<double>(nbytes));
  return entry;
}

}  // namespace

void Frame::AddTensor(const std::string& name, absl::string_view bytes, const std::string& dtype,
                      const std::vector<int64_t>& shape) {
  *(*header.mutable_fields())["tensors"].mutable_list_value()->add_values() =
      TensorEntryValue(name, dtype, shape, payload.size(), bytes.size());
  payload.append(bytes.data(), bytes.size());
}

void Frame::AddSharedTensor(const std::string& name, int buffer, uint64_t offset,
                            uint64_t nbytes, const std::string& dtype,
                            const std::vector<int64_t>& shape) {
  Value entry = TensorEntryValue(name, dtype, shape, offset, nbytes);
  (*entry.mutable_struct_value()->mutable_fields())["buffer"].set_number_value(buffer);
  *(*header.mutable_fields())["shared_tensors"].mutable_list_value()->add_values() =
      std::move(entry);
}

absl::StatusOr<std::vector<TensorEntry>> Frame::Tensors() const {
  std::vector<TensorEntry> out;
  const Value* list = Get("tensors");
  if (list == nullptr) return out;
  for (const Value& v : list->list_value().values()) {
    const auto& f = v.struct_value().fields();
    TensorEntry entry;
    auto get = [&](const char* key) -> const Value& {
      static const Value kEmpty;
      auto it = f.find(key);
      return it == f.end() ? kEmpty : it->second;
    };
    entry.name = get("name").string_value();
    entry.dtype = get("dtype").string_value();
    for (const Value& d : get("shape").list_value().values()) {
      entry.shape.push_back(static_cast<int64_t>(d.number_value()));
    }
    entry.offset = static_cast<uint64_t>(get("offset").number_value());
    entry.nbytes = static_cast<uint64_t>(get("nbytes").number_value());
    const uint64_t size = PayloadBytes().size();
    if (entry.offset > size || entry.nbytes > size - entry.offset) {
      return absl::DataLossError(absl::StrCat("tensor ", entry.name, " lies outside the payload"));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

int Frame::Attach(std::shared_ptr<const SharedMemory> buffer) {
  attachments.push_back(std::move(buffer));
  return static_cast<int>(attachments.size()) - 1;
}

void Frame::OfferReplyBuffer(std::shared_ptr<SharedMemory> buffer) {
  Set("reply_capacity", static_cast<double>(buffer->size()));
  Set("reply_buffer", Attach(buffer));
  reply_buffer = std::move(buffer);
}

std::vector<int> Frame::AttachedFds() const {
  std::vector<int> fds;
  for (const auto& buffer : attachments) fds.push_back(buffer->fd());
  return fds;
}

absl::Status AdoptReplyBuffer(const Frame& request, Frame& reply) {
  if (!reply.GetBool("payload_in_reply_buffer")) return absl::OkStatus();
  if (request.reply_buffer == nullptr || !reply.payload.empty()) {
    return absl::DataLossError("a reply payload in a buffer that was not offered");
  }
  // The end of the last tensor: an entry past the buffer is left for
  // Tensors() to refuse, and the buffer is not shrunk for it.
  double used = 0;
  if (const google::protobuf::Value* tensors = reply.Get("tensors"); tensors != nullptr) {
    for (const google::protobuf::Value& entry : tensors->list_value().values()) {
      const auto& f = entry.struct_value().fields();
      const double offset = f.count("offset") ? f.at("offset").number_value() : 0;
      const double nbytes = f.count("nbytes") ? f.at("nbytes").number_value() : 0;
      used = std::max(used, offset + nbytes);
    }
  }
  if (used >= 0 && used <= static_cast<double>(request.reply_buffer->size())) {
    KF_RETURN_IF_ERROR(request.reply_buffer->Truncate(static_cast<uint64_t>(used)));
  }
  KF_RETURN_IF_ERROR(request.reply_buffer->Seal());
  reply.shared_payload = request.reply_buffer;
  return absl::OkStatus();
}

}  // namespace kforge
