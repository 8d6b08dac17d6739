#include "model/checkpoint/safetensors_header.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"

namespace kforge::checkpoint {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Value;

// A tensor's entry, with its offsets relative to the data region.
struct Entry {
  TensorView view;
  int64_t begin = 0;
  int64_t end = 0;
};

absl::Status Corrupt(const std::filesystem::path& file, absl::string_view problem) {
  return absl::DataLossError(absl::StrCat(file.string(), ": ", problem));
}

absl::Status TensorCorrupt(const std::filesystem::path& file, absl::string_view tensor,
                           absl::string_view problem) {
  return absl::DataLossError(absl::StrCat(file.string(), ": tensor \"", tensor, "\": ", problem));
}

// A list of non-negative integers, or nullopt.
std::optional<std::vector<int64_t>> NonNegativeInts(const Value& value) {
  if (value.kind_case() != Value::kListValue) return std::nullopt;
  std::vector<int64_t> out;
  for (const Value& item : value.list_value().values()) {
    std::optional<int64_t> x = AsInt(item);
    if (!x.has_value() || *x < 0) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

// shape x itemsize, or nullopt when it would not fit in an int64.
std::optional<int64_t> ByteSize(const std::vector<int64_t>& shape, size_t itemsize) {
  int64_t bytes = static_cast<int64_t>(itemsize);
  for (const int64_t dim : shape) {
    if (dim != 0 && bytes > std::numeric_limits<int64_t>::max() / dim) return std::nullopt;
    bytes *= dim;
  }
  return bytes;
}

absl::StatusOr<Entry> ParseEntry(const std::string& name, const Value& value, int64_t data_size,
                                 const std::filesystem::path& file) {
  if (value.kind_case() != Value::kStructValue) return TensorCorrupt(file, name, "not an object");
  const JsonObject json(value.struct_value(),
                        absl::StrCat(file.string(), ": tensor \"", name, "\""));
  Entry entry;
  entry.view.name = name;
  entry.view.file = file;
  KF_ASSIGN_OR_RETURN(std::string dtype, json.RequiredString("dtype"));
  absl::StatusOr<TensorDtype> parsed = ParseTensorDtype(dtype);
  if (!parsed.ok()) return json.FieldError("dtype", parsed.status().message());
  entry.view.dtype = *parsed;
  const Value* shape = json.Find("shape");
  const Value* offsets = json.Find("data_offsets");
  std::optional<std::vector<int64_t>> dims = shape ? NonNegativeInts(*shape) : std::nullopt;
  if (!dims.has_value()) return TensorCorrupt(file, name, "shape is not a list of sizes");
  entry.view.shape = *std::move(dims);
  std::optional<std::vector<int64_t>> range = offsets ? NonNegativeInts(*offsets) : std::nullopt;
  if (!range.has_value() || range->size() != 2) {
    return TensorCorrupt(file, name, "data_offsets is not [begin, end]");
  }
  entry.begin = (*range)[0];
  entry.end = (*range)[1];
  if (entry.begin > entry.end || entry.end > data_size) {
    return TensorCorrupt(
        file, name,
        absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] are out of range of the ",
                     data_size, "-byte data region"));
  }
  const std::optional<int64_t> bytes = ByteSize(entry.view.shape, TensorDtypeSize(*parsed));
  if (!bytes.has_value() || *bytes != entry.end - entry.begin) {
    return TensorCorrupt(
        file, name,
        absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] hold ",
                     entry.end - entry.begin, " bytes but shape [",
                     absl::StrJoin(entry.view.shape, ", "), "] of ", dtype, " needs ",
                     bytes.has_value() ? absl::StrCat(*bytes) : std::string("more than 2^63")));
  }
  return entry;
}

// The tensors must tile the data region, in order, without gaps or overlap
// (what the safetensors library itself enforces).
absl::Status CheckTiling(const std::vector<Entry>& entries, int64_t data_size,
                         const std::filesystem::path& file) {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  int64_t expected = 0;
  std::string previous;
  for (const Entry* e : sorted) {
    if (e->begin != expected) {
      return TensorCorrupt(
          file, e->view.name,
          absl::StrCat("data_offsets begin at byte ", e->begin, " but ",
                       previous.empty() ? std::string("the data region starts at 0")
                                        : absl::StrCat("\"", previous, "\" ends at ", expected),
                       e->begin < expected ? " (overlap)" : " (gap)"));
    }
    expected = e->end;
    previous = e->view.name;
  }
  if (expected != data_size) {
    return Corrupt(file, absl::StrCat("the tensors cover ", expected, " bytes of the ", data_size,
                                      "-byte data region"));
  }
  return absl::OkStatus();
}

// The JSON header, once its length is checked.
absl::StatusOr<absl::string_view> HeaderText(absl::Span<const std::byte> bytes,
                                             const std::filesystem::path& file) {
  if (bytes.size() < 8) {
    return Corrupt(file,
                   absl::StrCat(bytes.size(), " bytes: too short for the 8-byte header length"));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[i]);
  if (length > bytes.size() - 8 || length > kMaxHeaderBytes) {
    return Corrupt(
        file, absl::StrCat("header length ", length, " runs past the end of the ", bytes.size(),
                           "-byte file or above the ", kMaxHeaderBytes, "-byte limit"));
  }
  return absl::string_view(reinterpret_cast<const char*>(bytes.data()) + 8, length);
}

}  // namespace

absl::StatusOr<std::vector<TensorView>> ParseSafetensors(absl::Span<const std::byte> file_bytes,
                                                         const std::filesystem::path& file) {
  KF_ASSIGN_OR_RETURN(absl::string_view header, HeaderText(file_bytes, file));
  absl::StatusOr<google::protobuf::Struct> root = ParseJsonObject(header);
  if (!root.ok()) {
    return Corrupt(file, absl::StrCat("header is not a JSON object: ", root.status().message()));
  }
  const absl::Span<const std::byte> data = file_bytes.subspan(8 + header.size());
  const int64_t data_size = static_cast<int64_t>(data.size());
  std::vector<Entry> entries;
  for (const auto& [name, value] : root->fields()) {
    if (name == "__metadata__") continue;
    KF_ASSIGN_OR_RETURN(Entry entry, ParseEntry(name, value, data_size, file));
    entries.push_back(std::move(entry));
  }
  KF_RETURN_IF_ERROR(CheckTiling(entries, data_size, file));
  std::vector<TensorView> views;
  views.reserve(entries.size());
  for (Entry& e : entries) {
    e.view.data = data.subspan(e.begin, e.end - e.begin);
    views.push_back(std::move(e.view));
  }
  return views;
}

}  // namespace kforge::checkpoint
