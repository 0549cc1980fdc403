#!/usr/bin/python3
"""kevo-runner-kernelbench: runs KernelBench-format problems and candidates.

A KernelBench problem is a Python file defining `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`; a candidate is a Python file defining
`class ModelNew(nn.Module)` with the same constructor and forward signature
(plain PyTorch, or C++/CUDA through torch.utils.cpp_extension.load_inline).
The worker (trusted, C++) starts this script inside its sandbox; the script
never judges correctness itself. It writes raw output bytes and a JSON report,
and the worker compares a candidate's outputs with the outputs that a separate
run of the problem's Model wrote (so a candidate can neither see nor reuse the
reference's results). docs/kernelbench.md is the full contract; in short:

  kevo-runner-kernelbench run --problem=P.py [--candidate=C.py] --seeds=1,2,3
      --device=cpu|cuda --outputs=O.bin --result=R.json [--phase=F]
      [--compile_timeout_s=60] [--run_timeout_s=60]
  kevo-runner-kernelbench profile --problem=P.py --candidate=C.py
      --device=cpu|cuda --result=R.json [--phase=F] [--time_cap_s=3]
      [--baselines=eager,compile] [--compile_timeout_s=60] [--run_timeout_s=60]
      [--torch_compile_timeout_s=120]
  kevo-runner-kernelbench compile --problem=P.py --candidate=C.py --result=R.json
  kevo-runner-kernelbench probe --device=cpu|cuda --result=R.json

--device=cuda:N runs on GPU N (cuda is cuda:0).

run: without --candidate the problem's Model is evaluated (golden outputs),
  with it the candidate's ModelNew. For every seed: init inputs, the model and
  the inputs are drawn from seeded RNGs (the same on every run), the inputs are
  hashed, the allocator is poisoned with NaN, the model is called, the inputs
  are hashed again (modified_input), it is called a second time and both
  results must agree bitwise (nondet_output). The first call's outputs go to O
  (raw bytes, contiguous, case after case) and their layout to R.
profile: Model (PyTorch eager, and torch.compile where this torch has it) and
  ModelNew are built with the same init inputs and timed interleaved in this
  process, input copies rotated so that the working set exceeds the caches (on
  CUDA one call per sample between CUDA events, after a device-wide
  synchronisation and an L2 flush), until every series' spread is under 1% or
  the time cap; medians and spreads go to R. torch.compile gets
  torch_compile_timeout_s to compile and warm up; past it, or when it fails,
  it is dropped with a note ("torch.compile unavailable: ...") instead of
  failing the evaluation.
compile: imports the candidate only (where a module-level load_inline builds),
  without touching the device, so that a GPU worker compiles ahead of the GPU.
probe: what this interpreter offers: Python, torch (and its CUDA), Triton,
  torch.compile, the devices; INFRA_ERROR when torch is missing or, for cuda,
  is a CPU-only build or sees no GPU.

R always has "status": OK or a kevo EvalStatus name (COMPILE_ERROR,
RUNTIME_ERROR, RESOURCE_EXHAUSTED, INFRA_ERROR) with "message" and "traceback"
(the last lines of the Python traceback). F holds the current phase (import_torch,
import, build, run, baseline, profile, done): when the worker kills the process at its time
limit, or the watchdog below ends it, F says whether it was compiling or
running. Exit status: 0 OK, 2 infrastructure, 4 out of memory, 5 candidate
error (the runner protocol's codes, worker/runner/protocol.h); a watchdog
timeout exits 1 after printing "Timeout (...)" and the stacks on stderr.
"""

import argparse
import faulthandler
import hashlib
import importlib.util
import json
import math
import os
import platform
import random
import signal
import sys
import traceback

# The runner's clock, taken before any candidate is imported: a candidate that
# replaces time.perf_counter changes what it sees, not what the runner times.
# (One that reaches into this module's globals gets times of 0 s, which the
# worker rejects.)
from time import perf_counter as _clock

EXIT_OK = 0
EXIT_INFRA = 2
EXIT_RESOURCE_EXHAUSTED = 4
EXIT_CANDIDATE_ERROR = 5

# Inputs are drawn from seed + this offset, so that a problem whose
# get_init_inputs() and get_inputs() both draw random numbers does not get
# correlated values.
INPUT_SEED_OFFSET = 1000003

