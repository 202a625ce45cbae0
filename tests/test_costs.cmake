# Included by CTest after gtest_discover_tests (see tests/CMakeLists.txt): the tests that take
# longest, with their seconds on 2 cores (CTestCostData.txt of a full run), so that `ctest -j2` on a
# fresh clone, which has no cost data yet, starts them first instead of leaving one of them to run
# alone at the end. Only the order changes.
foreach(cost_and_test
    "300;CliTest.QuickstartRunsIntoTheDatabaseAndTheReport"
    "170;ChaosTest.KilledAgainAndAgainTheBatchEndsAsAnUndisturbedOne"
    "150;MicroBatchTest.RanksAgreeOnTheSizeWhenOnlyOneRunsOutOfMemory"
    "130;LanguageModelTest.TheShippedExamplesValidateRunAndSkipWhatThisMachineLacks"
    "120;MicroBatchTest.AContinuedRunStartsAtTheSizeItHadReached"
    "105;MicroBatchTest.AutoFitsUnderARealMemoryLimitAndComputesWhatItsSizeComputes"
    "80;MicroBatchTest.TheDryRunForecastsAPeakTheRunReaches"
    "77;PluginTest.ResNetTrainsUnderEveryStrategyAndShowsInTheReport"
    "72;MicroBatchTest.AnAbandonedStepLeavesBatchNormStatisticsWhereTheyWere"
    "67;CliTest.BenchmarkExperimentFilesValidate")
  list(GET cost_and_test 0 cost)
  list(GET cost_and_test 1 test)
  set_tests_properties("${test}" PROPERTIES COST ${cost})
endforeach()
