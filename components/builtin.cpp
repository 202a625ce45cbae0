#include "components/builtin.h"

#include "components/data/cifar10.h"
#include "components/data/imagefolder.h"
#include "components/data/imdb.h"
#include "components/data/synthetic_images.h"
#include "components/data/synthetic_text.h"
#include "components/data/textfile.h"
#include "components/data/tokens.h"
#include "components/models/distilbert.h"
#include "components/models/gpt2.h"
#include "components/models/torchscript.h"
#include "components/models/vit.h"
#include "components/precision/precision.h"
#include "components/strategy/strategy.h"
#include "trainyard/optimizers.h"
#include "trainyard/plugin.h"
#include "trainyard/schedulers.h"

namespace trainyard {

// Every built-in component, in the order `trainyard list` shows them. Adding one is its file (which
// defines its registration function, declared in its header) and its line here.
void register_builtin_components(Registry& registry) {
  register_vit(registry);
  register_distilbert(registry);
  register_gpt2(registry);
  register_torchscript(registry);
  register_cifar10(registry);
  register_imagefolder(registry);
  register_imdb(registry);
  register_synthetic_images(registry);
  register_synthetic_text(registry);
  register_textfile(registry);
  register_tokens(registry);
  register_text(registry);
  register_synthetic_tokens(registry);
  register_optimizers(registry);
  register_schedulers(registry);
  register_precisions(registry);
  register_single(registry);
  register_ddp(registry);
  register_zero2(registry);
  register_fsdp(registry);
}

const Registry& builtin_registry() {
  static const Registry registry = [] {
    Registry r;
    register_builtin_components(r);
    return r;
  }();
  return registry;
}

PluginLoader& plugin_loader() {
  static PluginLoader loader = [] {
    Registry registry;
    register_builtin_components(registry);
    return PluginLoader(std::move(registry), TRAINYARD_PLUGIN_STAMP);
  }();
  return loader;
}

}  // namespace trainyard
