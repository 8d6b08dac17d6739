#include "model/tokenizer/tokenizer_json.h"

#include <cmath>

#include <google/protobuf/struct.pb.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge::tokenizer {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

absl::Status Invalid(absl::string_view where, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
}

// The field, or nullptr when absent or null.
const Value* Field(const Struct& object, const std::string& name) {
  const auto it = object.fields().find(name);
  if (it == object.fields().end() || it->second.kind_case() == Value::kNullValue) {
    return nullptr;
  }
  return &it->second;
}

absl::StatusOr<const Struct*> ObjectField(const Struct& object, const std::string& name,
                                          absl::string_view where) {
  const Value* value = Field(object, name);
  if (value == nullptr) return Invalid(where, absl::StrCat("missing \"", name, "\""));
  if (value->kind_case() != Value::kStructValue) {
    return Invalid(where, absl::StrCat("\"", name, "\" is not an object"));
  }
  return &value->struct_value();
}

absl::StatusOr<std::string> StringField(const Struct& object, const std::string& name,
                                        absl::string_view where) {
  const Value* value = Field(object, name);
  if (value == nullptr) return Invalid(where, absl::StrCat("missing \"", name, "\""));
  if (value->kind_case() != Value::kStringValue) {
    return Invalid(where, absl::StrCat("\"", name, "\" is not a string"));
  }
  return value->string_value();
}

absl::StatusOr<bool> BoolField(const Struct& object, const std::string& name, bool fallback,
                               absl::string_view where) {
  const Value* value = Field(object, name);
  if (value == nullptr) return fallback;
  if (value->kind_case() != Value::kBoolValue) {
    return Invalid(where, absl::StrCat("\"", name, "\" is not a boolean"));
  }
  return value->bool_value();
}

absl::StatusOr<int32_t> TokenIdOf(const Value& value, absl::string_view where) {
  const double id = value.number_value();
  if (value.kind_case() != Value::kNumberValue || id < 0 || id > INT32_MAX ||
      std::floor(id) != id) {
    return Invalid(where, "the id is not a non-negative integer");
  }
  return static_cast<int32_t>(id);
}

absl::Status ReadVocab(const Struct& model, TokenizerJson* out) {
  KF_ASSIGN_OR_RETURN(const Struct* vocab, ObjectField(model, "vocab", "model"));
  out->vocab.reserve(vocab->fields().size());
  for (const auto& [token, value] : vocab->fields()) {
    KF_ASSIGN_OR_RETURN(int32_t id,
                        TokenIdOf(value, absl::StrCat("model.vocab[\"", token, "\"]")));
    out->vocab.emplace_back(token, id);
  }
  return absl::OkStatus();
}