# kevo dtype names of the output dtypes the worker can compare.
DTYPE_NAMES = {
    "torch.float32": "F32",
    "torch.float64": "F64",
    "torch.float16": "F16",
    "torch.bfloat16": "BF16",
    "torch.int32": "I32",
    "torch.int64": "I64",
    "torch.uint8": "U8",
    "torch.int8": "I8",
    "torch.bool": "U8",  # compared as bytes 0/1
}

TRACEBACK_LINES = 8


class CandidateError(Exception):
    """A failure to report with a kevo status (the candidate's or the problem's)."""

    def __init__(self, status, message, tb=""):
        super().__init__(message)
        self.status = status
        self.message = message
        self.tb = tb


class Phase:
    """Writes the current phase to a file, so that a killed run can be classified."""

    def __init__(self, path):
        self.path = path
        self.name = "start"

    def set(self, name):
        self.name = name
        if self.path:
            with open(self.path, "w") as f:
                f.write(name + "\n")


def traceback_tail(exc):
    """The last lines of the traceback, without this runner's and importlib's frames."""
    here = os.path.abspath(__file__)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if os.path.abspath(f.filename) != here and not f.filename.startswith("<frozen")
    ]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    tail = "".join(lines).rstrip().splitlines()[-TRACEBACK_LINES:]
    return "\n".join(tail)[-2000:]


def from_cpp_extension(exc):
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.replace("\\", "/").endswith("torch/utils/cpp_extension.py"):
            return True
        tb = tb.tb_next
    return False


