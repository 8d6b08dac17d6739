#include "model/checkpoint/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "model/checkpoint/safetensors_writer.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string AsString(absl::Span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// A safetensors file built by hand, independent of the writer under test.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string file(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i, length >>= 8) file[i] = static_cast<char>(length & 0xFF);
  return file + header + data;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  // Writes `contents` as dir/model.safetensors and opens the folder.
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenRaw(const std::string& contents) {
    const std::string sub = absl::StrCat("ckpt", ++count_);
    path_ = dir_.Sub(sub + "/model.safetensors");
    testing::WriteFile(path_, contents);
    return SafetensorsCheckpoint::Open(dir_.Sub(sub));
  }

  void ExpectCorrupt(const std::string& header, const std::string& data, absl::StatusCode code,
                     const std::vector<std::string>& phrases) {
    absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = OpenRaw(RawFile(header, data));
    EXPECT_EQ(ckpt.status().code(), code) << header << "\n" << ckpt.status();
    EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr(path_)) << header;
    for (const std::string& phrase : phrases) {
      EXPECT_THAT(std::string(ckpt.status().message()), HasSubstr(phrase)) << header;
    }
  }

  testing::TempDir dir_;
  std::string path_;
  int count_ = 0;
};

TEST_F(SafetensorsTest, WrittenTensorsReadBackWithDtypeShapeAndBytes) {
  const std::vector<float> floats = {1, 2, 3, 4, 5, 6};
  std::vector<TensorToWrite> tensors = {
      {.name = "a.f32",
       .dtype = TensorDtype::kF32,
       .shape = {2, 3},
       .data = FloatsToBytes(floats, TensorDtype::kF32).value()},
      {.name = "b.i64", .dtype = TensorDtype::kI64, .shape = {}, .data = Bytes("12345678")},
      {.name = "c.bool",
       .dtype = TensorDtype::kBool,
       .shape = {3},
       .data = Bytes(std::string("\x01\x00\x01", 3))},
      {.name = "d.empty", .dtype = TensorDtype::kBF16, .shape = {0, 4}, .data = {}},
      {.name = "e.u8", .dtype = TensorDtype::kU8, .shape = {1}, .data = Bytes("z")}};
  const std::string dir = dir_.Sub("ckpt");
  std::filesystem::create_directories(dir);
  const absl::Status written =
      WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  ASSERT_TRUE(written.ok()) << written;

  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_THAT((*ckpt)->Names(), ElementsAre("a.f32", "b.i64", "c.bool", "d.empty", "e.u8"));
  for (const TensorToWrite& t : tensors) {
    const TensorView* view = (*ckpt)->Find(t.name);
    ASSERT_NE(view, nullptr) << t.name;
    EXPECT_EQ(view->dtype, t.dtype) << t.name;
    EXPECT_EQ(view->shape, t.shape) << t.name;
    EXPECT_EQ(AsString(view->data), AsString(t.data)) << t.name;
    EXPECT_EQ(view->file, std::filesystem::path(dir) / "model.safetensors");
  }
  float second;
  std::memcpy(&second, (*ckpt)->Find("a.f32")->data.data() + 4, 4);
  EXPECT_EQ(second, 2.0f);
  EXPECT_EQ((*ckpt)->Find("absent"), nullptr);
}

TEST_F(SafetensorsTest, WriterPadsHeaderToEightBytes) {
  absl::StatusOr<std::string> file = EncodeSafetensors(
      {{.name = "x", .dtype = TensorDtype::kF64, .shape = {1}, .data = Bytes("abcdefgh")}}, {});
  ASSERT_TRUE(file.ok()) << file.status();
  const uint8_t length = static_cast<uint8_t>((*file)[0]);
  EXPECT_EQ(length % 8, 0);
  EXPECT_EQ(file->substr(8 + length), "abcdefgh");
}