// Merges are "left right" strings (tokens cannot hold a space then) or, in
// newer files, [left, right] pairs.
absl::Status ReadMerges(const Struct& model, TokenizerJson* out) {
  const Value* merges = Field(model, "merges");
  if (merges == nullptr) return Invalid("model", "missing \"merges\"");
  if (merges->kind_case() != Value::kListValue) {
    return Invalid("model", "\"merges\" is not a list");
  }
  const ListValue& list = merges->list_value();
  out->merges.reserve(list.values_size());
  for (int i = 0; i < list.values_size(); ++i) {
    const Value& entry = list.values(i);
    const std::string where = absl::StrCat("model.merges entry index ", i);
    if (entry.kind_case() == Value::kStringValue) {
      std::vector<std::string> parts = absl::StrSplit(entry.string_value(), ' ');
      if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
        return Invalid(where, absl::StrCat("\"", entry.string_value(),
                                           "\" is not two tokens separated by one space"));
      }
      out->merges.emplace_back(std::move(parts[0]), std::move(parts[1]));
    } else if (entry.kind_case() == Value::kListValue &&
               entry.list_value().values_size() == 2 &&
               entry.list_value().values(0).kind_case() == Value::kStringValue &&
               entry.list_value().values(1).kind_case() == Value::kStringValue) {
      out->merges.emplace_back(entry.list_value().values(0).string_value(),
                               entry.list_value().values(1).string_value());
    } else {
      return Invalid(where, "neither a \"left right\" string nor a [left, right] pair");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadModel(const Struct& root, TokenizerJson* out) {
  KF_ASSIGN_OR_RETURN(const Struct* model, ObjectField(root, "model", "tokenizer"));
  KF_ASSIGN_OR_RETURN(std::string type, StringField(*model, "type", "model"));
  if (type != "BPE") return Invalid("model", absl::StrCat("type \"", type, "\" is not BPE"));
  KF_ASSIGN_OR_RETURN(bool byte_fallback, BoolField(*model, "byte_fallback", false, "model"));
  if (byte_fallback) return Invalid("model", "byte_fallback is not supported");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Value* value = Field(*model, affix);
    if (value != nullptr && !(value->kind_case() == Value::kStringValue &&
                              value->string_value().empty())) {
      return Invalid("model", absl::StrCat(affix, " is not supported"));
    }
  }
  KF_ASSIGN_OR_RETURN(out->ignore_merges, BoolField(*model, "ignore_merges", false, "model"));
  KF_RETURN_IF_ERROR(ReadVocab(*model, out));
  return ReadMerges(*model, out);
}

absl::Status ReadAddedTokens(const Struct& root, TokenizerJson* out) {
  const Value* added = Field(root, "added_tokens");
  if (added == nullptr) return absl::OkStatus();
  if (added->kind_case() != Value::kListValue) {
    return Invalid("tokenizer", "\"added_tokens\" is not a list");
  }
  for (int i = 0; i < added->list_value().values_size(); ++i) {
    const Value& entry = added->list_value().values(i);
    const std::string where = absl::StrCat("added_tokens entry index ", i);
    if (entry.kind_case() != Value::kStructValue) return Invalid(where, "not an object");
    const Struct& token = entry.struct_value();
    AddedTokenSpec spec;
    const Value* id = Field(token, "id");
    if (id == nullptr) return Invalid(where, "missing \"id\"");
    KF_ASSIGN_OR_RETURN(spec.id, TokenIdOf(*id, where));
    KF_ASSIGN_OR_RETURN(spec.content, StringField(token, "content", where));
    if (spec.content.empty()) return Invalid(where, "empty \"content\"");
    KF_ASSIGN_OR_RETURN(spec.special, BoolField(token, "special", false, where));
    KF_ASSIGN_OR_RETURN(spec.single_word, BoolField(token, "single_word", false, where));
    KF_ASSIGN_OR_RETURN(spec.lstrip, BoolField(token, "lstrip", false, where));
    KF_ASSIGN_OR_RETURN(spec.rstrip, BoolField(token, "rstrip", false, where));
    KF_ASSIGN_OR_RETURN(spec.normalized, BoolField(token, "normalized", !spec.special, where));
    out->added_tokens.push_back(std::move(spec));
  }
  return absl::OkStatus();
}

absl::Status ReadNormalizer(const Struct& root, TokenizerJson* out) {
  const Value* normalizer = Field(root, "normalizer");
  if (normalizer == nullptr) return absl::OkStatus();
  if (normalizer->kind_case() != Value::kStructValue) {
    return Invalid("tokenizer", "\"normalizer\" is not an object");
  }
  KF_ASSIGN_OR_RETURN(std::string type,
                      StringField(normalizer->struct_value(), "type", "normalizer"));
  if (type != "NFC") {
    return Invalid("normalizer", absl::StrCat("type \"", type, "\" is not supported (only NFC)"));
  }
  out->nfc_normalizer = true;
  return absl::OkStatus();
}

// One step of the pre-tokenizer: a Split with a known pattern, or ByteLevel.
absl::Status ReadPreTokenizerStep(const Struct& step, absl::string_view where,
                                  bool* seen_byte_level, TokenizerJson* out) {
  KF_ASSIGN_OR_RETURN(std::string type, StringField(step, "type", where));
  if (type == "ByteLevel") {
    if (*seen_byte_level) return Invalid(where, "a second ByteLevel step");
    *seen_byte_level = true;
    KF_ASSIGN_OR_RETURN(out->add_prefix_space,
                        BoolField(step, "add_prefix_space", true, where));
    KF_ASSIGN_OR_RETURN(bool use_regex, BoolField(step, "use_regex", true, where));
    if (use_regex) {
      if (out->split.has_value()) return Invalid(where, "a second splitting step");
      out->split = SplitPattern::kGpt2;
    }
    return absl::OkStatus();
  }
  if (type != "Split") {
    return Invalid(where, absl::StrCat("type \"", type,
                                       "\" is not supported (only Split and ByteLevel)"));
  }
  if (*seen_byte_level) return Invalid(where, "Split after ByteLevel is not supported");
  if (out->split.has_value()) return Invalid(where, "a second splitting step");
  KF_ASSIGN_OR_RETURN(std::string behavior, StringField(step, "behavior", where));
  if (behavior != "Isolated") {
    return Invalid(where, absl::StrCat("behavior \"", behavior,
                                       "\" is not supported (only Isolated)"));
  }
  KF_ASSIGN_OR_RETURN(bool invert, BoolField(step, "invert", false, where));
  if (invert) return Invalid(where, "invert=true is not supported");
  KF_ASSIGN_OR_RETURN(const Struct* pattern, ObjectField(step, "pattern", where));
  KF_ASSIGN_OR_RETURN(std::string regex,
                      StringField(*pattern, "Regex", absl::StrCat(where, ".pattern")));
  absl::StatusOr<SplitPattern> split = SplitPatternFromRegex(regex);
  if (!split.ok()) return Invalid(where, split.status().message());
  out->split = *split;
  out->split_before_byte_level = true;
  return absl::OkStatus();
}

absl::Status ReadPreTokenizer(const Struct& root, TokenizerJson* out) {
  KF_ASSIGN_OR_RETURN(const Struct* pre, ObjectField(root, "pre_tokenizer", "tokenizer"));
  KF_ASSIGN_OR_RETURN(std::string type, StringField(*pre, "type", "pre_tokenizer"));
  bool seen_byte_level = false;
  if (type == "Sequence") {
    const Value* steps = Field(*pre, "pretokenizers");
    if (steps == nullptr || steps->kind_case() != Value::kListValue) {
      return Invalid("pre_tokenizer", "\"pretokenizers\" is not a list");
    }
    for (int i = 0; i < steps->list_value().values_size(); ++i) {
      const Value& step = steps->list_value().values(i);
      const std::string where = absl::StrCat("pre_tokenizer.pretokenizers[", i, "]");
      if (step.kind_case() != Value::kStructValue) return Invalid(where, "not an object");
      KF_RETURN_IF_ERROR(
          ReadPreTokenizerStep(step.struct_value(), where, &seen_byte_level, out));
    }
  } else {
    KF_RETURN_IF_ERROR(ReadPreTokenizerStep(*pre, "pre_tokenizer", &seen_byte_level, out));
  }
  if (!seen_byte_level) return Invalid("pre_tokenizer", "no ByteLevel step (not byte-level BPE)");
  return absl::OkStatus();
}

absl::Status ReadDecoder(const Struct& root) {
  KF_ASSIGN_OR_RETURN(const Struct* decoder, ObjectField(root, "decoder", "tokenizer"));
  KF_ASSIGN_OR_RETURN(std::string type, StringField(*decoder, "type", "decoder"));
  if (type != "ByteLevel") {
    return Invalid("decoder",
                   absl::StrCat("type \"", type, "\" is not supported (only ByteLevel)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerJson> ParseTokenizerJson(absl::string_view json) {
  Struct root;
  absl::Status parsed = ParseJsonMessage(json, &root);
  if (!parsed.ok()) return Invalid("malformed JSON", parsed.message());
  TokenizerJson out;
  KF_RETURN_IF_ERROR(ReadModel(root, &out));
  KF_RETURN_IF_ERROR(ReadAddedTokens(root, &out));
  KF_RETURN_IF_ERROR(ReadNormalizer(root, &out));
  KF_RETURN_IF_ERROR(ReadPreTokenizer(root, &out));
  KF_RETURN_IF_ERROR(ReadDecoder(root));
  return out;
}

}  // namespace kforge::tokenizer
