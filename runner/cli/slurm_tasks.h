// A submission's runs as its array tasks read them (tasks.json in the submission's folder): written
// by `trainyard submit` (submit_command.cpp), read by `trainyard slurm-task`
// (slurm_task_command.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/json_numbers.h"
#include "runner/slurm.h"

namespace trainyard {

struct SlurmTask {
  int64_t run_id = 0;
  std::string experiment{}, variant{}, stem{};
  TaskShape shape{};
  bool multi_process = false;
  bool save_state = false;
  int max_requeues = 3;
  std::string job_id{};  // once submitted
  nlohmann::json to_json() const {
    return {{"run_id", run_id},         {"experiment", experiment},
            {"variant", variant},       {"stem", stem},
            {"nodes", shape.nodes},     {"ranks_per_node", shape.ranks_per_node},
            {"cuda", shape.cuda},       {"multi_process", multi_process},
            {"save_state", save_state}, {"max_requeues", max_requeues}};
  }
  static SlurmTask from_json(const nlohmann::json& j) {
    SlurmTask t;
    auto small = [&](const char* key) {  // a count: nodes, ranks, requeues
      const int64_t n = integer_from_json(j.at(key));
      if (n < 0 || n > 1 << 20) throw nlohmann::json::type_error::create(302, key, &j);
      return static_cast<int>(n);
    };
    t.run_id = integer_from_json(j.at("run_id"));
    t.experiment = j.at("experiment").get<std::string>();
    t.variant = j.at("variant").get<std::string>();
    t.stem = j.at("stem").get<std::string>();
    t.shape = {.nodes = small("nodes"),
               .ranks_per_node = small("ranks_per_node"),
               .cuda = j.at("cuda").get<bool>()};
    t.multi_process = j.at("multi_process").get<bool>();
    t.save_state = j.at("save_state").get<bool>();
    t.max_requeues = small("max_requeues");
    return t;
  }
};

}  // namespace trainyard
