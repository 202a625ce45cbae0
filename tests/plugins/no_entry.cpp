// A shared library that is not a Trainyard plugin.
extern "C" int answer() { return 42; }