TEST_F(SafetensorsTest, WriterRejectsWrongSizeAndRepeatedNames) {
  absl::StatusOr<std::string> wrong = EncodeSafetensors(
      {{.name = "w", .dtype = TensorDtype::kF32, .shape = {2}, .data = Bytes("abc")}}, {});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), AllOf(HasSubstr("\"w\""), HasSubstr("needs 8")));
  absl::StatusOr<std::string> twice = EncodeSafetensors(
      {{.name = "t", .dtype = TensorDtype::kU8, .shape = {1}, .data = Bytes("a")},
       {.name = "t", .dtype = TensorDtype::kU8, .shape = {1}, .data = Bytes("b")}},
      {});
  EXPECT_THAT(twice.status().message(), HasSubstr("\"t\" is given twice"));
}

TEST_F(SafetensorsTest, Bfloat16RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 1.0 (0x3F80) and 0x3F81: even wins.
  // 1 + 3*2^-8 lies halfway between 0x3F81 and 0x3F82: even wins again.
  const std::vector<float> values = {1.0f, 1.00390625f, 1.01171875f, -2.0f};
  absl::StatusOr<std::vector<std::byte>> bytes = FloatsToBytes(values, TensorDtype::kBF16);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(AsString(*bytes), std::string("\x80\x3F\x80\x3F\x82\x3F\x00\xC0", 8));
  EXPECT_FALSE(FloatsToBytes(values, TensorDtype::kI32).ok());
}

TEST_F(SafetensorsTest, ShardedCheckpointFindsTensorsInTheirShards) {
  const std::string dir = dir_.Sub("sharded");
  testing::WriteFile(
      dir + "/a.safetensors",
      RawFile(R"({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "xy"));
  testing::WriteFile(dir + "/b.safetensors",
                     RawFile(R"({"y": {"dtype": "I8", "shape": [1], "data_offsets": [0, 1]},
                                 "__metadata__": {"format": "pt"}})",
                             "q"));
  testing::WriteFile(dir + "/model.safetensors.index.json",
                     R"({"metadata": {"total_size": 3},
                         "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_THAT((*ckpt)->Names(), ElementsAre("x", "y"));
  EXPECT_EQ(AsString((*ckpt)->Find("x")->data), "xy");
  EXPECT_EQ((*ckpt)->Find("y")->file.filename(), "b.safetensors");
  EXPECT_EQ((*ckpt)->Find("y")->dtype, TensorDtype::kI8);
}

// Names that string concatenation used to write unquoted or unescaped.
const std::vector<std::string> kAwkwardNames = {
    "model.layers.0.\"quoted\".weight", "back\\slash", "new\nline\ttab\x01", "caf\xc3\xa9 <|x|>"};

TEST_F(SafetensorsTest, AnyTensorNameAndMetadataReadBackThroughTheJsonLibrary) {
  std::vector<TensorToWrite> tensors;
  for (size_t i = 0; i < kAwkwardNames.size(); ++i) {
    tensors.push_back({.name = kAwkwardNames[i], .dtype = TensorDtype::kU8, .shape = {1},
                       .data = Bytes(std::string(1, static_cast<char>('a' + i)))});
  }
  const std::string dir = dir_.Sub("awkward");
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors,
                               {{"format", "pt"}, {"note \"x\"", "a\\b"}})
                  .ok());
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  for (size_t i = 0; i < kAwkwardNames.size(); ++i) {
    const TensorView* view = (*ckpt)->Find(kAwkwardNames[i]);
    ASSERT_NE(view, nullptr) << kAwkwardNames[i];
    EXPECT_EQ(AsString(view->data), std::string(1, static_cast<char>('a' + i)));
  }
}

