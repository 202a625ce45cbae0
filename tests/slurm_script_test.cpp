// What `trainyard submit --slurm` writes and how it reads Slurm's answers, without a cluster (the
// cluster itself is in slurm_test.cpp).
#include <gtest/gtest.h>

#include "runner/slurm.h"

namespace trainyard {
namespace {

bool has_line(const std::string& script, const std::string& line) {
  return ("\n" + script).find("\n" + line + "\n") != std::string::npos;
}

TEST(SlurmScript, ArrayOfOneNodeRunsThrottledWithItsOptions) {
  SlurmOptions options{.partition = "gpu",
                       .time = "4:00:00",
                       .account = "ml",
                       .max_parallel = 2,
                       .sbatch_args = {"--mem=64G", "--qos=long"}};
  const ArrayJob array{.number = 1, .first_task = 5, .tasks = 4, .shape = {1, 4, true}};
  const std::string s = array_script(array, 7, options, "/opt/trainyard", "/shared/sub 7");
  EXPECT_EQ(s.rfind("#!/bin/bash\n", 0), 0u) << s;
  for (const char* line :
       {"#SBATCH --job-name=trainyard-7-1", "#SBATCH --array=0-3%2", "#SBATCH --nodes=1",
        "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=4", "#SBATCH --partition=gpu",
        "#SBATCH --account=ml", "#SBATCH --time=4:00:00",
        "#SBATCH --output=\"/shared/sub 7/slurm-%A_%a.out\"", "#SBATCH --open-mode=append",
        "#SBATCH --requeue", "#SBATCH --signal=B:USR1@120", "#SBATCH --mem=64G",
        "#SBATCH --qos=long",
        "exec '/opt/trainyard' slurm-task --submission '/shared/sub 7' --task $((5 + "
        "SLURM_ARRAY_TASK_ID))"})
    EXPECT_TRUE(has_line(s, line)) << line << " missing from:\n" << s;
}

// A cluster without root: --setup lines run before trainyard in every script, and an --sbatch-arg
// that sets what the script sets (or an equivalent Slurm would refuse beside it) replaces it.
TEST(SlurmScript, SetupLinesAndSbatchArgsThatReplaceGeneratedOnes) {
  SlurmOptions options{.sbatch_args = {"--gres=gpu:a100:4", "-c 16", "--qos=long"},
                       .setup_lines = {"module load gcc/13", "source /shared/env.sh"}};
  const ArrayJob array{.number = 1, .first_task = 0, .tasks = 2, .shape = {1, 4, true}};
  const std::string s = array_script(array, 3, options, "/shared/bin/trainyard", "/shared/sub");
  for (const char* line : {"#SBATCH --gres=gpu:a100:4", "#SBATCH -c 16", "#SBATCH --qos=long"})
    EXPECT_TRUE(has_line(s, line)) << line << " missing from:\n" << s;
  EXPECT_EQ(s.find("--gpus-per-node"), std::string::npos) << s;
  EXPECT_EQ(s.find("--cpus-per-task=16"), std::string::npos) << s;
  EXPECT_EQ(s.find("#SBATCH --cpus-per-task"), std::string::npos) << s;
  const size_t setup = s.find("\nmodule load gcc/13\nsource /shared/env.sh\n");
  ASSERT_NE(setup, std::string::npos) << s;
  EXPECT_LT(s.rfind("#SBATCH"), setup);  // sbatch reads directives only before the first command
  EXPECT_LT(setup, s.find("exec "));
  const std::string report = report_script(3, options, "/shared/bin/trainyard", "/shared/sub", {});
  EXPECT_NE(report.find("module load gcc/13\n"), std::string::npos) << report;
  EXPECT_EQ(report.find("--gres"), std::string::npos) << report;  // the runs' resources, not its

  EXPECT_EQ(sbatch_option_group("--gpus-per-node=2"), "gpus");
  EXPECT_EQ(sbatch_option_group("--gres=gpu:2"), "gpus");
  EXPECT_EQ(sbatch_option_group("-G 2"), "gpus");
  EXPECT_EQ(sbatch_option_group("--cpus-per-task=8"), "cpus-per-task");
  EXPECT_EQ(sbatch_option_group("--mem=64G"), "mem");
  EXPECT_EQ(sbatch_option_group("mem=64G"), "");
}

TEST(SlurmScript, MultiNodeRunsStartOneTaskPerNodeThroughSrun) {
  const ArrayJob array{.number = 0, .first_task = 0, .tasks = 1, .shape = {2, 2, false}};
  const std::string s = array_script(array, 1, {}, "/t", "/f");
  EXPECT_TRUE(has_line(s, "#SBATCH --nodes=2")) << s;
  EXPECT_TRUE(has_line(s, "#SBATCH --cpus-per-task=2")) << s;
  EXPECT_TRUE(has_line(s, "#SBATCH --array=0-0")) << s;        // no throttle asked
  EXPECT_TRUE(has_line(s, "#SBATCH --signal=USR1@120")) << s;  // to every node's task
  EXPECT_NE(s.find("exec srun --ntasks-per-node=1 --cpus-per-task=\"$SLURM_CPUS_PER_TASK\" "
                   "--kill-on-bad-exit=1 '/t' slurm-task"),
            std::string::npos)
      << s;
  EXPECT_TRUE(has_line(array_script(array, 1, {}, "/t", "/f 50%"),
                       "#SBATCH --output=\"/f 50%%/slurm-%A_%a.out\""));
  EXPECT_EQ(s.find("gpus"), std::string::npos) << s;
}

// A study's one job: the trials' shape on one node, requeued after the warning, its own output
// file; studies.json round-trips what the job reads.
TEST(SlurmScript, AStudyIsOneRequeueableJobOfItsTrialsShape) {
  SlurmStudy study{.experiment = "vit",
                   .variant = "bf16",
                   .study_hash = "abc",
                   .file = "/shared/vit.yaml",
                   .file_sha256 = "00ff",
                   .overrides = {"train.epochs=3"},
                   .plugins = {"/shared/p.so"},
                   .max_runs = 50,
                   .db = "/shared/runs/slurm/studies/vit/bf16-abc.db",
                   .shape = {1, 2, true},
                   .max_requeues = 5,
                   .job_id = "77"};
  const std::string s =
      study_script(3, 9, study, SlurmOptions{.time = "1:00:00"}, "/opt/trainyard", "/shared/sub");
  for (const char* line :
       {"#SBATCH --job-name=trainyard-9-study3", "#SBATCH --nodes=1", "#SBATCH --gpus-per-node=2",
        "#SBATCH --cpus-per-task=8", "#SBATCH --time=1:00:00",
        "#SBATCH --output=/shared/sub/slurm-study3-%j.out", "#SBATCH --requeue",
        "#SBATCH --signal=B:USR1@120",
        "exec '/opt/trainyard' slurm-study --submission '/shared/sub' --study 3"})
    EXPECT_TRUE(has_line(s, line)) << line << " missing from:\n" << s;
  EXPECT_EQ(s.find("--array"), std::string::npos) << s;
  const SlurmStudy back = SlurmStudy::from_json(study.to_json());
  EXPECT_EQ(back.to_json(), study.to_json());
  EXPECT_EQ(back.shape, study.shape);
  EXPECT_EQ(back.overrides, study.overrides);
}

// A study with sweep.search.parallel: its job asks for one CPU and none of the user's resources
// (it trains nothing itself), and each trial's srun asks for the trial's shape with the
// submission's options, the user's --sbatch-arg lines replacing the generated ones they set, as
// srun's arguments, without those only sbatch has or that would take the task's output;
// studies.json keeps them, and one written before trials had jobs of their own reads as trials
// inside the study's job.
TEST(SlurmScript, TrialsSideBySideAreJobsOfTheirOwnThatTheStudysJobAsksFor) {
  const SlurmOptions options{.partition = "gpu",
                             .time = "2:00:00",
                             .sbatch_args = {"--mem 16G", "-c 6", "--qos=long", "--requeue",
                                             "--output=/x/%j.out", "--gres=gpu:a100:1"},
                             .setup_lines = {"module load cuda"}};
  const std::vector<std::string> trial = trial_job_options({1, 1, true}, options);
  EXPECT_EQ(trial, (std::vector<std::string>{"--nodes=1", "--ntasks=1", "--partition=gpu",
                                             "--time=2:00:00", "--mem", "16G", "-c", "6",
                                             "--qos=long", "--gres=gpu:a100:1"}));
  EXPECT_EQ(cpus_per_task_of(trial, 4), 6);
  EXPECT_EQ(trial_job_options({1, 1, false}, {}),
            (std::vector<std::string>{"--nodes=1", "--ntasks=1", "--cpus-per-task=1"}));
  EXPECT_EQ(cpus_per_task_of(trial_job_options({1, 1, false}, {}), 4), 1);
  EXPECT_EQ(cpus_per_task_of({"--nodes=1"}, 4), 4);
  SlurmStudy study{.experiment = "vit",
                   .variant = "default",
                   .study_hash = "abc",
                   .db = "/shared/s.db",
                   .shape = {1, 1, true},
                   .trial_job = trial,
                   .setup_lines = options.setup_lines};
  const std::string s = study_script(0, 4, study, options, "/t", "/f");
  EXPECT_TRUE(has_line(s, "#SBATCH --cpus-per-task=1")) << s;
  EXPECT_TRUE(has_line(s, "#SBATCH --qos=long")) << s;
  EXPECT_TRUE(has_line(s, "#SBATCH --requeue")) << s;
  for (const char* resource : {"--gres", "--gpus", "--mem", "-c 6"})
    EXPECT_EQ(s.find(resource), std::string::npos) << resource << " in:\n" << s;
  EXPECT_NE(s.find("each trained in a Slurm job of their own"), std::string::npos) << s;
  const SlurmStudy back = SlurmStudy::from_json(study.to_json());
  EXPECT_EQ(back.trial_job, trial);
  EXPECT_EQ(back.setup_lines, options.setup_lines);
  nlohmann::json older = study.to_json();
  older.erase("trial_job");
  older.erase("setup_lines");
  EXPECT_TRUE(SlurmStudy::from_json(older).trial_job.empty());
}

TEST(SlurmScript, ReportRunsAfterEveryArrayOnACopyOfTheSnapshot) {
  const std::string s = report_script(3, {.partition = "cpu"}, "/t", "/f", {"11", "12"});
  EXPECT_TRUE(has_line(s, "#SBATCH --dependency=afterany:11:12")) << s;
  EXPECT_TRUE(has_line(s, "#SBATCH --partition=cpu")) << s;
  EXPECT_TRUE(has_line(s, "cp '/f/snapshot.db' \"$scratch/trainyard.db\"")) << s;
  EXPECT_TRUE(has_line(s, "'/t' report --db \"$scratch/trainyard.db\" -o '/f/report.html'")) << s;
}

TEST(SlurmScript, QuotesPathsForTheShell) {
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME `x`"), "'$HOME `x`'");
}

TEST(SlurmArrays, OneArrayPerShapeSplitAtMaxArraySize) {
  const TaskShape cpu{1, 1, false}, ddp{1, 2, false};
  std::vector<int> order;
  const auto arrays = plan_arrays({cpu, ddp, cpu, cpu, ddp}, 2, order);
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays[0].shape, cpu);
  EXPECT_EQ(arrays[0].tasks, 2);
  EXPECT_EQ(arrays[1].shape, cpu);
  EXPECT_EQ(arrays[1].first_task, 2);
  EXPECT_EQ(arrays[1].tasks, 1);
  EXPECT_EQ(arrays[2].shape, ddp);
  EXPECT_EQ(arrays[2].first_task, 3);
  EXPECT_EQ(arrays[2].tasks, 2);
  EXPECT_EQ(order, (std::vector<int>{0, 2, 3, 1, 4}));
  EXPECT_EQ(arrays[2].number, 2);
}

TEST(SlurmParse, MaxArraySizeFromTheConfig) {
  EXPECT_EQ(max_array_size_of("AccountingStorageType   = (null)\nMaxArraySize            = 40\n"),
            40);
  EXPECT_EQ(max_array_size_of("ClusterName = x\n"), 1001);
}

TEST(SlurmParse, SqueueAndSacctRowsByJob) {
  const auto queue = parse_squeue(
      "12_0|RUNNING|None\n12_[2-3%2]|PENDING|JobArrayTaskLimit\n12_1|PENDING|BeginTime\n");
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue.at("12_0").state, "RUNNING");
  EXPECT_TRUE(queue.at("12_1").active());
  EXPECT_EQ(queue.at("12_1").reason, "BeginTime");
  const auto history = parse_sacct(
      "12_0|COMPLETED|0:0|None\n12_1|CANCELLED by 0|0:15|None\n12_2|OUT_OF_MEMORY|0:125|None\n");
  EXPECT_EQ(history.at("12_1").state, "CANCELLED");
  EXPECT_FALSE(history.at("12_0").active());
  EXPECT_EQ(history.at("12_2").exit_code, "0:125");
}

TEST(SlurmParse, FailureClassesFromWhatSlurmSays) {
  auto job = [](const char* state) { return SlurmJobState{.state = state}; };
  EXPECT_EQ(failure_from_slurm(job("OUT_OF_MEMORY"), true, true).first,
            FailureClass::out_of_memory);
  EXPECT_EQ(failure_from_slurm(job("NODE_FAIL"), true, true).first, FailureClass::crashed);
  EXPECT_EQ(failure_from_slurm(job("TIMEOUT"), true, true).first, FailureClass::timed_out);
  EXPECT_EQ(failure_from_slurm(job("CANCELLED"), true, true).first, FailureClass::interrupted);
  EXPECT_EQ(failure_from_slurm(job("CANCELLED"), false, true).first, FailureClass::not_started);
  const auto silent = failure_from_slurm(std::nullopt, true, false);
  EXPECT_EQ(silent.first, FailureClass::crashed);
  EXPECT_NE(silent.second.find("accounting off"), std::string::npos) << silent.second;
  EXPECT_EQ(failure_from_slurm(std::nullopt, false, false).first, FailureClass::not_started);
}

}  // namespace
}  // namespace trainyard
