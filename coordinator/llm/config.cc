#include "coordinator/llm/config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kevo::llm {
namespace {

using Setter = std::function<absl::Status(const std::string& value, EndpointConfig& e)>;

absl::Status ParseDouble(const std::string& value, double min, double* out) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", value, "\" is not a number"));
  }
  if (v < min) return absl::InvalidArgumentError(absl::StrCat(value, " is below ", min));
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseInt(const std::string& value, int min, int* out) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", value, "\" is not an integer"));
  }
  if (v < min) return absl::InvalidArgumentError(absl::StrCat(value, " is below ", min));
  *out = v;
  return absl::OkStatus();
}

Setter DurationKey(absl::Duration EndpointConfig::*field, absl::Duration unit) {
  return [field, unit](const std::string& value, EndpointConfig& e) -> absl::Status {
    double v = 0;
    absl::Status s = ParseDouble(value, 0, &v);
    if (!s.ok()) return s;
    if (v == 0) return absl::InvalidArgumentError("must be positive");
    e.*field = unit * v;
    return absl::OkStatus();
  };
}

const std::map<std::string, Setter>& Keys() {
  static const auto* keys = new std::map<std::string, Setter>{
      {"base_url",
       [](const std::string& v, EndpointConfig& e) {
         e.base_url = v;
         return absl::OkStatus();
       }},
      {"model",
       [](const std::string& v, EndpointConfig& e) {
         e.model = v;
         return absl::OkStatus();
       }},
      {"api",
       [](const std::string& v, EndpointConfig& e) {
         if (v == "openai") {
           e.api = Api::kOpenAi;
         } else if (v == "anthropic") {
           e.api = Api::kAnthropic;
         } else {
           return absl::InvalidArgumentError(absl::StrCat("\"", v, "\" is not openai or anthropic"));
         }
         return absl::OkStatus();
       }},
      // Naming one key source forgets the other (an endpoint may override
      // the [defaults] source).
      {"api_key_env",
       [](const std::string& v, EndpointConfig& e) {
         e.api_key_env = v;
         e.api_key_file.clear();
         return absl::OkStatus();
       }},
      {"api_key_file",
       [](const std::string& v, EndpointConfig& e) {
         e.api_key_file = v;
         e.api_key_env.clear();
         return absl::OkStatus();
       }},
      {"ca_file",
       [](const std::string& v, EndpointConfig& e) {
         e.ca_file = v;
         return absl::OkStatus();
       }},
      {"stream",
       [](const std::string& v, EndpointConfig& e) {
         if (v == "true" || v == "yes" || v == "1") {
           e.stream = true;
         } else if (v == "false" || v == "no" || v == "0") {
           e.stream = false;
         } else {
           return absl::InvalidArgumentError(absl::StrCat("\"", v, "\" is not true or false"));
         }
         return absl::OkStatus();
       }},
      {"max_retries", [](const std::string& v, EndpointConfig& e) { return ParseInt(v, 0, &e.max_retries); }},
      {"max_concurrency", [](const std::string& v, EndpointConfig& e) { return ParseInt(v, 1, &e.max_concurrency); }},
      {"max_tokens", [](const std::string& v, EndpointConfig& e) { return ParseInt(v, 0, &e.max_tokens); }},
      {"price_in_per_mtok",
       [](const std::string& v, EndpointConfig& e) { return ParseDouble(v, 0, &e.price_in_per_mtok); }},
      {"price_out_per_mtok",
       [](const std::string& v, EndpointConfig& e) { return ParseDouble(v, 0, &e.price_out_per_mtok); }},
      {"weight", [](const std::string& v, EndpointConfig& e) { return ParseDouble(v, 0, &e.weight); }},
      {"initial_backoff_ms", DurationKey(&EndpointConfig::initial_backoff, absl::Milliseconds(1))},
      {"max_backoff_s", DurationKey(&EndpointConfig::max_backoff, absl::Seconds(1))},
      {"max_retry_after_s", DurationKey(&EndpointConfig::max_retry_after, absl::Seconds(1))},
  };
  return *keys;
}

// Timeouts live in a nested struct, which a member pointer to EndpointConfig
// cannot name; they get their own setters.
absl::Status SetTimeout(const std::string& key, const std::string& value, EndpointConfig& e) {
  double v = 0;
  absl::Status s = ParseDouble(value, 0, &v);
  if (!s.ok()) return s;
  if (v == 0) return absl::InvalidArgumentError("must be positive");
  (key == "connect_timeout_s" ? e.timeouts.connect : e.timeouts.total) = absl::Seconds(v);
  return absl::OkStatus();
}

