// The --llm-config file: which endpoints the LLM proposer may call. A small
// INI-style text format, one `key = value` per line, one [endpoint NAME]
// section per endpoint, an optional [defaults] section first; '#' starts a
// comment (at the start of a line, or after whitespace):
//
//   # local vLLM, no key
//   [defaults]
//   connect_timeout_s = 5
//   total_timeout_s = 600
//
//   [endpoint qwen-local]
//   base_url = http://127.0.0.1:8000/v1
//   model = Qwen/Qwen2.5-Coder-32B-Instruct
//   stream = true
//   weight = 2
//
//   [endpoint hosted]
//   base_url = https://api.openai.com/v1
//   model = gpt-4o
//   api_key_env = OPENAI_API_KEY
//   price_in_per_mtok = 2.5
//   price_out_per_mtok = 10
//
// The keys and their defaults are listed in docs/llm.md. API keys never go in
// this file (an `api_key` line is an error): name a variable or a file.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "coordinator/llm/chat_client.h"

namespace kevo::llm {

// Reads and checks the file. Relative api_key_file / ca_file paths are taken
// from the config file's folder. Errors: NotFound (cannot read the file),
// InvalidArgument "PATH:LINE: what is wrong" for syntax, unknown keys, bad
// values, duplicate endpoints, an endpoint without base_url or model, or a
// file with no endpoint. Does not read the API keys (ChatClient::Create does).
absl::StatusOr<std::vector<EndpointConfig>> LoadLlmConfig(const std::string& path);

// The same for text already in memory; `path` is only used in messages and
// to resolve relative paths.
absl::StatusOr<std::vector<EndpointConfig>> ParseLlmConfig(const std::string& text, const std::string& path);

}  // namespace kevo::llm
