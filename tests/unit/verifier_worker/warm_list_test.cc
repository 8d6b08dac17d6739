// WarmList (MultiInputOptions.warm_variant_sets): stage 4 warms up exactly
// the sets whose first call would compile again, one per signature, and
// sends their shapes and dtypes, never their values. On a CPU the warm
// request is never sent, so this is where its contents are checked.
#include "verifier_worker/funnel/warm_list.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace kforge {
namespace {

// A set the reference ran: init inputs [n], one input tensor of `shape`.
ReferenceSet Set(const std::string& name, int n, std::vector<int64_t> shape,
                 const std::string& dtype = "float32", const std::string& set_dtype = "") {
  ReferenceSet set;
  set.ok = true;
  set.spec.name = name;
  set.spec.dtype = set_dtype;
  set.init_inputs.mutable_list_value()->add_values()->set_number_value(n);
  set.inputs.push_back({.name = name + "/in0", .dtype = dtype, .shape = std::move(shape)});
  set.input_positions = {0};
  set.scalars.mutable_list_value();
  return set;
}

ReferenceEpoch Epoch(const std::vector<ReferenceSet>& sets) {
  ReferenceEpoch epoch;
  for (const ReferenceSet& set : sets) {
    if (set.spec.name != "tiny") epoch.plan.sets.push_back(set.spec);
    epoch.sets[set.spec.name] = set;
  }
  return epoch;
}

std::vector<std::string> Names(const google::protobuf::Value& list) {
  std::vector<std::string> names;
  for (const auto& entry : list.list_value().values()) {
    names.push_back(entry.struct_value().fields().at("set").string_value());
  }
  return names;
}

TEST(WarmListTest, OnlySetsThatCompileAgainAreWarmedOncePerSignature) {
  const ReferenceSet tiny = Set("tiny", 16, {16, 128});
  const ReferenceEpoch epoch = Epoch({
      tiny,
      Set("task_inputs", 128, {128, 1024}),
      Set("normal", 128, {128, 1024}),         // the task's own signature
      Set("ragged_shape", 128, {127, 1021}),   // new shapes
      Set("secret_seed_1", 16, {16, 128}),     // the tiny set's signature
      Set("batch_1", 128, {1, 1024}),
      Set("batch_1_again", 128, {1, 1024}),    // batch_1's signature: once
      Set("bfloat16", 128, {128, 1024}, "bfloat16", "bfloat16"),  // new dtype
  });
  EXPECT_EQ(Names(WarmList(epoch, tiny)),
            (std::vector<std::string>{"ragged_shape", "batch_1", "bfloat16"}));
  // Every set that compiles again runs after the warm-up, a signature's
  // second set too.
  EXPECT_EQ(RecompilingSets(epoch, tiny),
            (std::set<std::string>{"ragged_shape", "batch_1", "batch_1_again", "bfloat16"}));
}

TEST(WarmListTest, SizesOfTheSameClassesAsTheTasksAreNotWarmed) {
  // Triton specialises sizes on 1, multiples of 16 and 64 bits, not values.
  const ReferenceSet tiny = Set("tiny", 16, {16, 128});
  const ReferenceEpoch epoch = Epoch({
      tiny,
      Set("task_inputs", 128, {128, 1024}),
      Set("larger_x1.5", 192, {192, 1536}),       // the same classes
      Set("larger_odd", 200, {200, 1536}),        // 200 is not a multiple of 16
      Set("init_odd", 129, {128, 1024}),          // the model's size is not either
      Set("huge", 128, {128, int64_t{1} << 24}),  // 2^31 elements: 64-bit counts
  });
  EXPECT_EQ(Names(WarmList(epoch, tiny)),
            (std::vector<std::string>{"larger_odd", "init_odd", "huge"}));
  EXPECT_EQ(CompileSignature(epoch.sets.at("larger_x1.5")),
            CompileSignature(epoch.sets.at("task_inputs")));
}

TEST(WarmListTest, AnEntryCarriesShapesAndDtypesButNoValues) {
  const ReferenceSet tiny = Set("tiny", 16, {16, 128});
  ReferenceSet ragged = Set("ragged_shape", 128, {127, 1021});
  ragged.scalars.mutable_list_value()->add_values()->set_number_value(1);
  const google::protobuf::Value list =
      WarmList(Epoch({tiny, Set("task_inputs", 128, {128, 1024}), ragged}), tiny);
  ASSERT_EQ(list.list_value().values_size(), 1);
  const auto& f = list.list_value().values(0).struct_value().fields();
  EXPECT_EQ(f.at("init_inputs").list_value().values(0).number_value(), 128);
  const auto& tensor = f.at("tensors").list_value().values(0).struct_value().fields();
  EXPECT_EQ(tensor.at("position").number_value(), 0);
  EXPECT_EQ(tensor.at("dtype").string_value(), "float32");
  EXPECT_EQ(tensor.at("shape").list_value().values(0).number_value(), 127);
  EXPECT_EQ(tensor.at("shape").list_value().values(1).number_value(), 1021);
  for (const auto& [key, value] : f) {
    EXPECT_TRUE(key == "set" || key == "init_inputs" || key == "dtype" || key == "scalars" ||
                key == "tensors")
        << "unexpected field " << key;
  }
}

TEST(WarmListTest, SetsTheReferenceCouldNotRunAreLeftOut) {
  const ReferenceSet tiny = Set("tiny", 16, {16, 128});
  ReferenceSet larger = Set("larger_x1.5", 192, {192, 1536});
  larger.ok = false;  // over max_model_bytes, say
  EXPECT_TRUE(Names(WarmList(Epoch({tiny, Set("task_inputs", 128, {128, 1024}), larger}), tiny))
                  .empty());
}

}  // namespace
}  // namespace kforge
