#include "coordinator/llm/protocol.h"

#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

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

absl::Status ParseOpenAiAnswer(std::string_view body, ChatResponse* response) {
  json j = json::parse(body.begin(), body.end());
  if (!j.is_object()) return DataLoss("answer is not a JSON object", body);
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return DataLoss("answer has no choices", body);
  }
  const json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (message == choice.end() || !message->is_object()) {
    return DataLoss("answer's first choice has no message", body);
  }
  auto content = message->find("content");
  if (content != message->end() && content->is_string()) {
    response->content = content->get<std::string>();
  } else if (content != message->end() && !content->is_null()) {
    return DataLoss("answer's message content is not a string", body);
  }
  response->finish_reason = StringOr(choice, "finish_reason");
  std::string model = StringOr(j, "model");
  if (!model.empty()) response->model = model;
  auto usage = j.find("usage");
  if (usage != j.end() && usage->is_object()) {
    response->usage.prompt_tokens = IntOr(*usage, "prompt_tokens", 0);
    response->usage.completion_tokens = IntOr(*usage, "completion_tokens", 0);
    response->usage.estimated = false;
  } else {
    response->usage.estimated = true;
  }
  return absl::OkStatus();
}

absl::Status ParseAnthropicAnswer(std::string_view body, ChatResponse* response) {
  json j = json::parse(body.begin(), body.end());
  if (!j.is_object()) return DataLoss("answer is not a JSON object", body);
  auto content = j.find("content");
  if (content == j.end() || !content->is_array()) return DataLoss("answer has no content", body);
  response->content.clear();
  for (const json& block : *content) {
    if (block.is_object() && StringOr(block, "type") == "text") {
      response->content += StringOr(block, "text");
    }
  }
  response->finish_reason = StringOr(j, "stop_reason");
  std::string model = StringOr(j, "model");
  if (!model.empty()) response->model = model;
  auto usage = j.find("usage");
  if (usage != j.end() && usage->is_object()) {
    response->usage.prompt_tokens = IntOr(*usage, "input_tokens", 0);
    response->usage.completion_tokens = IntOr(*usage, "output_tokens", 0);
    response->usage.estimated = false;
  } else {
    response->usage.estimated = true;
  }
  return absl::OkStatus();
}

absl::Status ParseOpenAiStream(std::string_view body, ChatResponse* response) {
  bool incomplete_tail = false;
  std::vector<SseEvent> events = SplitSse(body, &incomplete_tail);
  int64_t chunks = 0;
  bool done = false;
  bool have_usage = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string& data = events[i].data;
    if (data == "[DONE]") {
      done = true;
      break;
    }
    json j;
    try {
      j = json::parse(data);
    } catch (const std::exception& e) {
      const bool cut = incomplete_tail && i + 1 == events.size();
      return DataLoss(cut ? absl::StrCat("stream broke off inside event ", i + 1)
                          : absl::StrCat("malformed JSON in stream event ", i + 1, ": ", e.what()),
                      response->content);
    }
    if (!j.is_object()) {
      return DataLoss(absl::StrCat("stream event ", i + 1, " is not a JSON object"),
                      response->content);
    }
    if (j.contains("error")) {
      return absl::UnavailableError(
          absl::StrCat("error event in stream: ", ErrorMessage(data)));
    }
    std::string model = StringOr(j, "model");
    if (!model.empty()) response->model = model;
    auto usage = j.find("usage");
    if (usage != j.end() && usage->is_object()) {
      response->usage.prompt_tokens = IntOr(*usage, "prompt_tokens", 0);
      response->usage.completion_tokens = IntOr(*usage, "completion_tokens", 0);
      have_usage = true;
    }
    auto choices = j.find("choices");
    if (choices == j.end() || !choices->is_array() || choices->empty()) continue;
    const json& choice = (*choices)[0];
    if (!choice.is_object()) continue;
    auto delta = choice.find("delta");
    if (delta != choice.end() && delta->is_object()) {
      auto content = delta->find("content");
      if (content != delta->end() && content->is_string() && !content->get_ref<const std::string&>().empty()) {
        response->content += content->get<std::string>();
        ++chunks;
      }
    }
    std::string finish = StringOr(choice, "finish_reason");
    if (!finish.empty()) response->finish_reason = finish;
  }
  if (!done) {
    return DataLoss(absl::StrCat("stream ended without [DONE] after ", chunks, " content chunks"),
                    response->content);
  }
  if (!have_usage) {
    response->usage.completion_tokens = chunks;
    response->usage.estimated = true;
  } else {
    response->usage.estimated = false;
  }
  return absl::OkStatus();
}

absl::Status ParseAnthropicStream(std::string_view body, ChatResponse* response) {
  bool incomplete_tail = false;
  std::vector<SseEvent> events = SplitSse(body, &incomplete_tail);
  int64_t chunks = 0;
  bool done = false;
  bool have_usage = false;
  for (size_t i = 0; i < events.size(); ++i) {
    json j;
    try {
      j = json::parse(events[i].data);
    } catch (const std::exception& e) {
      const bool cut = incomplete_tail && i + 1 == events.size();
      return DataLoss(cut ? absl::StrCat("stream broke off inside event ", i + 1)
                          : absl::StrCat("malformed JSON in stream event ", i + 1, ": ", e.what()),
                      response->content);
    }
    if (!j.is_object()) continue;
    const std::string type = StringOr(j, "type");
    if (type == "error") {
      return absl::UnavailableError(
          absl::StrCat("error event in stream: ", ErrorMessage(events[i].data)));
    }
    if (type == "message_start" && j.contains("message") && j["message"].is_object()) {
      const json& message = j["message"];
      std::string model = StringOr(message, "model");
      if (!model.empty()) response->model = model;
      if (message.contains("usage") && message["usage"].is_object()) {
        response->usage.prompt_tokens = IntOr(message["usage"], "input_tokens", 0);
        have_usage = true;
      }
    } else if (type == "content_block_delta" && j.contains("delta") && j["delta"].is_object()) {
      std::string text = StringOr(j["delta"], "text");
      if (!text.empty()) {
        response->content += text;
        ++chunks;
      }
    } else if (type == "message_delta") {
      if (j.contains("usage") && j["usage"].is_object()) {
        response->usage.completion_tokens = IntOr(j["usage"], "output_tokens", 0);
        have_usage = true;
      }
      if (j.contains("delta") && j["delta"].is_object()) {
        std::string stop = StringOr(j["delta"], "stop_reason");
        if (!stop.empty()) response->finish_reason = stop;
      }
    } else if (type == "message_stop") {
      done = true;
      break;
    }
  }
  if (!done) {
    return DataLoss(
        absl::StrCat("stream ended without message_stop after ", chunks, " content chunks"),
        response->content);
  }
  if (!have_usage) {
    response->usage.completion_tokens = chunks;
    response->usage.estimated = true;
  }
  return absl::OkStatus();
}

}  // namespace

std::string BuildRequestBody(const EndpointConfig& config, const ChatRequest& request,
                             bool stream) {
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
    return api == Api::kAnthropic ? ParseAnthropicAnswer(body, response)
                                  : ParseOpenAiAnswer(body, response);
  } catch (const std::exception& e) {
    return DataLoss(absl::StrCat("malformed JSON answer (", body.size(), " bytes): ", e.what()),
                    body);
  }
}

absl::Status ParseStream(Api api, std::string_view body, ChatResponse* response) {
  try {
    return api == Api::kAnthropic ? ParseAnthropicStream(body, response)
                                  : ParseOpenAiStream(body, response);
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
