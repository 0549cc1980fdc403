#include "tests/testing/test_dir.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace kevo::testing {

std::filesystem::path FreshTestDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kevo-" + prefix + "-" + std::to_string(::getpid()) + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace kevo::testing
