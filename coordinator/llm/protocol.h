// Wire formats of the chat APIs, internal to kevo::llm: request bodies, JSON
// answers, server-sent-event streams and error bodies of OpenAI's Chat
// Completions and Anthropic's Messages API. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

#include "coordinator/llm/chat_client.h"

namespace kevo::llm {

// The JSON body for `request` to `config`'s endpoint.
std::string BuildRequestBody(const EndpointConfig& config, const ChatRequest& request, bool stream);

// Parses a complete (non-streamed) answer into `response` (content, model,
// finish_reason, usage; usage.estimated when the server sent none). DataLoss
// for malformed JSON or a body with no answer in it.
absl::Status ParseAnswer(Api api, std::string_view body, ChatResponse* response);

// Parses a server-sent-event stream (the whole body as received) into
// `response`. Without usage in the stream, completion tokens are the number
// of content chunks. DataLoss when the stream ends before its terminator
// ("data: [DONE]" / message_stop) or holds malformed JSON; `response->content`
// then holds what arrived. Unavailable for an error event in the stream.
absl::Status ParseStream(Api api, std::string_view body, ChatResponse* response);

// The human-readable message of an error body ({"error":{"message":...}} and
// variants), else the body itself; one line, at most `max_len` bytes.
std::string ErrorMessage(std::string_view body, size_t max_len = 300);

// bytes / 4, the usual rule of thumb, for servers that report no usage.
int64_t EstimatePromptTokens(const ChatRequest& request);

}  // namespace kevo::llm
