// Registers an optimizer under a free name, and a model named as another plugin's (or, with
// -DNAME=vit, a built-in's) is.
#include <trainyard/plugin.h>
#ifndef NAME
#define NAME "mlp"
#endif
namespace {
struct NoOptions {};
void register_taken(trainyard::Registry& registry) {
  using namespace trainyard;
  registry.add<ModelPtr(const ModelContext&)>(
      ComponentKind::model, NAME, "a name already taken", OptionSet<NoOptions>{},
      [](const NoOptions&, const ModelContext&) -> ModelPtr { return nullptr; });
}
}  // namespace
TRAINYARD_PLUGIN(register_taken)
