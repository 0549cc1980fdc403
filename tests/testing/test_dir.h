// A fresh folder for the running test: <tmp>/kevo-<prefix>-<pid>-<test name>,
// removed first if an earlier run left it. The caller removes it when done.
#pragma once

#include <filesystem>
#include <string>

namespace kevo::testing {

std::filesystem::path FreshTestDir(const std::string& prefix);

}  // namespace kevo::testing
