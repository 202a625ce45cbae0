// The lines a worker writes to the controller: reading one never throws, whatever it holds.
#include "fuzz/fuzz_support.h"
#include "runner/worker_messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  // No try: any exception escaping is a bug.
  const auto message = trainyard::parse_worker_message(line);
  if (message && message->epoch)  // what was read writes back and reads again the same
    if (const auto again = trainyard::parse_worker_message(
            trainyard::epoch_message(*message->epoch, message->values));
        !again || again->values.size() != message->values.size())
      std::abort();
  return 0;
}
