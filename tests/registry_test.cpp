#include <gtest/gtest.h>

#include "components/registry.h"
#include "tests/test_support.h"

namespace trainyard {
namespace {

TEST(RegistryTest, BuildsFromResolvedOptions) {
  Registry r = testing::fake_registry();
  ConfigTree options;
  options.set("width", {YAML::Node(30), {}, {}});
  EXPECT_EQ((r.build<int(int)>(ComponentKind::model, "toy", options, 12)), 42);
  EXPECT_EQ((r.build<int(int)>(ComponentKind::model, "toy", ConfigTree(), 0)), 8);  // the default width
}

TEST(RegistryTest, DuplicateNamesFailAtRegistration) {
  Registry r = testing::fake_registry();
  struct None {};
  EXPECT_THROW(r.add<int()>(ComponentKind::optimizer, "adam", "again", OptionSet<None>(), [](const None&) { return 0; }),
               std::logic_error);
  EXPECT_THROW(r.plan(ComponentKind::precision, "32-true", "x"), std::logic_error);
  // The same name under another kind is fine.
  r.add<int()>(ComponentKind::scheduler, "adam", "a scheduler", OptionSet<None>(), [](const None&) { return 0; });
}

TEST(RegistryTest, ListsNamesAndOptionsInRegistrationOrder) {
  Registry r = testing::fake_registry();
  EXPECT_EQ(r.names(ComponentKind::optimizer), (std::vector<std::string>{"adam", "sgd"}));
  const ComponentEntry* toy = r.find(ComponentKind::model, "toy");
  ASSERT_NE(toy, nullptr);
  ASSERT_EQ(toy->options.size(), 2u);
  EXPECT_EQ(toy->options[0].key, "width");
  EXPECT_EQ(toy->options[1].rule, "one of: relu, gelu");
}

TEST(RegistryTest, LookupExplainsUnknownAndPlannedNames) {
  Registry r = testing::fake_registry();
  Diagnostics d;
  EXPECT_EQ(lookup_component(r, ComponentKind::precision, "16-mixed", "runtime.precision", {}, d), nullptr);
  EXPECT_EQ(lookup_component(r, ComponentKind::optimizer, "sdg", "train.optimizer.name", {}, d), nullptr);
  EXPECT_NE(lookup_component(r, ComponentKind::optimizer, "sgd", "train.optimizer.name", {}, d), nullptr);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.items()[0].message, "'runtime.precision': precision 16-mixed is not supported yet (planned)");
  EXPECT_EQ(d.items()[1].message,
            "'train.optimizer.name': unknown optimizer 'sdg' (did you mean 'sgd'?); known: adam, sgd");
}

TEST(RegistryTest, BuildRejectsBadOptionsToo) {
  Registry r = testing::fake_registry();
  ConfigTree options;
  options.set("width", {YAML::Node(0), {}, {}});
  EXPECT_THROW((r.build<int(int)>(ComponentKind::model, "toy", options, 0)), ConfigError);
  EXPECT_THROW((r.build<int(int)>(ComponentKind::model, "nope", options, 0)), UserError);
}

}  // namespace
}  // namespace trainyard
