#include <gtest/gtest.h>

#include "tests/test_support.h"
#include "trainyard/registry.h"

namespace trainyard {
namespace {

TEST(RegistryTest, BuildsFromResolvedOptions) {
  Registry r = testing::fake_registry();
  ConfigTree options;
  options.set("width", {YAML::Node(30), {}, {}});
  EXPECT_EQ((r.build<int(int)>(ComponentKind::model, "toy", options, 12)), 42);
  EXPECT_EQ((r.build<int(int)>(ComponentKind::model, "toy", ConfigTree(), 0)),
            8);  // the default width
}

TEST(RegistryTest, DuplicateNamesFailAtRegistration) {
  Registry r = testing::fake_registry();
  struct None {};
  EXPECT_THROW(r.add<int()>(ComponentKind::optimizer, "adam", "again", OptionSet<None>(),
                            [](const None&) { return 0; }),
               std::logic_error);
  // The same name under another kind is fine.
  r.add<int()>(ComponentKind::scheduler, "adam", "a scheduler", OptionSet<None>(),
               [](const None&) { return 0; });
}

TEST(RegistryTest, ListsNamesAndOptionsInRegistrationOrder) {
  Registry r = testing::fake_registry();
  EXPECT_EQ(r.names(ComponentKind::optimizer), (std::vector<std::string>{"adam", "adamw", "sgd"}));
  const ComponentEntry* toy = r.find(ComponentKind::model, "toy");
  ASSERT_NE(toy, nullptr);
  ASSERT_EQ(toy->options.size(), 2u);
  EXPECT_EQ(toy->options[0].key, "width");
  EXPECT_EQ(toy->options[1].rule, "one of: relu, gelu");
}

TEST(RegistryTest, LookupExplainsUnknownNames) {
  Registry r = testing::fake_registry();
  Diagnostics d;
  EXPECT_EQ(lookup_component(r, ComponentKind::optimizer, "sdg", "train.optimizer.name", {}, d),
            nullptr);
  EXPECT_NE(lookup_component(r, ComponentKind::optimizer, "sgd", "train.optimizer.name", {}, d),
            nullptr);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.items()[0].message,
            "'train.optimizer.name': unknown optimizer 'sdg' (did you mean 'sgd'?); known: adam, "
            "adamw, sgd");
}

// A component says what it can do when it registers, in its kind's capabilities, as a function of
// its options; a component that says nothing can do nothing special; capabilities of another kind
// are refused at registration.
TEST(RegistryTest, CapabilitiesComeFromTheRegistrationAndTheOptions) {
  Registry r;
  struct Size {
    int64_t image_size = 224;
  };
  OptionSet<Size> options;
  options.add("image_size", &Size::image_size, "input resolution", at_least(1));
  r.add<int()>(
      ComponentKind::model, "sized", "a model with an input size", options,
      [](const Size&) { return 0; },
      [](const Size& o) { return ModelCapabilities{.image_size = o.image_size}; });
  r.add<int()>(ComponentKind::model, "plain", "a model that says nothing", options,
               [](const Size&) { return 0; });
  ConfigTree resolved;
  resolved.set("image_size", {YAML::Node(32), {}, {}});
  auto model = [&](const char* name) {
    return std::get<ModelCapabilities>(r.find(ComponentKind::model, name)->capabilities(resolved));
  };
  EXPECT_EQ(model("sized").image_size, 32);
  const ModelCapabilities plain = model("plain");
  EXPECT_EQ(plain.image_size, 0);
  EXPECT_EQ(plain.task, Task::classification);
  EXPECT_THROW(
      r.add<int()>(
          ComponentKind::dataset, "mislabelled", "a dataset with a model's capabilities", options,
          [](const Size&) { return 0; }, [](const Size&) { return ModelCapabilities{}; }),
      std::logic_error);
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
