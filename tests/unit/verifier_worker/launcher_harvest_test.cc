// LauncherHarvest: what a candidate reports as the launchers it built is
// kept only as lists of known argument type names, each once, up to the
// bound; what is kept is handed out once.
#include "verifier_worker/funnel/launcher_harvest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kforge {
namespace {

google::protobuf::Value List(const std::vector<std::vector<std::string>>& signatures) {
  google::protobuf::Value out;
  out.mutable_list_value();
  for (const auto& signature : signatures) {
    auto* types = out.mutable_list_value()->add_values()->mutable_list_value();
    for (const std::string& type : signature) types->add_values()->set_string_value(type);
  }
  return out;
}

std::vector<std::vector<std::string>> Signatures(const google::protobuf::Value& list) {
  std::vector<std::vector<std::string>> out;
  for (const auto& entry : list.list_value().values()) {
    out.emplace_back();
    for (const auto& type : entry.list_value().values()) out.back().push_back(type.string_value());
  }
  return out;
}

TEST(LauncherHarvestTest, KnownTypeNamesOnly) {
  EXPECT_TRUE(LauncherHarvest::Valid({"*fp32", "*bf16", "*kfp16", "i32", "i64", "fp32",
                                      "constexpr", "i1", "u64", "*fp8e4nv", "*u8"}));
  EXPECT_FALSE(LauncherHarvest::Valid({}));
  EXPECT_FALSE(LauncherHarvest::Valid({"*fp32", "int"}));
  EXPECT_FALSE(LauncherHarvest::Valid({"fp16"})) << "not a type Triton gives a Python value";
  EXPECT_FALSE(LauncherHarvest::Valid({"*fp32\"); import os; (\""}));
  EXPECT_FALSE(LauncherHarvest::Valid({"**fp32"}));
  EXPECT_FALSE(LauncherHarvest::Valid(std::vector<std::string>(65, "i32")));
  EXPECT_TRUE(LauncherHarvest::Valid(std::vector<std::string>(64, "i32")));
}

TEST(LauncherHarvestTest, KeepsEachValidSignatureOnceAndHandsItOutOnce) {
  LauncherHarvest harvest(/*max_signatures=*/10);
  const google::protobuf::Value reply =
      List({{"*fp32", "*fp32", "i32", "constexpr"}, {"*fp32", "rm -rf"}, {"*fp32", "i32"},
            {"*fp32", "*fp32", "i32", "constexpr"}});
  harvest.Offer(&reply);
  harvest.Offer(nullptr);
  google::protobuf::Value not_a_list;
  not_a_list.set_string_value("*fp32");
  harvest.Offer(&not_a_list);
  google::protobuf::Value mixed = List({{"*fp32"}});
  mixed.mutable_list_value()->mutable_values(0)->mutable_list_value()->add_values()->set_number_value(3);
  harvest.Offer(&mixed);
  EXPECT_EQ(Signatures(harvest.TakePending()),
            (std::vector<std::vector<std::string>>{{"*fp32", "*fp32", "i32", "constexpr"},
                                                   {"*fp32", "i32"}}));
  EXPECT_EQ(harvest.kept(), 2);
  EXPECT_TRUE(Signatures(harvest.TakePending()).empty()) << "handed out twice";
  harvest.Offer(&reply);
  EXPECT_TRUE(Signatures(harvest.TakePending()).empty()) << "kept twice";
}

TEST(LauncherHarvestTest, StopsAtTheBound) {
  LauncherHarvest harvest(/*max_signatures=*/2);
  const google::protobuf::Value reply = List({{"i32"}, {"i64"}, {"fp32"}});
  harvest.Offer(&reply);
  EXPECT_EQ(Signatures(harvest.TakePending()).size(), 2u);
  const google::protobuf::Value more = List({{"*fp16"}});
  harvest.Offer(&more);
  EXPECT_TRUE(Signatures(harvest.TakePending()).empty());
  LauncherHarvest wide(/*max_signatures=*/100);
  std::vector<std::vector<std::string>> many;
  for (int i = 1; i <= 20; ++i) many.push_back(std::vector<std::string>(i, "i32"));
  const google::protobuf::Value flood = List(many);
  wide.Offer(&flood);
  EXPECT_EQ(Signatures(wide.TakePending()).size(),
            static_cast<size_t>(LauncherHarvest::kPerOffer)) << "one reply took more";
  LauncherHarvest off(/*max_signatures=*/0);
  off.Offer(&reply);
  EXPECT_EQ(off.kept(), 0);
}

}  // namespace
}  // namespace kforge
