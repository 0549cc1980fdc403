#include "coordinator/llm/protocol.h"

#include <exception>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace kevo::llm {
namespace {

using nlohmann::json;

std::string Trim(std::string_view text, size_t max_len) {
  std::string out;
  out.reserve(std::min(text.size(), max_len + 3));
  for (char c : text) {
    if (out.size() >= max_len) {
      out += "...";
      break;
    }
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

int64_t IntOr(const json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return fallback;
  return it->get<int64_t>();
}

std::string StringOr(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

absl::Status DataLoss(std::string message, std::string_view received) {
  absl::Status status = absl::DataLossError(std::move(message));
  status.SetPayload(kPartialPayloadUrl, absl::Cord(std::string(received)));
  return status;
}

// One SSE event: its "event:" name and its joined "data:" lines.
struct SseEvent {
  std::string event;
  std::string data;
};

// Splits an SSE body into complete events. A trailing event without its
// blank-line terminator is returned too (`*incomplete_tail` set), since a
// stream cut there may still hold a whole JSON object.
std::vector<SseEvent> SplitSse(std::string_view body, bool* incomplete_tail) {
  std::vector<SseEvent> events;
  SseEvent current;
  bool has_data = false;
  size_t pos = 0;
  *incomplete_tail = false;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    const bool last_line_unterminated = end == std::string_view::npos;
    std::string_view line = body.substr(pos, last_line_unterminated ? body.npos : end - pos);
    pos = last_line_unterminated ? body.size() : end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      if (has_data || !current.event.empty()) events.push_back(std::move(current));
      current = SseEvent();
      has_data = false;
      continue;
    }
    if (line[0] == ':') continue;  // comment / keep-alive
    std::string_view field = line;
    std::string_view value;
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      field = line.substr(0, colon);
      value = line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      if (has_data) current.data += '\n';
      current.data += std::string(value);
      has_data = true;
    } else if (field == "event") {
      current.event = std::string(value);
    }
  }
  if (has_data || !current.event.empty()) {
    events.push_back(std::move(current));
    *incomplete_tail = true;
  }
  return events;
}

// Where an API puts its token counts in a usage object.
struct UsageKeys {
  const char* prompt;
  const char* completion;
};
constexpr UsageKeys kOpenAiUsage = {"prompt_tokens", "completion_tokens"};
constexpr UsageKeys kAnthropicUsage = {"input_tokens", "output_tokens"};

// The object `j` holds at `key`, or nullptr when it holds none there.
const json* ObjectAt(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? &*it : nullptr;
}

// Takes the model `j` names, if it names one; otherwise the configured one stays.
void TakeModel(const json& j, ChatResponse* response) {
  std::string model = StringOr(j, "model");
  if (!model.empty()) response->model = std::move(model);
}

// Takes `j`'s string at `key` (a finish or stop reason) into `*reason`, if
// it is there and not empty: a stream sends it in one event of many.
void TakeReason(const json& j, const char* key, std::string* reason) {
  std::string value = StringOr(j, key);
  if (!value.empty()) *reason = std::move(value);
}

// Takes the usage of a complete answer: the counts under `keys`, or marks it
// estimated when the answer has no usage object.
void TakeAnswerUsage(const json& answer, UsageKeys keys, ChatResponse* response) {
  const json* usage = ObjectAt(answer, "usage");
  if (usage != nullptr) {
    response->usage.prompt_tokens = IntOr(*usage, keys.prompt, 0);
    response->usage.completion_tokens = IntOr(*usage, keys.completion, 0);
  }
  response->usage.estimated = usage == nullptr;
}

// The answer's text and finish reason, from its first choice's message.
absl::Status TakeOpenAiAnswer(const json& j, std::string_view body, ChatResponse* response) {
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
    return DataLoss("answer has no choices", body);
  }
  const json& choice = (*choices)[0];
  const json* message = ObjectAt(choice, "message");
  if (message == nullptr) return DataLoss("answer's first choice has no message", body);
  auto content = message->find("content");
  if (content != message->end() && content->is_string()) {
    response->content = content->get<std::string>();
  } else if (content != message->end() && !content->is_null()) {
    return DataLoss("answer's message content is not a string", body);
  }
  response->finish_reason = StringOr(choice, "finish_reason");
  return absl::OkStatus();
}

