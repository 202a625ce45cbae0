# Included by CTest after gtest_discover_tests has defined the tests (see tests/CMakeLists.txt).
set_tests_properties(PluginTest.ATimeLimitStopsInTimeAndTheNextRunFinishes PROPERTIES RUN_SERIAL TRUE)
