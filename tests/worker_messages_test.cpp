// The worker-to-controller lines: whatever a worker writes — half a line, garbage, wrong types, a
// diverged loss — reading never throws and keeps what is well-formed.
#include <gtest/gtest.h>

#include <cmath>

#include "runner/worker_messages.h"

namespace trainyard {
namespace {

TEST(WorkerMessages, EveryMessageReadsBackAsWritten) {
  const auto epoch =
      parse_worker_message(epoch_message(3, {{"train_loss", std::nan("")}, {"val_acc", 0.5}}));
  ASSERT_TRUE(epoch && epoch->epoch);
  EXPECT_EQ(*epoch->epoch, 3);
  EXPECT_TRUE(std::isnan(epoch->values.at("train_loss")));  // not null, not a crash
  EXPECT_EQ(epoch->values.at("val_acc"), 0.5);
  const auto step = parse_worker_message(step_message(48, {{"val_acc", 0.75}}));
  ASSERT_TRUE(step && step->step);
  EXPECT_EQ(*step->step, 48);
  EXPECT_FALSE(step->epoch);
  EXPECT_EQ(step->values.at("val_acc"), 0.75);
  EXPECT_FALSE(parse_worker_message("{\"step\": 3}")->step);  // a step without its figures
  const auto result = parse_worker_message(result_message({{"test_loss", INFINITY}}));
  ASSERT_TRUE(result && result->result);
  EXPECT_EQ(result->result->at("test_loss"), INFINITY);
  const auto progress = parse_worker_message(progress_message({.epoch = 1,
                                                               .epochs = 2,
                                                               .step = 5,
                                                               .total_steps = 8,
                                                               .loss = std::nan(""),
                                                               .tokens_per_sample = 1024,
                                                               .line = "l"}));
  ASSERT_TRUE(progress && progress->progress);
  EXPECT_EQ(progress->progress->step, 5);
  EXPECT_EQ(progress->progress->tokens_per_sample, 1024);
  EXPECT_TRUE(std::isnan(progress->progress->loss));
  EXPECT_EQ(progress->progress->line, "l");
  EXPECT_EQ(*parse_worker_message(log_message("bad \xff utf-8"))->log, "bad \xef\xbf\xbd utf-8");
  EXPECT_EQ(*parse_worker_message(error_message("boom"))->error, "boom");
  EXPECT_EQ(parse_worker_message(setup_message({{"a", "b"}}))->setup->at("a"), "b");
}

TEST(WorkerMessages, HalfLinesGarbageAndWrongTypesAreDropped) {
  const std::string whole = epoch_message(1, {{"train_loss", 0.25}});
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    const auto message = parse_worker_message(whole.substr(0, cut));
    EXPECT_TRUE(!message || !message->epoch) << whole.substr(0, cut);
  }
  for (const char* line :
       {"", "null", "[1, 2]", "\"error\"", "{\"epoch\": \"one\", \"values\": {}}", "{\"epoch\": 1}",
        "{\"epoch\": 1.5, \"values\": {}}", "{\"values\": {\"a\": 1}}",
        "{\"epoch\": 1, \"values\": {\"a\": \"x\"}}", "{\"result\": [1]}", "{\"progress\": 7}",
        "{\"setup\": {\"a\": 1}}", "{\"log\": 5, \"error\": [\"x\"]}",
        "{\"epoch\": 1e300, \"values\": {}}",
        "{\"epoch\": 18446744073709551615, \"values\": {}}"}) {
    const auto message = parse_worker_message(line);
    if (!message) continue;
    EXPECT_FALSE(message->epoch) << line;
    EXPECT_FALSE(message->result) << line;
    EXPECT_FALSE(message->setup) << line;
    EXPECT_FALSE(message->log) << line;
    EXPECT_FALSE(message->error) << line;
  }
  // Found by worker_messages_fuzz: a step of 8.9e76 was cast to int64_t (undefined behaviour).
  const auto huge = parse_worker_message(
      R"({"progress":{"epoch":1,"step":88888888888888888888888888888888888888888888888888888888888888888888888888888}})");
  ASSERT_TRUE(huge && huge->progress);
  EXPECT_EQ(huge->progress->step, 0);
  EXPECT_EQ(huge->progress->epoch, 1);
  // Fields of the right type survive beside a wrong one.
  const auto mixed = parse_worker_message(R"({"log": "kept", "result": "no"})");
  ASSERT_TRUE(mixed);
  EXPECT_EQ(*mixed->log, "kept");
  EXPECT_FALSE(mixed->result);
}

// A warm worker's requests and ends (runner/launcher.h's WarmEngine) read back as written; a line
// that is not a whole request is none.
TEST(WorkerMessages, AWarmWorkersRequestsAndEndsReadBackAsWritten) {
  const WorkerRequest request{.config_path = "/runs/logs/e/run-3.yaml",
                              .variant = "bf16 \"mixed\"",
                              .output_prefix = "/runs/logs/e/run-3",
                              .continue_from = "/runs/logs/e/run-3.state",
                              .pause_after_epochs = 2,
                              .log_path = "/runs/logs/e/run-3-rank0.log",
                              .threads = 4,
                              .threads_why = "runtime.threads"};
  const std::string line = worker_request_message(request);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto back = parse_worker_request(line);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->config_path, request.config_path);
  EXPECT_EQ(back->variant, request.variant);
  EXPECT_EQ(back->output_prefix, request.output_prefix);
  EXPECT_EQ(back->continue_from, request.continue_from);
  EXPECT_EQ(back->pause_after_epochs, 2);
  EXPECT_EQ(back->log_path, request.log_path);
  EXPECT_EQ(back->threads, 4);
  EXPECT_EQ(back->threads_why, request.threads_why);
  const std::string half = line.substr(0, 40);
  for (const char* bad : {"", "{}", "[1]", R"({"config": "a"})", half.c_str()})
    EXPECT_FALSE(parse_worker_request(bad)) << bad;

  for (const int code : {0, 1, 2, 130}) {
    const auto done = parse_worker_message(done_message(code));
    ASSERT_TRUE(done && done->done);
    EXPECT_EQ(*done->done, code);
  }
  const auto other = parse_worker_message(R"({"done": "yes"})");
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->done);
}

}  // namespace
}  // namespace trainyard
