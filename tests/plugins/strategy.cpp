// Registers a strategy, which a plugin may not (its interface is not part of the public API).
#include <trainyard/plugin.h>
namespace {
struct NoOptions {};
void register_strategy(trainyard::Registry& registry) {
  using namespace trainyard;
  registry.add<int(int)>(ComponentKind::strategy, "my-ddp", "a strategy from outside",
                         OptionSet<NoOptions>{}, [](const NoOptions&, int) { return 0; });
}
}  // namespace
TRAINYARD_PLUGIN(register_strategy)