TEST_F(SafetensorsTest, TheIndexWriterMapsEveryTensorToItsShardAndReadsBack) {
  const std::string dir = dir_.Sub("index");
  std::map<std::string, std::string> weight_map;
  for (size_t i = 0; i < kAwkwardNames.size(); ++i) {
    const std::string shard = absl::StrCat("model-0000", i % 2 + 1, "-of-00002.safetensors");
    weight_map[kAwkwardNames[i]] = shard;
  }
  std::map<std::string, std::vector<TensorToWrite>> shards;
  for (const auto& [name, shard] : weight_map) {
    shards[shard].push_back(
        {.name = name, .dtype = TensorDtype::kU8, .shape = {2}, .data = Bytes("xy")});
  }
  std::filesystem::create_directories(dir);
  for (const auto& [shard, tensors] : shards) {
    ASSERT_TRUE(WriteSafetensors(dir + "/" + shard, tensors, {{"format", "pt"}}).ok());
  }
  const std::string index = SafetensorsIndexJson(weight_map, 2 * kAwkwardNames.size());
  testing::WriteFile(dir + "/model.safetensors.index.json", index);
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status() << "\n" << index;
  for (const auto& [name, shard] : weight_map) {
    ASSERT_NE((*ckpt)->Find(name), nullptr) << name;
    EXPECT_EQ((*ckpt)->Find(name)->file.filename(), shard);
  }
  google::protobuf::Struct parsed;
  ASSERT_TRUE(ParseJsonMessage(index, &parsed).ok());
  EXPECT_EQ(parsed.fields().at("metadata").struct_value().fields().at("total_size").number_value(),
            8);
}

TEST_F(SafetensorsTest, ShardedIndexErrorsNameShardAndTensor) {
  const std::string dir = dir_.Sub("bad-index");
  const std::string index = dir + "/model.safetensors.index.json";
  testing::WriteFile(
      dir + "/a.safetensors",
      RawFile(R"({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})", "xy"));
  testing::WriteFile(index, R"({"weight_map": {"x": "a.safetensors",
                                               "y": "model-00002-of-00002.safetensors"}})");
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(),
              AllOf(HasSubstr(index), HasSubstr("model-00002-of-00002.safetensors")));

  testing::WriteFile(index, R"({"weight_map": {"x": "a.safetensors", "z": "a.safetensors"}})");
  ckpt = SafetensorsCheckpoint::Open(dir);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ckpt.status().message(), AllOf(HasSubstr("\"z\""), HasSubstr("a.safetensors")));

  testing::WriteFile(index, R"({"weight_map": {"x": "../a.safetensors"}})");
  EXPECT_EQ(SafetensorsCheckpoint::Open(dir).status().code(), absl::StatusCode::kInvalidArgument);

  testing::WriteFile(index, R"({"metadata": {}})");
  EXPECT_THAT(SafetensorsCheckpoint::Open(dir).status().message(),
              HasSubstr("\"weight_map\" is missing"));
}

TEST_F(SafetensorsTest, TensorInTwoShardsIsDataLoss) {
  const std::string dir = dir_.Sub("dup");
  const std::string x =
      RawFile(R"({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", "x");
  testing::WriteFile(dir + "/a.safetensors", x);
  testing::WriteFile(dir + "/b.safetensors", x);
  testing::WriteFile(dir + "/model.safetensors.index.json",
                     R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt = SafetensorsCheckpoint::Open(dir);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ckpt.status().message(), HasSubstr("\"x\" is also in"));
}

TEST_F(SafetensorsTest, MissingFolderOrFilesAreNotFoundNamingTheFolder) {
  const std::string missing = dir_.Sub("missing");
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt =
      SafetensorsCheckpoint::Open(missing);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), HasSubstr(missing));

  const std::string empty = dir_.Sub("empty");
  std::filesystem::create_directories(empty);
  ckpt = SafetensorsCheckpoint::Open(empty);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ckpt.status().message(), AllOf(HasSubstr(empty), HasSubstr("model.safetensors")));
}