// The answer's text (its text blocks joined) and stop reason.
absl::Status TakeAnthropicAnswer(const json& j, std::string_view body, ChatResponse* response) {
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) return DataLoss("answer has no content", body);
  response->content.clear();
  for (const json& block : *content) {
    if (block.is_object() && StringOr(block, "type") == "text") {
      response->content += StringOr(block, "text");
    }
  }
  response->finish_reason = StringOr(j, "stop_reason");
  return absl::OkStatus();
}

// Where one stream is: the event being read and what has come so far.
struct StreamState {
  size_t event = 0;         // 1-based number of the event being read
  bool cut = false;         // that event is the unterminated tail of the body
  int64_t chunks = 0;       // content chunks received
  bool have_usage = false;  // the server sent usage
  bool done = false;        // the API's terminator arrived
};

// Parses the current event's data as JSON into `*j`. DataLoss, with what
// arrived so far, when the stream broke off inside it or it is malformed.
absl::Status ParseEventJson(const std::string& data, const StreamState& state, const ChatResponse& response, json* j) {
  try {
    *j = json::parse(data);
  } catch (const std::exception& e) {
    return DataLoss(state.cut ? absl::StrCat("stream broke off inside event ", state.event)
                              : absl::StrCat("malformed JSON in stream event ", state.event, ": ", e.what()),
                    response.content);
  }
  return absl::OkStatus();
}

// Appends one content chunk, if it is not empty.
void TakeChunk(const std::string& text, StreamState* state, ChatResponse* response) {
  if (text.empty()) return;
  response->content += text;
  ++state->chunks;
}

absl::Status ErrorEvent(const std::string& data) {
  return absl::UnavailableError(absl::StrCat("error event in stream: ", ErrorMessage(data)));
}

absl::Status TakeOpenAiEvent(const SseEvent& event, StreamState* state, ChatResponse* response) {
  if (event.data == "[DONE]") {
    state->done = true;
    return absl::OkStatus();
  }
  json j;
  KEVO_RETURN_IF_ERROR(ParseEventJson(event.data, *state, *response, &j));
  if (!j.is_object()) {
    return DataLoss(absl::StrCat("stream event ", state->event, " is not a JSON object"), response->content);
  }
  if (j.contains("error")) return ErrorEvent(event.data);
  TakeModel(j, response);
  if (const json* usage = ObjectAt(j, "usage")) {
    response->usage.prompt_tokens = IntOr(*usage, kOpenAiUsage.prompt, 0);
    response->usage.completion_tokens = IntOr(*usage, kOpenAiUsage.completion, 0);
    state->have_usage = true;
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return absl::OkStatus();
  const json& choice = (*choices)[0];
  if (!choice.is_object()) return absl::OkStatus();
  if (const json* delta = ObjectAt(choice, "delta")) {
    auto content = delta->find("content");
    if (content != delta->end() && content->is_string()) {
      TakeChunk(content->get<std::string>(), state, response);
    }
  }
  TakeReason(choice, "finish_reason", &response->finish_reason);
  return absl::OkStatus();
}

absl::Status TakeAnthropicEvent(const SseEvent& event, StreamState* state, ChatResponse* response) {
  json j;
  KEVO_RETURN_IF_ERROR(ParseEventJson(event.data, *state, *response, &j));
  if (!j.is_object()) return absl::OkStatus();
  const std::string type = StringOr(j, "type");
  if (type == "error") return ErrorEvent(event.data);
  if (type == "message_start") {
    if (const json* message = ObjectAt(j, "message")) {
      TakeModel(*message, response);
      if (const json* usage = ObjectAt(*message, "usage")) {
        response->usage.prompt_tokens = IntOr(*usage, kAnthropicUsage.prompt, 0);
        state->have_usage = true;
      }
    }
  } else if (type == "content_block_delta") {
    if (const json* delta = ObjectAt(j, "delta")) {
      TakeChunk(StringOr(*delta, "text"), state, response);
    }
  } else if (type == "message_delta") {
    if (const json* usage = ObjectAt(j, "usage")) {
      response->usage.completion_tokens = IntOr(*usage, kAnthropicUsage.completion, 0);
      state->have_usage = true;
    }
    if (const json* delta = ObjectAt(j, "delta")) {
      TakeReason(*delta, "stop_reason", &response->finish_reason);
    }
  } else if (type == "message_stop") {
    state->done = true;
  }
  return absl::OkStatus();
}

using TakeEvent = absl::Status (*)(const SseEvent&, StreamState*, ChatResponse*);

// The loop both APIs' streams share: hands each event to `take` until it sees
// the terminator (named `terminator` in the error when it never comes); then,
// without usage in the stream, counts one completion token per content chunk.
absl::Status ParseEvents(std::string_view body, TakeEvent take, const char* terminator, ChatResponse* response) {
  StreamState state;
  bool incomplete_tail = false;
  const std::vector<SseEvent> events = SplitSse(body, &incomplete_tail);
  for (size_t i = 0; i < events.size() && !state.done; ++i) {
    state.event = i + 1;
    state.cut = incomplete_tail && i + 1 == events.size();
    KEVO_RETURN_IF_ERROR(take(events[i], &state, response));
  }
  if (!state.done) {
    return DataLoss(absl::StrCat("stream ended without ", terminator, " after ", state.chunks, " content chunks"),
                    response->content);
  }
  if (!state.have_usage) response->usage.completion_tokens = state.chunks;
  response->usage.estimated = !state.have_usage;
  return absl::OkStatus();
}

}  // namespace

