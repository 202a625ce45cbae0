// A plugin built against another yaml-cpp than the engine's (0.8.0, as a user's conda environment
// might hold): its stamp says so, and it is refused before any of its code runs.
#undef TRAINYARD_YAML_CPP_VERSION
#define TRAINYARD_YAML_CPP_VERSION "0.8.0"
#include "plain_linear.cpp"