TEST_F(SafetensorsTest, ShortFileAndBadLengthAreDataLoss) {
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt =
      OpenRaw(std::string("\x05\x00\x00", 3));
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ckpt.status().message(), AllOf(HasSubstr(path_), HasSubstr("too short")));

  std::string file = RawFile("{}", "");
  file[0] = 100;  // 100 header bytes announced, 2 there
  ckpt = OpenRaw(file);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ckpt.status().message(),
              AllOf(HasSubstr(path_), HasSubstr("header length 100 runs past")));

  file = RawFile("{}", "");
  file[7] = 0x40;  // a length of 2^62
  EXPECT_EQ(OpenRaw(file).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(SafetensorsTest, EveryCorruptHeaderNamesTheProblem) {
  using absl::StatusCode;
  ExpectCorrupt(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})",
                std::string(8, 'a'), StatusCode::kDataLoss, {"not a JSON object"});
  ExpectCorrupt("[1, 2]", "", StatusCode::kDataLoss, {"not a JSON object"});
  ExpectCorrupt(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "abcd",
                StatusCode::kDataLoss, {"\"w\"", "[0, 8] are out of range", "4-byte"});
  ExpectCorrupt(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                std::string(8, 'a'), StatusCode::kDataLoss, {"\"w\"", "needs 12"});
  ExpectCorrupt(R"({"w": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}})",
                std::string(8, 'a'), StatusCode::kInvalidArgument, {"\"w\"", "F8_E4M3"});
  ExpectCorrupt(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                std::string(4, 'a'), StatusCode::kDataLoss, {"\"w\"", "shape"});
  ExpectCorrupt(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})",
                std::string(4, 'a'), StatusCode::kDataLoss, {"\"w\"", "data_offsets"});
  ExpectCorrupt(R"({"w": {"dtype": "U8", "shape": [2], "data_offsets": [3, 1]}})",
                std::string(4, 'a'), StatusCode::kDataLoss, {"\"w\"", "out of range"});
  ExpectCorrupt(R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", "a",
                StatusCode::kInvalidArgument, {"\"w\"", "\"dtype\" is missing"});
  ExpectCorrupt(R"({"w": 3})", "", StatusCode::kDataLoss, {"\"w\"", "not an object"});
}

TEST_F(SafetensorsTest, TensorsMustTileTheDataRegion) {
  using absl::StatusCode;
  ExpectCorrupt(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                    "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
                std::string(6, 'x'), StatusCode::kDataLoss,
                {"\"b\"", "overlap", "\"a\" ends at 4"});
  ExpectCorrupt(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                    "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]}})",
                std::string(6, 'x'), StatusCode::kDataLoss, {"\"b\"", "gap"});
  ExpectCorrupt(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})",
                std::string(3, 'x'), StatusCode::kDataLoss, {"\"a\"", "starts at 0"});
  ExpectCorrupt(R"({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}})",
                std::string(5, 'x'), StatusCode::kDataLoss, {"cover 2 bytes of the 5-byte"});
}

TEST_F(SafetensorsTest, EmptyHeaderIsAValidEmptyCheckpoint) {
  absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt =
      OpenRaw(RawFile(R"({"__metadata__": {"format": "pt"}})", ""));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_TRUE((*ckpt)->Names().empty());
}

TEST(TensorDtypeTest, NamesSizesAndParsingAgree) {
  for (TensorDtype dtype :
       {TensorDtype::kF32, TensorDtype::kF16, TensorDtype::kBF16, TensorDtype::kF64,
        TensorDtype::kI64, TensorDtype::kI32, TensorDtype::kI16, TensorDtype::kI8, TensorDtype::kU8,
        TensorDtype::kBool}) {
    absl::StatusOr<TensorDtype> parsed = ParseTensorDtype(TensorDtypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << TensorDtypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(TensorDtypeSize(TensorDtype::kBF16), 2u);
  EXPECT_EQ(TensorDtypeSize(TensorDtype::kF64), 8u);
  EXPECT_EQ(TensorDtypeSize(TensorDtype::kBool), 1u);
  EXPECT_EQ(TensorDtypeName(TensorDtype::kBool), "BOOL");
  EXPECT_FALSE(ParseTensorDtype("f32").ok());
  EXPECT_EQ(ElementCount({}), 1);
  EXPECT_EQ(ElementCount({3, 0, 2}), 0);
  EXPECT_EQ(ElementCount({3, 4}), 12);
}

}  // namespace
}  // namespace kforge
