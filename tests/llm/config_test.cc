#include "coordinator/llm/config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kevo::llm {
namespace {

using ::testing::HasSubstr;

TEST(LlmConfigTest, ParsesEndpointsDefaultsAndEveryKey) {
  const std::string text = R"(# two endpoints
[defaults]
connect_timeout_s = 3
total_timeout_s = 90
max_retries = 2

[endpoint qwen-local]
base_url = http://127.0.0.1:8000/v1
model = Qwen/Qwen2.5-Coder-32B-Instruct
stream = true
weight = 2
max_concurrency = 8

[endpoint hosted]
base_url = "https://api.example.com/v1"
model = big-model
api = anthropic
api_key_file = secrets/key.txt
ca_file = /etc/ssl/private-ca.pem
price_in_per_mtok = 2.5
price_out_per_mtok = 10
max_retries = 5
initial_backoff_ms = 250
max_backoff_s = 20
max_retry_after_s = 60
max_tokens = 4096
)";
  auto endpoints = ParseLlmConfig(text, "/etc/kevo/llm.conf");
  ASSERT_TRUE(endpoints.ok()) << endpoints.status();
  ASSERT_EQ(endpoints->size(), 2u);
  const EndpointConfig& a = (*endpoints)[0];
  EXPECT_EQ(a.name, "qwen-local");
  EXPECT_EQ(a.base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(a.model, "Qwen/Qwen2.5-Coder-32B-Instruct");
  EXPECT_TRUE(a.stream);
  EXPECT_EQ(a.weight, 2);
  EXPECT_EQ(a.max_concurrency, 8);
  EXPECT_EQ(a.max_retries, 2);  // from [defaults]
  EXPECT_EQ(a.timeouts.connect, absl::Seconds(3));
  EXPECT_EQ(a.timeouts.total, absl::Seconds(90));
  EXPECT_EQ(a.api, Api::kOpenAi);
  EXPECT_TRUE(a.api_key_env.empty() && a.api_key_file.empty());
  const EndpointConfig& b = (*endpoints)[1];
  EXPECT_EQ(b.base_url, "https://api.example.com/v1");
  EXPECT_EQ(b.api, Api::kAnthropic);
  EXPECT_EQ(b.api_key_file, "/etc/kevo/secrets/key.txt");  // relative to the config file
  EXPECT_EQ(b.ca_file, "/etc/ssl/private-ca.pem");
  EXPECT_EQ(b.price_in_per_mtok, 2.5);
  EXPECT_EQ(b.price_out_per_mtok, 10);
  EXPECT_EQ(b.max_retries, 5);
  EXPECT_EQ(b.initial_backoff, absl::Milliseconds(250));
  EXPECT_EQ(b.max_backoff, absl::Seconds(20));
  EXPECT_EQ(b.max_retry_after, absl::Seconds(60));
  EXPECT_EQ(b.max_tokens, 4096);
  EXPECT_EQ(b.timeouts.connect, absl::Seconds(3));
  EXPECT_FALSE(b.stream);
}

struct BadCase {
  const char* text;
  const char* where;  // "file:line"
  const char* what;
};

TEST(LlmConfigTest, ErrorsNameFileAndLine) {
  const BadCase cases[] = {
      {"model = x\n", "c.conf:1", "outside a section"},
      {"[endpoint a]\nbase_url = http://h/v1\nmodel = m\nweight = heavy\n", "c.conf:4", "not a number"},
      {"[endpoint a]\nbase_url = http://h/v1\nmodel = m\nstreem = true\n", "c.conf:4", "unknown key \"streem\""},
      {"[endpoint a]\nbase_url = http://h/v1\n\nmodel = m\nstream = maybe\n", "c.conf:5", "not true or false"},
      {"[endpoint a]\nmodel = m\n", "c.conf:1", "has no base_url"},
      {"# x\n[endpoint a]\nbase_url = http://h/v1\n", "c.conf:2", "has no model"},
      {"[endpoint a]\nbase_url = ftp://h/v1\nmodel = m\n", "c.conf:1", "http:// or https://"},
      {"[endpoint a]\nbase_url = http://h\nmodel = m\n[endpoint a]\n", "c.conf:4", "defined twice"},
      {"[endpoint a]\nbase_url = http://h\nmodel = m\nmodel = n\n", "c.conf:4", "set twice"},
      {"[endpoint a]\napi_key_env = K\napi_key_file = f\n", "c.conf:3", "not both"},
      {"[endpoint a]\nmax_concurrency = 0\n", "c.conf:2", "below 1"},
      {"[endpoint a]\ntotal_timeout_s = 0\n", "c.conf:2", "positive"},
      {"[endpoint]\n", "c.conf:1", "needs a name"},
      {"[endpoint a b]\n", "c.conf:1", "may use only"},
      {"[server]\n", "c.conf:1", "unknown section"},
      {"[endpoint a\n", "c.conf:1", "must end with ']'"},
      {"[endpoint a]\nbase_url\n", "c.conf:2", "key = value"},
      {"[endpoint a]\nbase_url = http://h\nmodel = m\n[defaults]\n", "c.conf:4", "before the first"},
      {"[endpoint a]\napi = gemini\n", "c.conf:2", "openai or anthropic"},
  };
  for (const BadCase& c : cases) {
    auto result = ParseLlmConfig(c.text, "c.conf");
    ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(result.status().message(), HasSubstr(std::string(c.where) + ": ")) << c.text;
    EXPECT_THAT(result.status().message(), HasSubstr(c.what)) << c.text;
  }
  EXPECT_THAT(ParseLlmConfig("# nothing\n", "c.conf").status().message(), HasSubstr("no [endpoint NAME]"));
}

TEST(LlmConfigTest, RefusesKeysInTheFileWithoutEchoingThem) {
  auto result = ParseLlmConfig("[endpoint a]\napi_key = sk-live-123456\n", "c.conf");
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("c.conf:2"));
  EXPECT_THAT(result.status().message(), HasSubstr("api_key_env"));
  EXPECT_THAT(result.status().message(), ::testing::Not(HasSubstr("sk-live-123456")));
}

TEST(LlmConfigTest, EndpointKeySourceOverridesTheDefaults) {
  auto result = ParseLlmConfig(
      "[defaults]\napi_key_env = SHARED\n[endpoint a]\nbase_url = http://h\nmodel = m\n"
      "api_key_file = /k\n[endpoint b]\nbase_url = http://h\nmodel = m\n",
      "c.conf");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)[0].api_key_file, "/k");
  EXPECT_TRUE((*result)[0].api_key_env.empty());
  EXPECT_EQ((*result)[1].api_key_env, "SHARED");
}

TEST(LlmConfigTest, LoadsFromAFileAndReportsAMissingOne) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / ("kevo_llm_test_" + std::to_string(getpid()) + ".conf")).string();
  std::ofstream(path) << "[endpoint local]\nbase_url = http://127.0.0.1:8080/v1\nmodel = m\n";
  auto loaded = LoadLlmConfig(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)[0].name, "local");
  std::filesystem::remove(path);
  EXPECT_EQ(LoadLlmConfig(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(LlmConfigTest, ShippedExampleParses) {
  const char* source = std::getenv("KEVO_SOURCE_DIR");
  const std::string root = source ? source : ".";
  auto loaded = LoadLlmConfig(root + "/docs/llm.example.conf");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_GE(loaded->size(), 3u);
}

}  // namespace
}  // namespace kevo::llm
