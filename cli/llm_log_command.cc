// `kevo llm-log JOB`: the LLM calls a job made. From a running coordinator
// (JobService.ListLlmCalls, `--coordinator`, the default), or offline from
// the RocksDB folder of a stopped one or of `kevo run --db` (`--db`; the
// `llm_calls` family, coordinator/llm/call_log.h).
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/llm/call_log.h"
#include "coordinator/store/store.h"

namespace kevo::cli {
namespace {

constexpr char kUsage[] =
    "usage: kevo llm-log JOB [--coordinator ADDR | --db DIR] [--json] [--full]\n"
    "The LLM calls of a job, oldest first: endpoint, model, tokens, latency, cost, outcome and\n"
    "the nodes each call's candidates became. --full adds each call's prompt and answer;\n"
    "--json prints the stored records (with the prompt and answer) as a JSON array.\n"
    "They come from the coordinator at ADDR (default 127.0.0.1:50051), or with --db from the\n"
    "folder given to `kevo run --db` or `kevo-coordinator --db` (not while a coordinator runs\n"
    "on it).\n";

int Fail(const absl::Status& s) { return cli::Fail("llm-log", s); }

std::string NodesText(const nlohmann::json& call) {
  std::vector<std::string> parts;
  for (const auto& n : call.value("nodes", nlohmann::json::array())) {
    std::string part = absl::StrCat(n.value("node_id", "?"), " ", n.value("status", "?"));
    if (n.value("status", "") == "OK") absl::StrAppend(&part, absl::StrFormat(" %.2fx", n.value("fitness", 0.0)));
    parts.push_back(part);
  }
  if (parts.empty()) return call.value("candidates", 0) > 0 ? "(not settled)" : "-";
  return absl::StrJoin(parts, ", ");
}

void PrintTable(const std::vector<nlohmann::json>& calls, bool full) {
  std::printf("%-24s %-12s %-20s %-8s %13s %8s %9s %-14s %s\n", "CALL", "ENDPOINT", "MODEL", "PARENT", "TOKENS in/out",
              "LATENCY", "COST", "OUTCOME", "NODES");
  for (const auto& c : calls) {
    std::string parent = c.value("parent_id", "");
    std::printf("%-24s %-12s %-20s %-8s %6lld/%-6lld %7.2fs %8.4f$ %-14s %s\n", c.value("call_id", "?").c_str(),
                c.value("endpoint", "-").c_str(), c.value("model", "-").c_str(), parent.empty() ? "-" : parent.c_str(),
                static_cast<long long>(c.value("prompt_tokens", int64_t{0})),
                static_cast<long long>(c.value("completion_tokens", int64_t{0})), c.value("latency_s", 0.0),
                c.value("cost_usd", 0.0), c.value("outcome", "?").c_str(), NodesText(c).c_str());
    if (!full) {
      if (c.contains("error")) std::printf("    error: %s\n", c.value("error", "").c_str());
      continue;
    }
    std::printf("\n--- call %s: prompt (parts: %s; dropped: %s)\n", c.value("call_id", "?").c_str(),
                absl::StrJoin(c.value("prompt_included", std::vector<std::string>{}), ", ").c_str(),
                absl::StrJoin(c.value("prompt_dropped", std::vector<std::string>{}), ", ").c_str());
    for (const auto& m : c.value("prompt", nlohmann::json::array())) {
      std::printf("[%s]\n%s\n", m.value("role", "?").c_str(), m.value("content", "").c_str());
    }
    std::printf("--- call %s: answer\n%s\n", c.value("call_id", "?").c_str(), c.value("answer", "").c_str());
    if (c.contains("error")) std::printf("--- error: %s\n", c.value("error", "").c_str());
    std::printf("\n");
  }
}

// Every call of `job_id` from the coordinator at `address`, a page at a time.
absl::StatusOr<std::vector<nlohmann::json>> CallsFromCoordinator(const std::string& address, const std::string& job_id,
                                                                 bool include_text) {
  v1::ListLlmCallsRequest req;
  req.set_job_id(job_id);
  req.set_include_text(include_text);
  std::vector<nlohmann::json> calls;
  for (;;) {
    KEVO_ASSIGN_OR_RETURN(v1::ListLlmCallsResponse resp,
                          CallCoordinator(address, &v1::JobService::Stub::ListLlmCalls, req));
    for (const v1::LlmCall& c : resp.calls()) {
      auto parsed = nlohmann::json::parse(c.record_json(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        return absl::DataLossError(
            absl::StrCat("the coordinator sent call ", c.call_id(), " as a record that is not JSON"));
      }
      calls.push_back(std::move(parsed));
    }
    if (resp.next_page_token().empty()) return calls;
    req.set_page_token(resp.next_page_token());
  }
}

}  // namespace

int LlmLogCommand(const std::vector<std::string>& argv) {
  auto parsed = ParseJobReaderArgs("llm-log", argv, {"json", "full"}, kUsage);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const ParsedArgs* args = &std::get<ParsedArgs>(parsed);
  const std::string& job_id = args->positional[0];
  const bool offline = args->Has("db");
  absl::StatusOr<std::vector<nlohmann::json>> calls;
  if (offline) {
    auto store = store::Store::Open(StoreDir(args->Get("db")));
    if (!store.ok()) return Fail(store.status());
    calls = llm::ListCalls(store->get(), job_id);
  } else {
    calls = CallsFromCoordinator(args->Get("coordinator", kDefaultCoordinator), job_id,
                                 /*include_text=*/args->Has("json") || args->Has("full"));
  }
  if (!calls.ok()) return Fail(calls.status());
  if (args->Has("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& c : *calls) out.push_back(std::move(c));
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (calls->empty()) {
    if (offline) {
      std::fprintf(stderr, "kevo llm-log: job %s made no LLM calls (or is not in %s)\n", job_id.c_str(),
                   args->Get("db").c_str());
    } else {
      std::fprintf(stderr, "kevo llm-log: job %s made no LLM calls\n", job_id.c_str());
    }
    return 1;
  }
  PrintTable(*calls, args->Has("full"));
  return 0;
}

}  // namespace kevo::cli
