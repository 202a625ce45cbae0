#include <trainyard/plugin.h>
void register_nothing(trainyard::Registry&) {
  throw std::runtime_error("the weights this plugin needs are not installed");
}
TRAINYARD_PLUGIN(register_nothing)