std::string BuildRequestBody(const EndpointConfig& config, const ChatRequest& request, bool stream) {
  json body;
  body["model"] = config.model;
  const int max_tokens = request.max_tokens > 0 ? request.max_tokens : config.max_tokens;
  if (config.api == Api::kAnthropic) {
    std::string system;
    json messages = json::array();
    for (const ChatMessage& m : request.messages) {
      if (m.role == "system") {
        if (!system.empty()) system += "\n\n";
        system += m.content;
      } else {
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
    }
    if (!system.empty()) body["system"] = system;
    body["messages"] = std::move(messages);
    body["max_tokens"] = max_tokens > 0 ? max_tokens : 4096;  // required by the API
    if (!request.stop.empty()) body["stop_sequences"] = request.stop;
  } else {
    json messages = json::array();
    for (const ChatMessage& m : request.messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    body["messages"] = std::move(messages);
    if (max_tokens > 0) body["max_tokens"] = max_tokens;
    if (request.seed) body["seed"] = *request.seed;
    if (!request.stop.empty()) body["stop"] = request.stop;
    // Ask for a final usage chunk; servers that do not know the option ignore it.
    if (stream) body["stream_options"] = {{"include_usage", true}};
  }
  if (request.temperature) body["temperature"] = *request.temperature;
  if (request.top_p) body["top_p"] = *request.top_p;
  body["stream"] = stream;
  return body.dump();
}

absl::Status ParseAnswer(Api api, std::string_view body, ChatResponse* response) {
  try {
    json j = json::parse(body.begin(), body.end());
    if (!j.is_object()) return DataLoss("answer is not a JSON object", body);
    const bool anthropic = api == Api::kAnthropic;
    KEVO_RETURN_IF_ERROR(anthropic ? TakeAnthropicAnswer(j, body, response) : TakeOpenAiAnswer(j, body, response));
    TakeModel(j, response);
    TakeAnswerUsage(j, anthropic ? kAnthropicUsage : kOpenAiUsage, response);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return DataLoss(absl::StrCat("malformed JSON answer (", body.size(), " bytes): ", e.what()), body);
  }
}

absl::Status ParseStream(Api api, std::string_view body, ChatResponse* response) {
  try {
    return api == Api::kAnthropic ? ParseEvents(body, TakeAnthropicEvent, "message_stop", response)
                                  : ParseEvents(body, TakeOpenAiEvent, "[DONE]", response);
  } catch (const std::exception& e) {
    return DataLoss(absl::StrCat("malformed stream: ", e.what()), response->content);
  }
}

std::string ErrorMessage(std::string_view body, size_t max_len) {
  try {
    json j = json::parse(body.begin(), body.end());
    if (j.is_object()) {
      auto error = j.find("error");
      if (error != j.end()) {
        if (error->is_string()) return Trim(error->get<std::string>(), max_len);
        if (error->is_object()) {
          std::string message = StringOr(*error, "message");
          if (!message.empty()) return Trim(message, max_len);
        }
      }
      std::string message = StringOr(j, "message");
      if (!message.empty()) return Trim(message, max_len);
      std::string detail = StringOr(j, "detail");
      if (!detail.empty()) return Trim(detail, max_len);
    }
  } catch (const std::exception&) {
    // Not JSON: fall through to the raw body.
  }
  return Trim(body, max_len);
}

int64_t EstimatePromptTokens(const ChatRequest& request) {
  int64_t bytes = 0;
  for (const ChatMessage& m : request.messages) bytes += static_cast<int64_t>(m.content.size());
  return (bytes + 3) / 4;
}

}  // namespace kevo::llm