std::string KnownKeys() {
  std::vector<std::string> names;
  for (const auto& [name, setter] : Keys()) names.push_back(name);
  names.push_back("connect_timeout_s");
  names.push_back("total_timeout_s");
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<std::vector<EndpointConfig>> ParseLlmConfig(const std::string& text, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto error = [&](int line, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
  };
  EndpointConfig defaults;
  bool in_defaults = false;
  std::vector<EndpointConfig> endpoints;
  std::vector<int> section_lines;
  std::set<std::string> names;
  std::set<std::string> section_keys;  // keys set in the current section
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line.back() != ']') return error(line_no, "section header must end with ']'");
      std::string header(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      if (header == "defaults") {
        if (!endpoints.empty()) {
          return error(line_no, "[defaults] must come before the first [endpoint NAME]");
        }
        in_defaults = true;
        section_keys.clear();
        continue;
      }
      if (header.rfind("endpoint", 0) != 0) {
        return error(line_no, absl::StrCat("unknown section [", header, "]; expected [defaults] or [endpoint NAME]"));
      }
      std::string name(absl::StripAsciiWhitespace(header.substr(8)));
      if (name.empty()) return error(line_no, "[endpoint] needs a name: [endpoint NAME]");
      for (char c : name) {
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
          return error(line_no,
                       absl::StrCat("endpoint name \"", name, "\" may use only letters, digits, '-', '_' and '.'"));
        }
      }
      if (!names.insert(name).second) {
        return error(line_no, absl::StrCat("endpoint ", name, " is defined twice"));
      }
      in_defaults = false;
      section_keys.clear();
      endpoints.push_back(defaults);
      endpoints.back().name = name;
      section_lines.push_back(line_no);
      continue;
    }
    // An inline comment starts at a '#' after whitespace.
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '#' && (line[i - 1] == ' ' || line[i - 1] == '\t')) {
        line = std::string(absl::StripAsciiWhitespace(line.substr(0, i)));
        break;
      }
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return error(line_no, "expected `key = value`");
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "api_key" || key == "key" || key == "token") {
      // Never echo the value: it is probably a secret.
      return error(line_no,
                   "API keys do not go in the config file; set api_key_env (an "
                   "environment variable's name) or api_key_file (a file's path)");
    }
    if (!in_defaults && endpoints.empty()) {
      return error(line_no, absl::StrCat("key \"", key,
                                         "\" outside a section; start with "
                                         "[endpoint NAME] or [defaults]"));
    }
    if (!section_keys.insert(key).second) {
      return error(line_no, absl::StrCat("\"", key, "\" is set twice in this section"));
    }
    if ((key == "api_key_env" && section_keys.count("api_key_file")) ||
        (key == "api_key_file" && section_keys.count("api_key_env"))) {
      return error(line_no, "set api_key_env or api_key_file, not both");
    }
    EndpointConfig& target = in_defaults ? defaults : endpoints.back();
    absl::Status set;
    if (key == "connect_timeout_s" || key == "total_timeout_s") {
      set = SetTimeout(key, value, target);
    } else {
      auto it = Keys().find(key);
      if (it == Keys().end()) {
        return error(line_no, absl::StrCat("unknown key \"", key, "\" (known: ", KnownKeys(), ")"));
      }
      set = it->second(value, target);
    }
    if (!set.ok()) return error(line_no, absl::StrCat(key, ": ", set.message()));
    if ((key == "api_key_file" || key == "ca_file") && !value.empty() && std::filesystem::path(value).is_relative()) {
      (key == "ca_file" ? target.ca_file : target.api_key_file) = (dir / value).string();
    }
  }
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no [endpoint NAME] section; see docs/llm.md"));
  }
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const EndpointConfig& e = endpoints[i];
    if (e.base_url.empty()) return error(section_lines[i], absl::StrCat("endpoint ", e.name, " has no base_url"));
    if (e.base_url.rfind("http://", 0) != 0 && e.base_url.rfind("https://", 0) != 0) {
      return error(section_lines[i], absl::StrCat("endpoint ", e.name, ": base_url \"", e.base_url,
                                                  "\" must start with http:// or https://"));
    }
    if (e.model.empty()) return error(section_lines[i], absl::StrCat("endpoint ", e.name, " has no model"));
  }
  return endpoints;
}

absl::StatusOr<std::vector<EndpointConfig>> LoadLlmConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read LLM config file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseLlmConfig(buffer.str(), path);
}

}  // namespace kevo::llm
