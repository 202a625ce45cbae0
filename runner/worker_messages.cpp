#include "runner/worker_messages.h"

#include <nlohmann/json.hpp>

#include "common/json_numbers.h"

namespace trainyard {

namespace {

using nlohmann::json;

std::string line_of(const json& message) {
  // Invalid UTF-8 in a log line is replaced, not thrown on.
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Field `key` of `message` read by `read`, or nothing when it is missing or of the wrong type.
template <class T, class Read>
std::optional<T> field(const json& message, const char* key, Read read) {
  const auto it = message.find(key);
  if (it == message.end()) return std::nullopt;
  try {
    return read(*it);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<WorkerMessage> parse_worker_message(std::string_view line) {
  const json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object()) return std::nullopt;
  WorkerMessage m;
  m.log = field<std::string>(message, "log", [](const json& v) { return v.get<std::string>(); });
  m.error =
      field<std::string>(message, "error", [](const json& v) { return v.get<std::string>(); });
  m.setup = field<std::map<std::string, std::string>>(
      message, "setup", [](const json& v) { return v.get<std::map<std::string, std::string>>(); });
  const auto values = field<MetricValues>(message, "values", numbers_from_json);
  m.epoch = field<int64_t>(message, "epoch", integer_from_json);
  m.step = field<int64_t>(message, "step", integer_from_json);
  if (values) {
    m.values = *values;
  } else {  // an epoch or a step without its figures is none
    m.epoch.reset();
    m.step.reset();
  }
  m.progress = field<TrainingProgress>(message, "progress", [](const json& p) {
    if (!p.is_object()) throw json::type_error::create(302, "progress", &p);
    auto real = [&](const char* key) {
      const auto it = p.find(key);
      return it != p.end() ? number_from_json(*it) : 0.0;
    };
    const auto line = p.find("line");
    return TrainingProgress{
        .epoch = integer_or(p, "epoch", 0),
        .epochs = integer_or(p, "epochs", 0),
        .step = integer_or(p, "step", 0),
        .total_steps = integer_or(p, "total_steps", 0),
        .loss = real("loss"),
        .samples_per_s = real("samples_per_s"),
        .tokens_per_sample = integer_or(p, "tokens_per_sample", 0),
        .eta_seconds = real("eta_seconds"),
        .micro_batch = integer_or(p, "micro_batch", 0),
        .oom_events = integer_or(p, "oom_events", 0),
        .line = line != p.end() && line->is_string() ? line->get<std::string>() : std::string()};
  });
  m.result = field<MetricValues>(message, "result", numbers_from_json);
  m.done = field<int>(message, "done", [](const json& v) { return v.get<int>(); });
  return m;
}

std::string log_message(const std::string& line) { return line_of({{"log", line}}); }
std::string error_message(const std::string& message) { return line_of({{"error", message}}); }
std::string setup_message(const std::map<std::string, std::string>& attributes) {
  return line_of({{"setup", attributes}});
}
std::string epoch_message(int64_t epoch, const MetricValues& values) {
  return line_of({{"epoch", epoch}, {"values", json_numbers(values)}});
}

std::string step_message(int64_t step, const MetricValues& values) {
  return line_of({{"step", step}, {"values", json_numbers(values)}});
}
std::string progress_message(const TrainingProgress& p) {
  return line_of({{"progress",
                   {{"epoch", p.epoch},
                    {"epochs", p.epochs},
                    {"step", p.step},
                    {"total_steps", p.total_steps},
                    {"loss", json_number(p.loss)},
                    {"samples_per_s", json_number(p.samples_per_s)},
                    {"tokens_per_sample", p.tokens_per_sample},
                    {"eta_seconds", json_number(p.eta_seconds)},
                    {"micro_batch", p.micro_batch},
                    {"oom_events", p.oom_events},
                    {"line", p.line}}}});
}
std::string result_message(const MetricValues& metrics) {
  return line_of({{"result", json_numbers(metrics)}});
}

std::string done_message(int exit_code) { return line_of({{"done", exit_code}}); }

std::string worker_request_message(const WorkerRequest& r) {
  return line_of({{"config", r.config_path},
                  {"variant", r.variant},
                  {"output_prefix", r.output_prefix},
                  {"continue_from", r.continue_from},
                  {"pause_after_epochs", r.pause_after_epochs},
                  {"log", r.log_path},
                  {"threads", r.threads},
                  {"threads_why", r.threads_why}});
}

std::optional<WorkerRequest> parse_worker_request(std::string_view line) {
  const json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object()) return std::nullopt;
  try {
    return WorkerRequest{.config_path = message.at("config").get<std::string>(),
                         .variant = message.at("variant").get<std::string>(),
                         .output_prefix = message.at("output_prefix").get<std::string>(),
                         .continue_from = message.at("continue_from").get<std::string>(),
                         .pause_after_epochs = message.at("pause_after_epochs").get<int64_t>(),
                         .log_path = message.at("log").get<std::string>(),
                         .threads = message.at("threads").get<int>(),
                         .threads_why = message.at("threads_why").get<std::string>()};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace trainyard
