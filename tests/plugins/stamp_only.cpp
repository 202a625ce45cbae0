// A library stamped as another build's would be (the stamp is all Trainyard reads before loading).
extern "C" __attribute__((visibility("default"), used, section(".trainyard_plugin")))
const char trainyard_plugin_stamp[] = STAMP;
