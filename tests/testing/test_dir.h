// Test folders. Every folder made here is removed when the test process
// exits: wholly after a passing run, all but its *.log files after a failing
// one (the path is printed), and not at all with KEVO_KEEP_TEST_DIRS=1. CI
// runs on a machine that is kept between runs: a folder a test leaves behind
// (a worker's input cache is hundreds of MiB) would fill its disk over runs.
#pragma once

#include <filesystem>
#include <string>

namespace kevo::testing {

// <tmp>/kevo-<prefix>-<pid>-<test name>, removed first if an earlier run left it.
std::filesystem::path FreshTestDir(const std::string& prefix);

// Removes `dir` when this process exits, as above. Only the process that
// called it removes: a forked child that exits does not.
void RemoveAtExit(const std::string& dir);

}  // namespace kevo::testing
