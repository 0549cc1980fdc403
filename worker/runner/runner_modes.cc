#include "worker/runner/runner_modes.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/tensor.h"
#include "worker/runner/runner_io.h"

namespace kevo::runner {

int RunValidationCases(const v1::Task& task, const std::vector<uint64_t>& seeds, int result_fd,
                       const std::function<void(const std::vector<Param>& params, const v1::Binding& binding,
                                                CaseReport& report)>& run_case) {
  auto params = ClassifyParams(task);
  if (!params.ok()) Fail(kExitInfra, "error", params.status().message());
  std::vector<CaseReport> cases;
  for (const v1::Binding& binding : task.validate()) {
    for (uint64_t seed : seeds) {
      CaseReport report;
      report.binding = binding.name();
      report.seed = seed;
      run_case(*params, binding, report);
      cases.push_back(std::move(report));
    }
  }
  std::string json = CasesToJson(cases);
  WriteAll(result_fd, json.data(), json.size());
  return kExitOk;
}

void NoteNondeterminism(const v1::TensorSpec& spec, std::string_view first, std::string_view second,
                        CaseReport& report) {
  if (!report.nondet_output.empty() || first == second) return;
  const size_t elem = DTypeSize(spec.dtype());
  const size_t n = std::min(first.size(), second.size());
  size_t k = 0;
  while (k < n && first[k] == second[k]) ++k;
  report.nondet_output = spec.name();
  report.nondet_index = static_cast<int64_t>(k / elem);
}

void SampleUntilStable(double start, double time_cap_s, double target_spread, ProfileReport& report,
                       const std::function<void()>& sample_candidate, const std::function<void()>& sample_baseline) {
  constexpr size_t kMinSamples = 10;
  constexpr size_t kMaxSamples = 20000;
  for (size_t round = 0;; ++round) {
    if (round % 2 == 0 || !sample_baseline) {
      sample_candidate();
      if (sample_baseline) sample_baseline();
    } else {
      sample_baseline();
      sample_candidate();
    }
    const size_t n = report.candidate.samples_s.size();
    if (n >= kMinSamples && (n % 5 == 0 || Now() - start > time_cap_s)) {
      Summarise(report.candidate);
      Summarise(report.baseline);
      if (report.candidate.spread < target_spread && (!sample_baseline || report.baseline.spread < target_spread)) {
        report.converged = true;
        break;
      }
    }
    if ((Now() - start > time_cap_s && n >= static_cast<size_t>(kTimedChecks)) || n >= kMaxSamples) break;
  }
  Summarise(report.candidate);
  Summarise(report.baseline);
  report.elapsed_s = Now() - start;
}

std::vector<KeptSample> KeptSampleSlots(int count) {
  std::vector<KeptSample> kept(static_cast<size_t>(count));
  for (size_t i = 0; i < kept.size(); ++i) kept[i].slot = i;
  return kept;
}

KeptSample* KeepSample(std::vector<KeptSample>& kept, const ProfileReport& report, const std::vector<Poke>& pokes,
                       SecretRng& rng) {
  if (kept.empty()) return nullptr;
  const int64_t s = static_cast<int64_t>(report.candidate.samples_s.size()) - 1;
  const int64_t slot = TimedCheckSlotFor(s, rng);
  if (slot < 0) return nullptr;
  KeptSample& k = kept[static_cast<size_t>(slot)];
  k.sample = s;
  k.pokes = pokes;
  return &k;
}

void WriteTimedChecks(std::vector<KeptSample>& kept, const PokeAccess& baseline_inputs,
                      const std::vector<const v1::TensorSpec*>& input_specs, ProfileReport& report,
                      const std::function<void(size_t slot)>& check) {
  std::vector<KeptSample*> order;
  for (KeptSample& k : kept) {
    if (k.sample >= 0) order.push_back(&k);
  }
  std::sort(order.begin(), order.end(), [](const KeptSample* a, const KeptSample* b) { return a->sample < b->sample; });
  for (KeptSample* k : order) {
    ApplyPokes(baseline_inputs, k->pokes);
    check(k->slot);
    UndoPokes(baseline_inputs, k->pokes, input_specs, /*modified=*/nullptr);
    report.timed_checks.push_back(k->sample);
  }
}

void ReadTimedInputBytes(int fd, void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = read(fd, p + done, bytes - done);
    if (n <= 0) Fail(kExitInfra, "error", "the timed-inputs file is shorter than the inputs");
    done += static_cast<size_t>(n);
  }
}

}  // namespace kevo::runner
