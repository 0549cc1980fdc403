// Fuzz target: what an LLM endpoint sends back. The first byte picks the
// parser: the HTTP body of a complete answer or of a server-sent-event stream
// (OpenAI or Anthropic), or the answer's text, from which the proposer takes
// its candidates for a platform. Garbage must end in a Status or an outcome.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coordinator/llm/answer_parser.h"
#include "coordinator/llm/llm_proposer.h"
#include "coordinator/llm/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto api = (data[0] & 1) ? kevo::llm::Api::kAnthropic : kevo::llm::Api::kOpenAi;
  switch ((data[0] >> 1) % 3) {
    case 0: {
      kevo::llm::ChatResponse response;
      (void)kevo::llm::ParseAnswer(api, body, &response);
      break;
    }
    case 1: {
      kevo::llm::ChatResponse response;
      (void)kevo::llm::ParseStream(api, body, &response);
      break;
    }
    default: {
      static const char* const kPlatforms[] = {"cpu", "nvidia", "amd", "mtia-sim"};
      kevo::llm::AnswerOutcome outcome;
      (void)kevo::llm::ParseCandidates(std::string(body), kPlatforms[(data[0] >> 3) % 4], &outcome);
      (void)kevo::llm::ExtractCode(body, {"cpp", "cuda"});
    }
  }
  return 0;
}
