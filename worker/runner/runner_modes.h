// The loops of the run and profile modes (protocol.h) that every runner
// shares — kevo-runner-cpu and -mtia (runner_main.cc) and the GPU runners
// (device/device_runner.cc) — around what differs between them: where a
// call's buffers live (host memory or a device) and how a kernel is called.
//
// Nothing here is thread-safe; a runner calls it from its main thread.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/expr.h"
#include "common/tensor.h"
#include "kevo/v1/task.pb.h"
#include "worker/runner/perturb.h"
#include "worker/runner/protocol.h"
#include "worker/runner/runner_io.h"

namespace kevo::runner {

// The tensors and argument array of one call at one binding, in buffers of
// type `BufferT` (host memory, or a device's): constructed with the buffer's
// size, with data() its address as the kernel sees it.
template <typename BufferT>
struct CallArgs {
  std::vector<std::unique_ptr<BufferT>> inputs, outputs;  // in signature order
  std::vector<const v1::TensorSpec*> input_specs, output_specs;
  std::vector<std::vector<int64_t>> input_shapes, output_shapes;
  std::vector<int64_t> symbol_values;  // storage for int64_t params
  std::vector<void*> args;
  std::vector<int64_t> arg_bytes;  // per arg: the tensor's bytes, -1 for a symbol
  SymbolValues symbols;            // the binding's, for inputs whose bounds follow it
};

// Resolves the shapes of `params` at `binding` and allocates their buffers
// into `f` (inputs unfilled, outputs unpoisoned). Fails with kExitInfra when
// the binding lacks a symbol or a shape does not resolve.
template <typename BufferT>
void AllocateCallArgs(const std::vector<Param>& params, const v1::Binding& binding, CallArgs<BufferT>& f) {
  f.symbols = BindingValues(binding);
  f.symbol_values.reserve(params.size());  // args point into it
  for (const Param& p : params) {
    if (p.kind == ParamKind::kSymbol) {
      auto it = f.symbols.find(p.name);
      if (it == f.symbols.end()) {
        Fail(kExitInfra, "error", absl::StrCat("binding ", binding.name(), " has no value for ", p.name));
      }
      f.symbol_values.push_back(it->second);
      f.args.push_back(&f.symbol_values.back());
      f.arg_bytes.push_back(-1);
      continue;
    }
    auto shape = ResolveShape(*p.spec, f.symbols);
    if (!shape.ok()) Fail(kExitInfra, "error", shape.status().message());
    const size_t bytes = static_cast<size_t>(NumElements(*shape)) * DTypeSize(p.spec->dtype());
    auto buffer = std::make_unique<BufferT>(bytes);
    f.args.push_back(buffer->data());
    f.arg_bytes.push_back(static_cast<int64_t>(bytes));
    if (p.kind == ParamKind::kInput) {
      f.inputs.push_back(std::move(buffer));
      f.input_specs.push_back(p.spec);
      f.input_shapes.push_back(*shape);
    } else {
      f.outputs.push_back(std::move(buffer));
      f.output_specs.push_back(p.spec);
      f.output_shapes.push_back(*shape);
    }
  }
}

// Runs `fn` (a call into candidate or baseline code); an exception that
// escapes it ends the runner with a report (bad_alloc: kExitResourceExhausted,
// anything else: kExitCandidateException).
template <typename Fn>
void Guarded(Fn&& fn) {
  try {
    fn();
  } catch (const std::bad_alloc& e) {
    Fail(kExitResourceExhausted, "bad_alloc", e.what());
  } catch (const std::exception& e) {
    Fail(kExitCandidateException, "exception", e.what());
  } catch (...) {
    Fail(kExitCandidateException, "exception", "a non-std exception");
  }
}

// The run mode: every validation binding x seed in order, each case made by
// `run_case` (the two calls on the same inputs, its first call's outputs
// written to the outputs file, report's modified_input, overflowed and
// nondet_* filled; binding and seed are set before), then the cases' JSON
// written to `result_fd`. Fails with kExitInfra when the task's parameters do
// not classify. Returns kExitOk.
int RunValidationCases(const v1::Task& task, const std::vector<uint64_t>& seeds, int result_fd,
                       const std::function<void(const std::vector<Param>& params, const v1::Binding& binding,
                                                CaseReport& report)>& run_case);

// Compares output `spec`'s bytes from a case's first call and its second
// (same inputs, fresh poisoned outputs): where they differ, and report has no
// nondeterministic output yet, names it and the first differing element.
void NoteNondeterminism(const v1::TensorSpec& spec, std::string_view first, std::string_view second,
                        CaseReport& report);

// The profile mode's sampling: rounds of one candidate sample and one
// baseline sample (`sample_baseline` null: none), in alternating order so
// neither always runs first, each appending its time to report. From 10
// candidate samples on, every 5th (and every round past the cap) checks
// whether both series' spreads are under `target_spread` (converged). Ends
// there, or past `time_cap_s` after `start` (Now()) with at least
// kTimedChecks candidate samples, or at 20,000. Both series are summarised
// and report.elapsed_s set.
void SampleUntilStable(double start, double time_cap_s, double target_spread, ProfileReport& report,
                       const std::function<void()>& sample_candidate, const std::function<void()>& sample_baseline);

// A timed sample of the candidate kept for the worker's check: the pokes its
// inputs held; its outputs are kept by the runner, at index `slot`.
struct KeptSample {
  int64_t sample = -1;  // -1: the slot was never filled
  std::vector<Poke> pokes;
  size_t slot = 0;
};
// kTimedChecks empty slots, numbered.
std::vector<KeptSample> KeptSampleSlots(int count = kTimedChecks);
// After candidate sample number report.candidate.samples_s.size() - 1 was
// taken with `pokes` in its inputs: the slot it replaces, filled with the
// sample and its pokes (the caller copies the call's outputs into that
// slot), or null when it is not kept (TimedCheckSlotFor).
KeptSample* KeepSample(std::vector<KeptSample>& kept, const ProfileReport& report, const std::vector<Poke>& pokes,
                       SecretRng& rng);
// The timed-check records the worker reads after the check after timing,
// earliest sample first: for each kept sample, its pokes are written through
// `baseline_inputs`, `check(slot)` writes the slot's kept outputs and then
// runs the baseline and writes its outputs, and the pokes are undone. The
// samples are appended to report.timed_checks.
void WriteTimedChecks(std::vector<KeptSample>& kept, const PokeAccess& baseline_inputs,
                      const std::vector<const v1::TensorSpec*>& input_specs, ProfileReport& report,
                      const std::function<void(size_t slot)>& check);

// Reads exactly `bytes` from `fd` into `data`; fails with kExitInfra ("the
// timed-inputs file is shorter than the inputs") when it ends first.
void ReadTimedInputBytes(int fd, void* data, size_t bytes);

}  // namespace kevo::runner
