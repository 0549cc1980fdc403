// `kevo eval TASK_DIR CANDIDATE_FILE [--coordinator HOST:PORT] [--json]`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/embedded.h"
#include "cli/flags.h"
#include "cli/job_common.h"
#include "cli/report.h"
#include <grpcpp/grpcpp.h>

#include "common/grpc_status.h"
#include "common/task/kernelbench.h"
#include "common/task/task_loader.h"
#include "kevo/v1/job.grpc.pb.h"

namespace kevo::cli {
namespace {

constexpr char kEvalUsage[] =
    "usage: kevo eval TASK CANDIDATE_FILE [--coordinator HOST:PORT] [--platform P]\n"
    "                 [--db DIR] [--json] [--flags \"-ffast-math ...\"]\n"
    "Compiles, validates and profiles one candidate kernel for a task (a .cu file is\n"
    "CUDA and goes to an nvidia worker, a .hip file is HIP and goes to an amd worker,\n"
    "unless --platform says otherwise). Without\n"
    "--coordinator it runs embedded: a coordinator and a local worker in this process tree.\n"
    "TASK is a task folder or a KernelBench problem (.py, whose candidate is a .py file\n"
    "defining ModelNew; see docs/kernelbench.md).\n"
    "Exit status: 0 when the candidate is correct (status OK), 3 when it was evaluated\n"
    "and failed, 1 on errors (bad task file, no worker, ...), 2 on usage errors.\n";

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8 (or is NUL), or npos when it is all text.
size_t FirstNonTextByte(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0) return i;
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (extra < 0 || (extra == 1 && c < 0xc2) || i + extra >= text.size() + (extra == 0 ? 1 : 0)) return i;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return i;
    }
    i += extra + 1;
  }
  return std::string::npos;
}

// The candidate's source: a kernel is text, and the API carries it as a
// protobuf string, which must be UTF-8.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (const size_t bad = FirstNonTextByte(text); bad != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a source file: byte ", bad,
                                                   " is not UTF-8 text (a candidate is the kernel's source code)"));
  }
  return text;
}

}  // namespace

std::string StageLine(const v1::StageEvent& e) {
  std::string name = v1::Stage_Name(e.stage());
  if (name.rfind("STAGE_", 0) == 0) name = name.substr(6);
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  std::string line = absl::StrFormat("  %-9s %s", name, e.ok() ? "ok" : "FAILED");
  if (e.seconds() > 0) absl::StrAppend(&line, absl::StrFormat(" (%.2fs)", e.seconds()));
  if (!e.message().empty()) absl::StrAppend(&line, "  ", e.message());
  return line;
}

absl::StatusOr<v1::Evaluation> EvaluateRemote(const std::string& address, const v1::EvaluateRequest& request,
                                              bool quiet) {
  auto stub = Stub(address);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(1));
  auto reader = stub->EvaluateCandidate(&ctx, request);
  v1::EvaluateEvent event;
  v1::Evaluation final;
  bool have_final = false;
  while (reader->Read(&event)) {
    if (event.has_accepted_eval_id()) {
      if (!quiet) std::fprintf(stderr, "evaluation %s queued\n", event.accepted_eval_id().c_str());
    } else if (event.has_stage()) {
      if (!quiet) std::fprintf(stderr, "%s\n", StageLine(event.stage()).c_str());
    } else if (event.has_final()) {
      final = event.final();
      have_final = true;
    }
  }
  grpc::Status st = reader->Finish();
  if (!st.ok()) return FromGrpcStatus(st);
  if (!have_final) return absl::UnavailableError("the coordinator ended the stream without a result");
  return final;
}

int EvalCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator", "platform", "db", "flags"}, {"json", "help"});
  if (!args.ok()) {
    std::fprintf(stderr, "kevo eval: %s\n%s", std::string(args.status().message()).c_str(), kEvalUsage);
    return 2;
  }
  if (args->Has("help")) {
    std::fputs(kEvalUsage, stdout);
    return 0;
  }
  if (args->positional.size() != 2) {
    std::fprintf(stderr, "kevo eval: expected TASK and CANDIDATE_FILE\n%s", kEvalUsage);
    return 2;
  }
  auto task = task::LoadTaskPath(args->positional[0]);
  if (!task.ok()) {
    std::fprintf(stderr, "kevo eval: %s\n", std::string(task.status().message()).c_str());
    return 1;
  }
  auto source = ReadFile(args->positional[1]);
  if (!source.ok()) {
    std::fprintf(stderr, "kevo eval: %s\n", std::string(source.status().message()).c_str());
    return 1;
  }
  v1::EvaluateRequest request;
  *request.mutable_task() = *task;
  // The file's extension says the language: .cu is CUDA (nvidia workers),
  // .hip is HIP (amd workers), anything else C++.
  const bool cuda = absl::EndsWith(args->positional[1], ".cu");
  const bool hip = absl::EndsWith(args->positional[1], ".hip");
  // .py is Python: a KernelBench ModelNew module.
  const bool python = absl::EndsWith(args->positional[1], ".py");
  request.mutable_candidate()->set_language(cuda ? "cuda" : hip ? "hip" : python ? task::kPythonLanguage : "c++");
  request.mutable_candidate()->set_source(*source);
  // --flags, else the flags a kernel file written by kevo names on its first line.
  if (args->Has("flags")) {
    std::istringstream flags(args->Get("flags"));
    for (std::string f; flags >> f;) request.mutable_candidate()->add_extra_flags(f);
  } else {
    for (const std::string& f : KernelFileFlags(*source)) request.mutable_candidate()->add_extra_flags(f);
  }
  request.set_platform(args->Get("platform", cuda ? "nvidia" : hip ? "amd" : "cpu"));
  bool json = args->Has("json");

  std::unique_ptr<Embedded> embedded;
  std::string address = args->Get("coordinator");
  if (address.empty()) {
    EmbeddedOptions eo;
    eo.db_dir = args->Get("db");
    eo.platform = request.platform();
    auto e = Embedded::Start(eo);
    if (!e.ok()) {
      std::fprintf(stderr, "kevo eval: %s\n", std::string(e.status().message()).c_str());
      return 1;
    }
    embedded = std::move(*e);
    address = embedded->address();
  }
  auto evaluation = EvaluateRemote(address, request, /*quiet=*/false);
  if (!evaluation.ok()) {
    std::fprintf(stderr, "kevo eval: %s\n", evaluation.status().ToString().c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", EvaluationJson(*evaluation).dump(2).c_str());
  } else {
    std::printf("%s", HumanReport(*evaluation).c_str());
  }
  return evaluation->status() == v1::OK ? 0 : 3;
}

int WorkersCommand(const std::vector<std::string>& argv) {
  auto args = ParseArgs(argv, {"coordinator"}, {"json"});
  if (!args.ok()) {
    std::fprintf(stderr, "kevo workers: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  std::string address = args->Get("coordinator", "127.0.0.1:50051");
  auto stub = Stub(address);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListWorkersResponse resp;
  grpc::Status st = stub->ListWorkers(&ctx, v1::ListWorkersRequest(), &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "kevo workers: %s: %s\n", address.c_str(), st.error_message().c_str());
    return 1;
  }
  if (args->Has("json")) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& w : resp.workers()) {
      j.push_back(
          {{"worker_id", w.worker_id()},
           {"platform", w.platform()},
           {"device", w.device()},
           {"slots", w.slots()},
           {"busy", w.busy()},
           {"compile_only", w.compile_only()},
           {"targets", std::vector<std::string>(w.targets().begin(), w.targets().end())},
           {"mem_bandwidth_gbs", w.mem_bandwidth_gbs()},
           {"fp32_peak_gflops", w.fp32_peak_gflops()},
           {"languages", std::vector<std::string>(w.languages().begin(), w.languages().end())},
           {"capabilities", std::map<std::string, std::string>(w.capabilities().begin(), w.capabilities().end())}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%-22s %-9s %-5s %-5s %-12s %-14s %-12s %s\n", "WORKER", "PLATFORM", "SLOTS", "BUSY", "MODE", "TARGETS",
              "LANGUAGES", "DEVICE");
  for (const auto& w : resp.workers()) {
    const std::string targets = w.targets().empty() ? "-" : absl::StrJoin(w.targets(), ",");
    const std::string languages = w.languages().empty() ? "-" : absl::StrJoin(w.languages(), ",");
    std::printf("%-22s %-9s %-5d %-5d %-12s %-14s %-12s %s\n", w.worker_id().c_str(), w.platform().c_str(), w.slots(),
                w.busy(), w.compile_only() ? "compile-only" : "full", targets.c_str(), languages.c_str(),
                w.device().c_str());
    // What runs KernelBench problems there (or why nothing does).
    const auto& caps = w.capabilities();
    if (auto kb = caps.find("kernelbench"); kb != caps.end()) {
      std::string detail;
      for (const char* key : {"kernelbench_torch", "kernelbench_triton", "kernelbench_torch_compile"}) {
        if (auto it = caps.find(key); it != caps.end()) {
          absl::StrAppend(&detail, detail.empty() ? " (" : ", ", std::string(key).substr(12), " ", it->second);
        }
      }
      std::printf("  kernelbench: %s%s\n", kb->second.c_str(), detail.empty() ? "" : (detail + ")").c_str());
    }
  }
  return 0;
}

}  // namespace kevo::cli