def classify(exc, phase, who):
    """The kevo status and one-line message for an exception raised by `who`."""
    tb = traceback_tail(exc)
    last = tb.splitlines()[-1] if tb else type(exc).__name__
    if isinstance(exc, CandidateError):
        return exc
    if isinstance(exc, MemoryError):
        return CandidateError("RESOURCE_EXHAUSTED", f"{who} ran out of memory in {phase}: {last}", tb)
    if isinstance(exc, SyntaxError):
        return CandidateError("COMPILE_ERROR", f"{who} does not parse: {last} (line {exc.lineno})", tb)
    if from_cpp_extension(exc):
        # The compiler's first error says more than ninja's last line.
        text = str(exc).splitlines()
        first = next((line.strip() for line in text if "error:" in line or "error " in line), last)
        return CandidateError("COMPILE_ERROR", f"{who}'s C++/CUDA extension did not build: {first}", tb)
    if phase == "import" and isinstance(exc, ImportError):
        return CandidateError("COMPILE_ERROR", f"{who} imports what this worker lacks: {last}", tb)
    if isinstance(exc, SystemExit):
        return CandidateError("RUNTIME_ERROR", f"{who} called exit({exc.code}) in {phase}", tb)
    return CandidateError("RUNTIME_ERROR", f"{who} raised in {phase}: {last}", tb)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError("INFRA_ERROR", f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_all(torch, seed):
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


def flatten(value, torch, out):
    """The tensors of a model's inputs or outputs, in order (nested lists and tuples flattened)."""
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            flatten(v, torch, out)
    elif isinstance(value, dict):
        for k in sorted(value):
            flatten(value[k], torch, out)
    elif isinstance(value, (bool, int, float)):
        out.append(torch.tensor(value))
    elif value is None:
        pass
    else:
        raise CandidateError("RUNTIME_ERROR", f"returned a {type(value).__name__}, not tensors")
    return out


def to_device(value, torch, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [to_device(v, torch, device) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(v, torch, device) for v in value)
    return value


def tensor_bytes(t, torch):
    c = t.detach().to("cpu").contiguous().reshape(-1)
    if c.dtype == torch.bool:
        c = c.to(torch.uint8)
    if c.dtype.is_complex:
        c = torch.view_as_real(c).reshape(-1)
    return c.view(torch.uint8).numpy().tobytes() if c.numel() else b""


def digest(tensors, torch):
    return [hashlib.sha256(tensor_bytes(t, torch)).hexdigest() for t in tensors]


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def poison(torch, device, nbytes):
    """Leaves NaN in memory the allocator may hand out next (the CUDA caching
    allocator does; on the CPU large blocks go back to the OS), so that an
    output the candidate never writes is not zero or stale by luck."""
    n = max(1, min(nbytes, 1 << 30) // 4)
    p = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    synchronize(torch, device)
    del p


class Problem:
    def __init__(self, torch, args, phase):
        self.torch = torch
        self.device = args.device
        self.phase = phase
        self.problem = load_module(args.problem, "kevo_problem")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.problem, name):
                raise CandidateError("INFRA_ERROR", f"the problem {args.problem} defines no {name}")

    def init_inputs(self, seed):
        seed_all(self.torch, seed)
        return to_device(list(self.problem.get_init_inputs()), self.torch, "cpu")

    def build(self, cls, seed, init_inputs):
        seed_all(self.torch, seed)
        model = cls(*init_inputs)
        if isinstance(model, self.torch.nn.Module):
            model = model.to(self.device)
        return model

    def inputs(self, seed):
        seed_all(self.torch, seed + INPUT_SEED_OFFSET)
        return to_device(list(self.problem.get_inputs()), self.torch, self.device)


def output_layout(tensors, torch, offset):
    layout = []
    for i, t in enumerate(tensors):
        name = DTYPE_NAMES.get(str(t.dtype))
        if name is None:
            raise CandidateError("RUNTIME_ERROR", f"output {i} has dtype {t.dtype}, which kevo cannot compare")
        nbytes = t.numel() * (1 if t.dtype == torch.bool else t.element_size())
        layout.append({"name": f"output{i}", "dtype": name, "shape": list(t.shape), "offset": offset, "bytes": nbytes})
        offset += nbytes
    return layout, offset


def first_difference(a, b, torch):
    """Index of the first element where two equally laid out tensors differ bitwise, or -1."""
    ba, bb = tensor_bytes(a, torch), tensor_bytes(b, torch)
    if ba == bb:
        return -1
    if len(ba) != len(bb):
        return 0
    size = max(1, len(ba) // max(1, a.numel()))
    for i in range(0, len(ba), size):
        if ba[i : i + size] != bb[i : i + size]:
            return i // size
    return 0


def import_candidate(args, phase):
    """The candidate's module, imported under the compile timeout (the
    watchdog stays armed for the first ModelNew's construction); a module
    without ModelNew is COMPILE_ERROR."""
    phase.set("import")
    faulthandler.dump_traceback_later(args.compile_timeout_s, exit=True)
    try:
        candidate = load_module(args.candidate, "kevo_candidate")
    except BaseException as e:  # noqa: BLE001 - SystemExit included
        raise classify(e, "import", "the candidate") from None
    if not hasattr(candidate, "ModelNew"):
        raise CandidateError("COMPILE_ERROR", "the candidate defines no class ModelNew")
    return candidate


def run_mode(torch, args, phase, result):
    problem = Problem(torch, args, phase)
    who = "the candidate" if args.candidate else "the problem's Model"
    cls = problem.problem.Model
    if args.candidate:
        cls = import_candidate(args, phase).ModelNew
    seeds = [int(s) for s in args.seeds.split(",") if s]
    cases = []
    offset = 0
    expected = 0
    with open(args.outputs, "wb") as out_file:
        for n, seed in enumerate(seeds):
            # The first model's construction may build a load_inline extension.
            phase.set("build" if n == 0 else "run")
            if n == 0:
                faulthandler.dump_traceback_later(args.compile_timeout_s, exit=True)
            try:
                init_inputs = problem.init_inputs(seed)
                model = problem.build(cls, seed, init_inputs)
            except BaseException as e:  # noqa: BLE001
                raise classify(e, "__init__", who) from None
            phase.set("run")
            faulthandler.dump_traceback_later(args.run_timeout_s, exit=True)
            case = {"seed": seed, "modified_input": "", "nondet_output": "", "nondet_index": -1}
            try:
                inputs = problem.inputs(seed)
            except BaseException as e:  # noqa: BLE001
                raise CandidateError("INFRA_ERROR", f"the problem's get_inputs() failed: {e}", traceback_tail(e)) from None
            in_tensors = flatten(inputs, torch, [])
            before = digest(in_tensors, torch)
            in_bytes = sum(t.numel() * t.element_size() for t in in_tensors)
            try:
                with torch.no_grad():
                    poison(torch, problem.device, expected or 2 * in_bytes)
                    first = flatten(model(*inputs), torch, [])
                    synchronize(torch, problem.device)
                    after = digest(in_tensors, torch)
                    first_bytes = [tensor_bytes(t, torch) for t in first]
                    expected = sum(len(b) for b in first_bytes)
                    for i, (b, a) in enumerate(zip(before, after)):
                        if b != a:
                            case["modified_input"] = f"input{i}"
                            break
                    # The second call gets inputs restored to their original
                    # values, so only the candidate's own nondeterminism shows.
                    if case["modified_input"]:
                        inputs = problem.inputs(seed)
                    poison(torch, problem.device, expected)
                    second = flatten(model(*inputs), torch, [])
                    synchronize(torch, problem.device)
            except CandidateError:
                raise
            except BaseException as e:  # noqa: BLE001
                raise classify(e, "forward", who) from None
            if len(second) != len(first):
                case["nondet_output"] = f"output{len(first) if len(second) > len(first) else len(second)}"
                case["nondet_index"] = 0
            else:
                for i, (a, b) in enumerate(zip(first, second)):
                    if a.shape != b.shape or a.dtype != b.dtype:
                        index = 0
                    else:
                        index = first_difference(a, b, torch)
                    if index >= 0:
                        case["nondet_output"] = f"output{i}"
                        case["nondet_index"] = index
                        break
            layout, offset = output_layout(first, torch, offset)
            case["outputs"] = layout
            for b in first_bytes:
                out_file.write(b)
            cases.append(case)
            del model, inputs, first, second
    faulthandler.cancel_dump_traceback_later()
    result["cases"] = cases


class Series:
    def __init__(self, name, model, threads):
        self.name = name
        self.model = model
        self.threads = threads
        self.samples = []
        self.calls = 1
        self.escaped = 0  # CUDA samples timed to the device-wide sync

    def summary(self):
        s = sorted(self.samples)
        if not s:
            return {"samples_s": [], "median_s": 0.0, "spread": 0.0, "calls_per_sample": self.calls}

        def q(p):
            x = p * (len(s) - 1)
            lo = math.floor(x)
            hi = min(lo + 1, len(s) - 1)
            return s[lo] + (s[hi] - s[lo]) * (x - lo)

        median = q(0.5)
        spread = (q(0.75) - q(0.25)) / median if median > 0 else 0.0
        return {"samples_s": self.samples, "median_s": median, "spread": spread, "calls_per_sample": self.calls}

    def spread(self):
        return self.summary()["spread"] if len(self.samples) >= 3 else float("inf")


class AlarmTimeout(Exception):
    pass


class Alarm:
    """Raises AlarmTimeout in the main thread after `seconds` (0: never)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds > 0:
            def fire(signum, frame):
                raise AlarmTimeout()

            self.previous = signal.signal(signal.SIGALRM, fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def last_line(exc):
    tail = traceback_tail(exc).splitlines()
    return tail[-1] if tail else type(exc).__name__


class CudaSampler:
    """One CUDA sample, as kevo-runner-cuda takes them: the whole device
    synchronised, L2 flushed by reading a buffer twice its size (reading
    leaves clean lines, so the timed call pays for no one else's write-back),
    then, without waiting for the flush, an event on the current (default)
    stream, the call, an event; the start event and the call's kernels queue
    behind the flush, so the events time the GPU's work rather than the
    host's launch latency. After the stop event the device is synchronised
    again: work still running then (launched on a side stream that the
    default stream does not wait for) is counted, the sample being the event
    time plus that wait."""

    ESCAPE_S = 20e-6

    def __init__(self, torch):
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        self.flush = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
        self.flush_bytes = self.flush.numel() * 4
        self.begin = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def sample(self, series, fn):
        torch = self.torch
        torch.cuda.synchronize()
        torch.sum(self.flush)
        self.begin.record()
        fn()
        self.end.record()
        self.end.synchronize()
        stopped = _clock()
        torch.cuda.synchronize()
        waited = _clock() - stopped
        event_s = self.begin.elapsed_time(self.end) / 1e3
        if waited > self.ESCAPE_S and waited > 0.2 * event_s:
            series.escaped += 1
            return event_s + waited
        return event_s


class GlobalFlags:
    """PyTorch's process-wide settings that a candidate may change (thread
    count, TF32, cuDNN autotuning): each timed series runs under the settings
    it had when it was built, so a candidate's choices do not leak into the
    baselines' samples."""

    def __init__(self, torch):
        self.torch = torch

    def capture(self):
        t = self.torch
        flags = {"threads": t.get_num_threads()}
        if t.cuda.is_available():
            flags["matmul_tf32"] = t.backends.cuda.matmul.allow_tf32
            flags["cudnn_tf32"] = t.backends.cudnn.allow_tf32
            flags["cudnn_benchmark"] = t.backends.cudnn.benchmark
        return flags

    def apply(self, flags):
        t = self.torch
        if t.get_num_threads() != flags["threads"]:
            t.set_num_threads(flags["threads"])
        if "matmul_tf32" in flags:
            t.backends.cuda.matmul.allow_tf32 = flags["matmul_tf32"]
            t.backends.cudnn.allow_tf32 = flags["cudnn_tf32"]
            t.backends.cudnn.benchmark = flags["cudnn_benchmark"]


def profile_mode(torch, args, phase, result):
    problem = Problem(torch, args, phase)
    device = problem.device
    flags = GlobalFlags(torch)
    base_flags = flags.capture()
    seed = 1
    notes = {}
    candidate = import_candidate(args, phase)
    phase.set("build")
    init_inputs = problem.init_inputs(seed)
    try:
        cand_model = problem.build(candidate.ModelNew, seed, init_inputs)
    except BaseException as e:  # noqa: BLE001
        raise classify(e, "__init__", "the candidate") from None
    cand_flags = flags.capture()
    flags.apply(base_flags)
    series = [Series("candidate", cand_model, cand_flags)]
    wanted = [b for b in args.baselines.split(",") if b]
    if "eager" in wanted:
        series.append(Series("eager", problem.build(problem.problem.Model, seed, init_inputs), base_flags))
    if "compile" in wanted:
        if not hasattr(torch, "compile"):
            notes["torch_compile"] = f"torch.compile unavailable: torch {torch.__version__} has no torch.compile (it arrived in torch 2.0)"
        else:
            try:
                compiled = torch.compile(problem.build(problem.problem.Model, seed, init_inputs))
                series.append(Series("torch_compile", compiled, base_flags))
            except Exception as e:  # noqa: BLE001
                notes["torch_compile"] = f"torch.compile unavailable: it failed: {last_line(e)}"

    inputs = problem.inputs(seed)
    in_tensors = flatten(inputs, torch, [])
    in_bytes = sum(t.numel() * t.element_size() for t in in_tensors)
    # Copies of the inputs, rotated so the working set exceeds the last-level
    # cache (64 MiB) on the CPU; on CUDA the L2 is flushed instead.
    working_set = 64 << 20
    copies = 1 if device == "cuda" else max(1, min(64, math.ceil(working_set / max(1, in_bytes))))
    input_sets = [inputs] + [[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs] for _ in range(copies - 1)]
    before = [digest(flatten(s, torch, []), torch) for s in input_sets]
    timer = CudaSampler(torch) if device == "cuda" else None

    def call(s, n, start):
        for i in range(n):
            s.model(*input_sets[(start + i) % copies])

    # Warm-up: the first calls build extensions, trace, compile, autotune;
    # each series gets the compile timeout for it. A baseline that hangs here
    # (torch.compile) is the worker's problem, not the candidate's: phase
    # "baseline".
    with torch.no_grad():
        for s in list(series):
            phase.set("build" if s.name == "candidate" else "baseline")
            compiling = s.name == "torch_compile"
            # torch.compile gets its own cap, enforced in-process (an alarm
            # that raises), with the watchdog as the backstop for a compiler
            # stuck outside Python.
            cap = args.torch_compile_timeout_s if compiling else args.compile_timeout_s
            faulthandler.dump_traceback_later(cap + (60 if compiling else 0), exit=True)
            flags.apply(s.threads)
            t0 = _clock()
            try:
                with Alarm(cap if compiling else 0):
                    call(s, 2, 0)
                    synchronize(torch, device)
            except BaseException as e:  # noqa: BLE001
                if s.name == "candidate":
                    raise classify(e, "forward", "the candidate") from None
                if compiling:
                    why = (f"did not compile and warm up within {cap:g} s" if isinstance(e, AlarmTimeout)
                           else f"it failed: {last_line(e)}")
                    notes["torch_compile"] = f"torch.compile unavailable: {why}"
                    series.remove(s)
                    synchronize(torch, device)
                    continue
                raise CandidateError("INFRA_ERROR", f"the problem's Model failed: {e}", traceback_tail(e)) from None
            if s.name == "torch_compile":
                result["torch_compile_warmup_s"] = _clock() - t0
            # Enough calls per sample that a sample lasts about a millisecond
            # (on CUDA one call per sample, between L2 flushes). The fastest
            # of five single calls: a busy host preempting one of them must
            # not leave this series with fewer calls per sample (and so a
            # different exposure to preemption) than the others.
            one = float("inf")
            for i in range(5):
                t0 = _clock()
                call(s, 1, i)
                synchronize(torch, device)
                one = min(one, _clock() - t0)
            s.calls = max(1, min(1000, math.ceil(1e-3 / max(one, 1e-9)))) if device != "cuda" else 1

    phase.set("profile")
    faulthandler.dump_traceback_later(args.run_timeout_s + 3 * args.time_cap_s + 30, exit=True)
    start = _clock()
    converged = False
    rounds = 0
    position = 0
    with torch.no_grad():
        while True:
            order = series[rounds % len(series):] + series[: rounds % len(series)]
            for s in order:
                flags.apply(s.threads)
                if timer is not None:
                    s.samples.append(timer.sample(s, lambda: call(s, s.calls, position)) / s.calls)
                else:
                    t0 = _clock()
                    call(s, s.calls, position)
                    synchronize(torch, device)
                    s.samples.append((_clock() - t0) / s.calls)
                position += s.calls
            rounds += 1
            elapsed = _clock() - start
            if rounds >= args.min_samples and all(s.spread() <= args.target_spread for s in series):
                converged = True
                break
            if elapsed >= args.time_cap_s and rounds >= 3:
                break
    flags.apply(base_flags)
    synchronize(torch, device)
    after = [digest(flatten(s, torch, []), torch) for s in input_sets]
    result["modified_input"] = ""
    for b_set, a_set in zip(before, after):
        for i, (b, a) in enumerate(zip(b_set, a_set)):
            if b != a and not result["modified_input"]:
                result["modified_input"] = f"input{i}"
    faulthandler.cancel_dump_traceback_later()
    result["series"] = {s.name: s.summary() for s in series}
    result["threads"] = {"candidate": cand_flags["threads"], "baseline": base_flags["threads"]}
    result["copies"] = copies
    if timer is not None:
        result["escaped_samples"] = {s.name: s.escaped for s in series}
        result["l2_flush_bytes"] = timer.flush_bytes
    result["working_set_bytes"] = copies * in_bytes
    result["converged"] = converged
    result["elapsed_s"] = _clock() - start
    result["notes"] = notes


def cuda_unavailable(torch):
    """Why this torch cannot run on a CUDA GPU, or ""."""
    if getattr(torch.version, "cuda", None) is None:
        return (f"torch {torch.__version__} at {os.path.dirname(torch.__file__)} is a CPU-only build "
                f"(torch.version.cuda is None): it cannot run KernelBench problems on a GPU")
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device"
    return ""


def probe_mode(torch, args, result):
    """What this interpreter offers for `args.device`."""
    result["executable"] = sys.executable
    result["prefixes"] = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    result["torch_dir"] = os.path.realpath(os.path.dirname(torch.__file__))
    result["torch_cuda"] = getattr(torch.version, "cuda", None) or ""
    try:
        import triton

        result["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001 - any failure means no Triton
        result["triton"] = ""
        result["triton_missing"] = f"{type(e).__name__}: {e}"[:200]
    if args.device == "cuda":
        why = cuda_unavailable(torch)
        if why:
            result.update(status="INFRA_ERROR", message=why)
            return
        result["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        result["device_name"] = result["devices"][0]


def compile_mode(torch, args, phase, result):
    """Imports the candidate (a module-level load_inline builds here) and
    checks that it defines ModelNew; never touches the device."""
    import_candidate(args, phase)
    faulthandler.cancel_dump_traceback_later()


def main():
    parser = argparse.ArgumentParser(prog="kevo-runner-kernelbench", description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["run", "profile", "compile", "probe"])
    parser.add_argument("--problem", default="")
    parser.add_argument("--candidate", default="")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--outputs", default="")
    parser.add_argument("--result", required=True)
    parser.add_argument("--phase", default="")
    parser.add_argument("--compile_timeout_s", type=float, default=60)
    parser.add_argument("--run_timeout_s", type=float, default=60)
    parser.add_argument("--time_cap_s", type=float, default=3)
    parser.add_argument("--min_samples", type=int, default=10)
    parser.add_argument("--target_spread", type=float, default=0.01)
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--torch_compile_timeout_s", type=float, default=120)
    args = parser.parse_args()
    if args.mode != "probe" and not args.problem:
        parser.error(f"{args.mode} needs --problem")
    if args.mode == "run" and not args.outputs:
        parser.error("run needs --outputs")
    if args.mode in ("profile", "compile") and not args.candidate:
        parser.error(f"{args.mode} needs --candidate")
    gpu = 0
    if args.device.startswith("cuda:") and args.device[5:].isdigit():
        gpu = int(args.device[5:])
        args.device = "cuda"
    elif args.device not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu, cuda or cuda:N, not {args.device!r}")

    # load_inline builds into a folder the sandbox lets it write; nothing in
    # the user's home is read or written.
    scratch = os.path.dirname(os.path.abspath(args.result))
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(scratch, "torch_extensions"))
    os.environ.setdefault("HOME", scratch)
    os.environ.setdefault("XDG_CACHE_HOME", os.path.join(scratch, "cache"))
    os.environ.setdefault("TMPDIR", scratch)
    # torch.compile's and Triton's caches, in the same folder.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(scratch, "inductor"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(scratch, "triton"))
    faulthandler.enable()

    phase = Phase(args.phase)
    result = {"mode": args.mode, "status": "OK", "message": "", "traceback": "", "device": args.device,
              "python": platform.python_version()}

    def finish(code):
        result["phase"] = phase.name
        with open(args.result + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(args.result + ".tmp", args.result)
        sys.stdout.flush()
        os._exit(code)  # skip interpreter teardown: candidate threads or atexit hooks

    phase.set("import_torch")
    try:
        import torch
    except BaseException as e:  # noqa: BLE001
        result.update(status="INFRA_ERROR", message=f"cannot import torch with {sys.executable}: {e}")
        finish(EXIT_INFRA)
    result["torch"] = torch.__version__
    result["torch_compile_available"] = hasattr(torch, "compile")
    if args.mode == "probe":
        probe_mode(torch, args, result)
        if result["status"] != "OK":
            finish(EXIT_INFRA)
        phase.set("done")
        finish(EXIT_OK)
    # compile never touches the device: a GPU worker runs it while another
    # candidate is timed.
    if args.device == "cuda" and args.mode != "compile":
        why = cuda_unavailable(torch)
        if why:
            result.update(status="INFRA_ERROR", message=why)
            finish(EXIT_INFRA)
        if gpu >= torch.cuda.device_count():
            result.update(status="INFRA_ERROR", message=f"no GPU {gpu}: torch sees {torch.cuda.device_count()}")
            finish(EXIT_INFRA)
        torch.cuda.set_device(gpu)
        result["device_name"] = torch.cuda.get_device_name(gpu)
    elif args.device == "cpu":
        result["device_name"] = platform.processor() or platform.machine()
    t0 = _clock()
    try:
        {"run": run_mode, "profile": profile_mode, "compile": compile_mode}[args.mode](torch, args, phase, result)
    except BaseException as e:  # noqa: BLE001
        err = classify(e, phase.name, "the runner")
        result.update(status=err.status, message=err.message, traceback=err.tb)
        code = {"INFRA_ERROR": EXIT_INFRA, "RESOURCE_EXHAUSTED": EXIT_RESOURCE_EXHAUSTED}.get(err.status, EXIT_CANDIDATE_ERROR)
        finish(code)
    result["seconds"] = _clock() - t0
    phase.set("done")
    finish(EXIT_OK)


if __name__ == "__main__":
    main()
