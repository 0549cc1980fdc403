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
  kevo-runner-kernelbench capture --problem=P.py --result=R.json

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
capture: the problem's Model as an operator graph (torch.fx, shapes and dtypes
  from a run on meta tensors) in R's "graph", for the built-in proposer's
  bridge recipes (docs/kernelbench.md, "Bridge").
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
import contextlib
import ctypes
import faulthandler
import importlib.util
import json
import math
import mmap
import os
import platform
import random
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
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


def out_of_memory(exc):
    """MemoryError, an allocation the OS refused, or PyTorch's own out-of-memory errors."""
    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == 12:  # ENOMEM
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


class ProblemTooLarge(CandidateError):
    """The problem itself does not fit this worker (not the candidate's fault)."""

    def __init__(self, what, nbytes=0, exc=None):
        """`what` ran out of memory (raising `exc`), or, without `exc`,
        `what` says why the problem cannot fit."""
        if exc is None:
            super().__init__("RESOURCE_EXHAUSTED", f"the problem does not fit this worker: {what}")
            return
        size = (f" ({nbytes / 2**30:.2f} GiB of inputs, which the judge keeps about {JUDGE_COPIES} copies of)"
                if nbytes else "")
        super().__init__("RESOURCE_EXHAUSTED", f"the problem does not fit this worker: {what}{size} ran out of "
                         f"memory: {last_line(exc)}")


def classify(exc, phase, who):
    """The kevo status and one-line message for an exception raised by `who`."""
    tb = traceback_tail(exc)
    last = tb.splitlines()[-1] if tb else type(exc).__name__
    if isinstance(exc, CandidateError):
        return exc
    if out_of_memory(exc):
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


def strict_json(value):
    """`value` with every non-finite float written as a string ("inf", "nan"):
    JSON has no Infinity or NaN, and the worker's parser rejects them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def seed_all(torch, seed):
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


# About how many copies of the inputs' size an evaluation holds at its peak:
# the shared inputs, the fresh ones they are refilled from, and the
# reference's and the candidate's outputs (most problems' outputs are no
# larger than their inputs).
JUDGE_COPIES = 4

# Problems whose eager call is shorter than half of SAMPLE_TARGET_S are timed
# several calls to a sample, each on its own input set (docs/kernelbench.md,
# "Calls per sample"): the candidate's path to the judge (a context switch on
# the GPU, the reply) is paid once a sample, so what is taken out for it
# weighs a K-th as much. At most MAX_CALLS_PER_SAMPLE calls, and the extra
# sets' inputs and outputs within SETS_BYTES.
SAMPLE_TARGET_S = 4e-3
MAX_CALLS_PER_SAMPLE = 16
SETS_BYTES = 256 << 20

META_FACTORIES = ("randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange",
                  "linspace", "eye", "tensor")


@contextlib.contextmanager
def meta_factories(torch):
    """Tensors created inside are meta tensors (shapes and dtypes, no
    storage): torch.device("meta") as a context where torch has it (>= 2),
    else torch's factory functions with device="meta" by default."""
    if hasattr(torch.device("cpu"), "__enter__"):
        with torch.device("meta"):
            yield
        return
    saved = {name: getattr(torch, name) for name in META_FACTORIES if hasattr(torch, name)}

    def on_meta(fn):
        def call(*args, **kwargs):
            if kwargs.get("device") is None:  # nn.Linear passes device=None
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)
        return call

    try:
        for name, fn in saved.items():
            setattr(torch, name, on_meta(fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


def usable_memory(torch, device):
    """Bytes an evaluation may still allocate on `device`, and how to say
    where they are: the GPU's free memory, or on the CPU the host's available
    memory capped by this process's address-space limit (RLIMIT_AS, which
    the worker's sandbox sets)."""
    if device == "cuda":
        return torch.cuda.mem_get_info()[0], "the GPU has free"
    free = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    where = "this host has available"
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        used = 0
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
        # The candidate's process has a limit of its own, as large.
        if soft - used < free:
            free, where = max(soft - used, 0), "the worker's memory limit leaves"
    return free, where


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


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


class Problem:
    """The problem's module and how its models and inputs are made: init
    inputs, weights and inputs come from seeded RNGs, the same on every run."""

    def __init__(self, torch, args):
        self.torch = torch
        self.device = args.device
        self.problem = load_module(args.problem, "kevo_problem")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.problem, name):
                raise CandidateError("INFRA_ERROR", f"the problem {args.problem} defines no {name}")

    def init_inputs(self, seed):
        seed_all(self.torch, seed)
        return to_device(list(self.problem.get_init_inputs()), self.torch, "cpu")

    def build(self, cls, seed):
        init_inputs = self.init_inputs(seed)
        seed_all(self.torch, seed)
        model = cls(*init_inputs)
        if isinstance(model, self.torch.nn.Module):
            model = model.to(self.device)
        return model

    def inputs(self, seed):
        """get_inputs() for `seed`, made on the device where this torch can
        (torch.device as a context, torch >= 2.0), so that gigabyte inputs are
        not drawn on the host and copied."""
        torch = self.torch
        seed_all(torch, seed + INPUT_SEED_OFFSET)
        if self.device == "cuda" and hasattr(torch.device("cpu"), "__enter__"):
            with torch.device("cuda"):
                value = list(self.problem.get_inputs())
        else:
            value = list(self.problem.get_inputs())
        return to_device(value, torch, self.device)


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


# ---------------------------------------------------------------------------
# Sharing tensors between the judge and the candidate's process.
#
# CPU: an input lives in a memfd that both map (a candidate that writes to
# it is seen doing so: INPUT_MODIFIED); the judge reads the candidate's outputs out of its address space with
# process_vm_readv (it is the candidate's parent; the candidate is stopped).
# CUDA: the CUDA driver's IPC handles, through ctypes: the judge exports its
# input buffers, the candidate exports the allocations its outputs live in,
# each side opening the other's once per allocation.

def torch_dtype(torch, name):
    value = getattr(torch, name.replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise CandidateError("RUNTIME_ERROR", f"unknown dtype {name!r}")
    return value


def element_size(torch, dtype):
    return torch.empty((), dtype=dtype).element_size()


def extent_bytes(shape, strides, itemsize):
    """Bytes from a strided tensor's first element to past its last."""
    if any(n == 0 for n in shape):
        return 0
    if any(s < 0 for s in strides):
        raise CandidateError("RUNTIME_ERROR", "an output has a negative stride")
    return (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize


class CudaIpc:
    """The CUDA driver's IPC calls, and the handles opened so far."""

    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_ubyte * 64)]

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

        def fn(*names):
            for n in names:
                if hasattr(self.lib, n):
                    f = getattr(self.lib, n)
                    f.restype = ctypes.c_int
                    return f
            raise CandidateError("INFRA_ERROR", f"libcuda has no {names[0]}")

        self.get_handle = fn("cuIpcGetMemHandle")
        self.open_handle = fn("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
        self.open_handle.argtypes = [ctypes.POINTER(ctypes.c_uint64), CudaIpc.Handle, ctypes.c_uint]
        self.address_range = fn("cuMemGetAddressRange_v2", "cuMemGetAddressRange")
        self.exported = {}  # allocation base -> (hex handle, size)
        self.opened = {}  # hex handle -> (device pointer, size)

    def check(self, code, what):
        if code != 0:
            raise CandidateError("RUNTIME_ERROR", f"{what} failed (CUDA driver error {code})")

    def allocation(self, ptr):
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(self.address_range(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
                   "cuMemGetAddressRange")
        return base.value, size.value

    def export(self, ptr):
        """(hex handle of the allocation holding ptr, ptr's offset in it, its size)."""
        base, size = self.allocation(ptr)
        if base not in self.exported:
            h = CudaIpc.Handle()
            self.check(self.get_handle(ctypes.byref(h), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
            self.exported[base] = (bytes(h).hex(), size)
        handle, size = self.exported[base]
        return handle, ptr - base, size

    def open(self, handle_hex):
        """(device pointer, size) of another process's allocation."""
        if handle_hex not in self.opened:
            raw = bytes.fromhex(handle_hex)
            if len(raw) != 64:
                raise CandidateError("RUNTIME_ERROR", "a malformed CUDA IPC handle")
            h = CudaIpc.Handle()
            ctypes.memmove(ctypes.addressof(h), raw, 64)
            ptr = ctypes.c_uint64()
            self.check(self.open_handle(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")
            _, size = self.allocation(ptr.value)
            self.opened[handle_hex] = (ptr.value, size)
        return self.opened[handle_hex]


class CudaBytes:
    """Device memory at a raw pointer, for torch.as_tensor (no copy)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


def view_at(torch, ptr, nbytes, dtype, shape, strides):
    """A tensor over `nbytes` of device memory at `ptr`."""
    raw = torch.as_tensor(CudaBytes(ptr, max(nbytes, 1)), device="cuda")[:nbytes]
    return raw.view(dtype).as_strided(shape, strides)


class RemoteMemory:
    """Reads another process's memory (process_vm_readv)."""

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    def __init__(self, pid):
        self.pid = pid
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.process_vm_readv.restype = ctypes.c_ssize_t

    def read_into(self, address, buffer_ptr, nbytes):
        done = 0
        while done < nbytes:
            local = RemoteMemory.Iovec(buffer_ptr + done, nbytes - done)
            remote = RemoteMemory.Iovec(address + done, nbytes - done)
            n = self.libc.process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            if n <= 0:
                err = ctypes.get_errno()
                raise CandidateError("RUNTIME_ERROR", f"the candidate's output at {address + done:#x} cannot be "
                                     f"read ({os.strerror(err) if err else 'no bytes'}): it is not memory the "
                                     f"candidate's process holds")
            done += n


def describe_inputs(torch, device, tensors, ipc):
    """Shared buffers for `tensors` (the judge's first input set) and the
    message that tells the candidate where they are. Returns (buffers, message,
    fds to pass)."""
    buffers, items, fds = [], [], []
    for i, t in enumerate(tensors):
        nbytes = t.numel() * t.element_size()
        if device == "cuda":
            buf = torch.empty(t.shape, dtype=t.dtype, device="cuda")
            handle, offset, _ = ipc.export(buf.data_ptr()) if nbytes else ("", 0, 0)
            items.append({"dtype": str(t.dtype), "shape": list(t.shape), "handle": handle, "offset": offset})
        else:
            fd = os.memfd_create(f"kevo-input{i}", os.MFD_CLOEXEC)
            os.ftruncate(fd, max(nbytes, 1))
            mem = mmap.mmap(fd, max(nbytes, 1))
            buf = torch.frombuffer(mem, dtype=torch.uint8)[:nbytes].view(t.dtype).view(t.shape)
            buf._kevo_mmap = mem  # keeps the mapping alive with the tensor
            items.append({"dtype": str(t.dtype), "shape": list(t.shape), "fd": len(fds), "bytes": nbytes})
            fds.append(fd)
        buffers.append(buf)
    return buffers, {"op": "inputs", "tensors": items}, fds


def judge_flatten(value, torch, out, layout):
    """flatten() for the judge's inputs, also recording where each tensor
    sits among the arguments, so the candidate rebuilds the same call."""
    if isinstance(value, torch.Tensor):
        layout.append({"tensor": len(out)})
        out.append(value)
    elif isinstance(value, (bool, int, float, str)) or value is None:
        layout.append({"value": value})
    elif isinstance(value, (list, tuple)):
        inner = []
        for v in value:
            judge_flatten(v, torch, out, inner)
        layout.append({"list" if isinstance(value, list) else "tuple": inner})
    else:
        raise CandidateError("INFRA_ERROR", f"get_inputs() returned a {type(value).__name__}, which kevo "
                             "cannot pass to another process")
    return out


def rebuild_arguments(layout, tensors):
    def one(item):
        if "tensor" in item:
            return tensors[item["tensor"]]
        if "value" in item:
            return item["value"]
        if "list" in item:
            return [one(i) for i in item["list"]]
        return tuple(one(i) for i in item["tuple"])

    return [one(i) for i in layout]


# ---------------------------------------------------------------------------
# The candidate's process: `serve`.


class Channel:
    """JSON lines over a Unix socket (with file descriptors on the side).
    Neither side ever unpickles or evaluates what the other sends."""

    MAX_LINE = 1 << 20

    def __init__(self, sock):
        self.sock = sock
        self.pending = b""

    def send(self, message, fds=()):
        data = (json.dumps(message) + "\n").encode()
        if fds:
            socket.send_fds(self.sock, [data[:1]], list(fds))
            data = data[1:]
        self.sock.sendall(data)

    def recv(self, timeout=None, want_fds=0):
        """The next message (a dict), and any file descriptors; None at end of file.
        Raises TimeoutError past `timeout` seconds."""
        deadline = None if timeout is None else _clock() + timeout
        fds = []
        while b"\n" not in self.pending:
            if deadline is not None:
                left = deadline - _clock()
                if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                    raise TimeoutError()
            if want_fds and not fds:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, want_fds)
            else:
                data = self.sock.recv(1 << 16)
            if not data:
                return None, fds
            self.pending += data
            if len(self.pending) > self.MAX_LINE:
                raise CandidateError("RUNTIME_ERROR", "the candidate's process sent more than 1 MiB in one message")
        line, self.pending = self.pending.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise CandidateError("RUNTIME_ERROR", "the candidate's process sent a malformed message") from None
        if not isinstance(message, dict):
            raise CandidateError("RUNTIME_ERROR", "the candidate's process sent a malformed message")
        return message, fds


def describe_outputs(torch, outputs, tensors, ipc):
    """Where a call's outputs are, for the judge: a view of an input names
    it, a CUDA tensor its allocation's IPC handle, a CPU one its address."""
    described = []
    for t in outputs:
        if type(t) is not torch.Tensor:
            raise CandidateError("RUNTIME_ERROR", f"returned a {type(t).__name__}, not a plain torch.Tensor")
        d = {"dtype": str(t.dtype), "shape": list(t.shape), "strides": list(t.stride()), "device": t.device.type}
        alias = next((j for j, x in enumerate(tensors) if x.numel() and x.data_ptr() <= t.data_ptr()
                      < x.data_ptr() + x.numel() * x.element_size()), None)
        if alias is not None:  # a view of an input: the judge reads its own buffer
            d["input"], d["offset"] = alias, t.data_ptr() - tensors[alias].data_ptr()
        elif t.device.type == "cuda" and t.numel():
            d["handle"], d["offset"], d["size"] = ipc.export(t.data_ptr())
        else:
            d["ptr"] = t.data_ptr()
        described.append(d)
    return described


CONTROL_ELEMENTS = 1024


def control_mode(torch, args, phase, result):
    """A trusted stand-in for the candidate's process on a GPU, which never
    runs candidate code: the same requests and replies, a call that fills
    outputs it owns, shaped as the judge asks (the candidate's outputs'
    shapes and dtypes: the judge views and touches as many bytes through
    IPC), synchronises and exports them as the candidate's process exports
    its outputs. The judge times its calls
    through the candidate's path (context switches between the processes on
    the GPU, the reply, the IPC view and touch of the output) and the same
    kernel in its own process; the difference is what the path costs, taken
    out of the candidate's samples."""
    die_with_parent()
    channel = Channel(socket.socket(fileno=args.channel_fd))
    ipc = CudaIpc()
    owned = {}  # (shapes, dtypes) asked for -> the outputs it fills
    synchronize(torch, args.device)
    channel.send({"ok": True, "imported": True})
    calls = 0
    while True:
        message, _ = channel.recv()
        if message is None or message.get("op") == "exit":
            return
        if message.get("op") == "call":
            calls += 1
            try:
                like = control_layout(message.get("like"))
                if like not in owned:
                    owned[like] = control_outputs(torch, like)
            except (torch.cuda.OutOfMemoryError, RuntimeError, TypeError, ValueError) as e:
                channel.send({"ok": False, "status": "RUNTIME_ERROR", "message": f"control outputs: {e}"})
                continue
            with torch.no_grad():
                gpu_sleep(torch, int(message.get("sleep_cycles") or 0))
                outputs = flatten([t.fill_(float(calls)) for t in owned[like]], torch, [])
                synchronize(torch, args.device)
            channel.send({"ok": True, "outputs": describe_outputs(torch, outputs, [], ipc)})
        else:
            channel.send({"ok": True, "outputs": []})


def gpu_sleep(torch, cycles):
    """Keeps the GPU busy for `cycles` of its clock (nothing when 0)."""
    if cycles > 0:
        torch.cuda._sleep(cycles)


def gpu_sleep_rate(torch):
    """The GPU's clock as torch.cuda._sleep counts it, in cycles a second:
    the faster of three timed sleeps of a million cycles."""
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        gpu_sleep(torch, 1_000_000)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return 1_000_000 / best


def control_layout(like):
    """The outputs a control call fills, as ((shape, dtype name), ...): those
    `like` names (the candidate's outputs), or one small float32 vector."""
    if not like:
        return (((CONTROL_ELEMENTS,), "torch.float32"),)
    return tuple((tuple(int(n) for n in shape), str(dtype)) for shape, dtype in like)


def control_outputs(torch, layout):
    return [torch.zeros(shape, dtype=torch_dtype(torch, dtype), device="cuda") for shape, dtype in layout]


def serve_mode(torch, args, phase, result):
    """The candidate's own process: imports it, builds ModelNew and calls it
    on the judge's inputs when asked, replying where its outputs are. It
    never sees the baselines, the golden outputs or the judge's clock, and
    every call it gets (validated or timed) is the same message."""
    die_with_parent()
    confined = confine_candidate()
    channel = Channel(socket.socket(fileno=args.channel_fd))
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    ipc = CudaIpc() if args.device == "cuda" else None

    def reply_error(e, where):
        err = classify(e, where, "the candidate")
        channel.send({"ok": False, "status": err.status, "message": err.message, "traceback": err.tb})

    try:
        problem = Problem(torch, args)
        candidate = load_module(args.candidate, "kevo_candidate")
        if not hasattr(candidate, "ModelNew"):
            raise CandidateError("COMPILE_ERROR", "the candidate defines no class ModelNew")
    except BaseException as e:  # noqa: BLE001
        reply_error(e, "import")
        return
    channel.send({"ok": True, "imported": True, "confined": confined})
    # tensors holds one or more input sets of `per_set` tensors each (more
    # than one for small problems: docs/kernelbench.md, "Calls per sample");
    # a call runs ModelNew once on every set, and every call is the same.
    model, tensors, per_set, layout, outputs, described = None, [], 0, [], None, []
    while True:
        message, fds = channel.recv(want_fds=16)
        if message is None or message.get("op") == "exit":
            return
        op = message.get("op")
        try:
            if op == "build":
                model = problem.build(candidate.ModelNew, int(message["seed"]))
                synchronize(torch, args.device)
                channel.send({"ok": True, "threads": torch.get_num_threads()})
            elif op == "inputs":
                if not message.get("append"):
                    tensors, per_set = [], len(message["tensors"])
                for item in message["tensors"]:
                    dtype = torch_dtype(torch, item["dtype"])
                    if args.device == "cuda":
                        nbytes = math.prod(item["shape"]) * element_size(torch, dtype)
                        ptr = ipc.open(item["handle"])[0] + item["offset"] if nbytes else 0
                        contiguous = torch.empty(item["shape"], dtype=dtype).stride()
                        tensors.append(view_at(torch, ptr, nbytes, dtype, item["shape"], contiguous)
                                       if nbytes else torch.empty(item["shape"], dtype=dtype, device="cuda"))
                    else:
                        nbytes = item["bytes"]
                        mem = mmap.mmap(fds[item["fd"]], max(nbytes, 1))
                        t = torch.frombuffer(mem, dtype=torch.uint8)[:nbytes].view(dtype).view(item["shape"])
                        t._kevo_mmap = mem
                        tensors.append(t)
                layout = message.get("layout", layout)
                channel.send({"ok": True})
            elif op == "nop":
                # As long as a call's reply, so the round trip it measures is the same.
                channel.send({"ok": True, "outputs": described})
            elif op == "call":
                outputs = None
                with torch.no_grad():
                    calls = []  # every call's outputs stay alive until all are described
                    for g in range(len(tensors) // per_set if per_set else 1):
                        calls.append(flatten(model(*rebuild_arguments(layout, tensors[g * per_set:(g + 1) * per_set])),
                                             torch, []))
                    outputs = [t for call in calls for t in call]
                    synchronize(torch, args.device)
                described = describe_outputs(torch, outputs, tensors, ipc)
                channel.send({"ok": True, "outputs": described})
            else:
                raise CandidateError("INFRA_ERROR", f"unknown request {op!r}")
        except BaseException as e:  # noqa: BLE001
            reply_error(e, "__init__" if op == "build" else "forward")


# ---------------------------------------------------------------------------
# The judge: `evaluate`.


ECHO_CHILD = r"""
import json, socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
pending, outputs = b"", []
while True:
    while b"\n" not in pending:
        data = s.recv(1 << 16)
        if not data:
            sys.exit(0)
        pending += data
    line, pending = pending.split(b"\n", 1)
    message = json.loads(line)
    outputs = message.get("outputs", outputs) if "outputs" in message else outputs
    s.sendall((json.dumps({"ok": True, "outputs": outputs}) + "\n").encode())
"""


def trusted_round_trip(described, rounds=30):
    """The cheapest round trip of a request like the candidate's no-work one
    (a stopped process woken, a JSON line each way, the reply as long as a
    call's), to a small process that never ran candidate code: what the
    candidate's process could slow its no-work replies down to is bounded
    by it, so inflating them cannot buy a shorter time."""
    ours, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-S", "-c", ECHO_CHILD, str(theirs.fileno())],
                             pass_fds=[theirs.fileno()], start_new_session=True)
    theirs.close()
    channel = Channel(ours)
    best = float("inf")
    try:
        channel.send({"op": "nop", "outputs": described})
        channel.recv(30)
        for _ in range(rounds):
            os.kill(child.pid, signal.SIGSTOP)
            os.waitpid(child.pid, os.WUNTRACED)
            os.kill(child.pid, signal.SIGCONT)
            t0 = _clock()
            channel.send({"op": "nop"})
            channel.recv(30)
            best = min(best, _clock() - t0)
    except (OSError, TimeoutError, ValueError):
        return float("inf")
    finally:
        ours.close()
        child.kill()
        child.wait()
    return best


class Series:
    def __init__(self, name, model=None):
        self.name = name
        self.model = model
        self.samples = []
        self.calls = 1

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


def parse_tolerances(text):
    """{"F32": (atol, rtol), ...} from "F32=1e-5,1e-5;F16=..."."""
    out = {}
    for part in filter(None, text.split(";")):
        name, _, values = part.partition("=")
        atol, rtol = (float(v) for v in values.split(","))
        out[name] = (atol, rtol)
    return out


def compare(torch, got, want, tol, name):
    """A case's verdict on one output, as the worker's CompareTensors gives it:
    floats pass within atol + rtol*|want| (NaN where want is NaN, the same
    infinity where want is infinite), integers must be equal. Compared on the
    device in chunks, so gigabyte outputs need no host copies."""
    kind = DTYPE_NAMES[str(want.dtype)]
    atol, rtol = tol.get(kind, (0.0, 0.0))
    g, w = got.contiguous().reshape(-1), want.contiguous().reshape(-1)
    is_float = want.dtype.is_floating_point
    work = torch.float64 if want.dtype == torch.float64 else torch.float32
    verdict = {"ok": True, "nonfinite": False, "max_abs_err": 0.0, "max_rel_err": 0.0, "first_bad_index": -1,
               "bad_count": 0, "count": w.numel()}
    chunk = 1 << 26
    for start in range(0, w.numel(), chunk):
        gc, wc = g[start:start + chunk], w[start:start + chunk]
        if is_float:
            gc, wc = gc.to(work), wc.to(work)
            # The common case first, in few passes: every element within
            # tolerance (NaN, infinities and mismatches fail it and take the
            # full analysis below).
            abs_err = (gc - wc).abs_()
            limit = wc.abs().mul_(rtol).add_(atol)
            if bool((abs_err <= limit).all()):
                verdict["max_abs_err"] = max(verdict["max_abs_err"], float(abs_err.max()) if abs_err.numel() else 0.0)
                if abs_err.numel() and float(abs_err.max()) > atol:
                    rel = abs_err.masked_fill_(abs_err <= atol, 0).div_(wc.abs().clamp_min_(1e-30))
                    verdict["max_rel_err"] = max(verdict["max_rel_err"], float(rel.max()))
                continue
            del abs_err, limit
            w_finite = torch.isfinite(wc)
            g_finite = torch.isfinite(gc)
            abs_err = torch.where(w_finite & g_finite, (gc - wc).abs(), torch.zeros_like(wc))
            bad_finite = w_finite & (~g_finite | (abs_err > atol + rtol * wc.abs()))
            bad_special = ~w_finite & ~(torch.isnan(wc) & torch.isnan(gc)) & (gc != wc)
            bad = bad_finite | bad_special
            if bool((w_finite & ~g_finite).any()):
                verdict["nonfinite"] = True
            verdict["max_abs_err"] = max(verdict["max_abs_err"], float(abs_err.max()) if abs_err.numel() else 0.0)
            rel = torch.where(abs_err > atol, abs_err / wc.abs().clamp_min(1e-30), torch.zeros_like(wc))
            verdict["max_rel_err"] = max(verdict["max_rel_err"], float(rel.max()) if rel.numel() else 0.0)
        else:
            if want.dtype == torch.bool:
                gc, wc = gc.to(torch.uint8), wc.to(torch.uint8)
            bad = gc != wc
            if bool(bad.any()):
                diff = (gc.to(torch.float64) - wc.to(torch.float64)).abs()
                verdict["max_abs_err"] = max(verdict["max_abs_err"], float(diff.max()))
        count = int(bad.sum())
        if count:
            if verdict["first_bad_index"] < 0:
                i = int(bad.nonzero()[0, 0])
                verdict["first_bad_index"] = start + i
                verdict["got"] = float(gc[i])
                verdict["want"] = float(wc[i])
            verdict["bad_count"] += count
            verdict["ok"] = False
    if not verdict["ok"]:
        i = verdict["first_bad_index"]
        verdict["detail"] = (f"{name}[{i}] = {verdict['got']:g}, want {verdict['want']:g}; {verdict['bad_count']} of "
                             f"{verdict['count']} elements outside atol {atol:g} + rtol {rtol:g}"
                             + (" (NaN/Inf where the reference is finite)" if verdict["nonfinite"] else ""))
    return verdict


def differing_output(torch, one, two, tolerances=None):
    """Where two calls' outputs differ, as (output name, first index), or None:
    bitwise, or beyond `tolerances` where they are given (a problem whose own
    Model is not bitwise deterministic on this device: on an H100, KernelBench's
    grouped transposed convolutions)."""
    if len(two) != len(one):
        return (f"output{min(len(one), len(two))}", 0)
    for i, (a, b) in enumerate(zip(one, two)):
        if tolerances is None or a.shape != b.shape or a.dtype != b.dtype:
            index = same_bits(torch, a, b)
        else:
            index = compare(torch, b, a, tolerances, f"output{i}")["first_bad_index"]
        if index >= 0:
            return (f"output{i}", index)
    return None


def same_bits(torch, a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return 0
    a, b = a.contiguous().reshape(-1), b.contiguous().reshape(-1)
    if a.dtype.is_floating_point or a.dtype == torch.bool:
        a = a.view(torch.uint8) if a.dtype == torch.bool or a.element_size() == 1 else a.view(
            {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()])
        b = b.view(a.dtype)
    diff = (a != b).nonzero()
    return -1 if diff.numel() == 0 else int(diff[0, 0])


class Candidate:
    """The candidate's process as the judge sees it: requests, replies under a
    time limit, and its outputs, read out of its memory. Between requests it is
    stopped (SIGSTOP), so nothing of it runs while a baseline is timed or its
    outputs are read."""

    def __init__(self, torch, args, phase, mode="serve"):
        self.torch = torch
        self.device = args.device
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [sys.executable, os.path.abspath(__file__), mode, f"--problem={args.problem}",
                f"--candidate={args.candidate}", f"--device={args.device_arg}", f"--channel_fd={theirs.fileno()}",
                f"--result={args.result}.{mode}"]
        # Its own process group, which it cannot leave: the judge stops and
        # ends the group, so nothing it starts runs while a baseline is timed.
        self.process = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                        process_group=0)
        theirs.close()
        self.pid = self.process.pid
        self.channel = Channel(ours)
        self.memory = RemoteMemory(self.pid)
        self.ipc = CudaIpc() if args.device == "cuda" else None
        self.stopped = False
        self.last_described = []
        self.ended = ""
        self.phase = phase

    def resume(self):
        if self.stopped:
            os.killpg(self.pid, signal.SIGCONT)
            self.stopped = False

    def stop(self):
        if self.stopped or self.ended:
            return
        os.killpg(self.pid, signal.SIGSTOP)
        _, status = os.waitpid(self.pid, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            self.stopped = True
        else:
            self.ended = describe_exit(status)
            raise CandidateError("RUNTIME_ERROR", f"the candidate's process ended ({self.ended})")

    def request(self, message, timeout, what, fds=()):
        """Sends `message` and returns the reply, the candidate stopped again;
        its failures raise CandidateError."""
        self.resume()
        self.channel.send(message, fds)
        reply = self.reply(timeout, what)
        self.stop()
        return reply

    def send(self, message, fds=()):
        self.resume()
        self.channel.send(message, fds)

    def reply(self, timeout, what):
        try:
            reply, _ = self.channel.recv(timeout)
        except TimeoutError:
            self.hung(timeout, what)
        if reply is None:
            _, status = os.waitpid(self.pid, 0)
            self.ended = describe_exit(status)
            raise CandidateError("RUNTIME_ERROR", f"the candidate's process ended during {what} ({self.ended})")
        if not reply.get("ok"):
            status = reply.get("status", "RUNTIME_ERROR")
            if status not in ("COMPILE_ERROR", "RUNTIME_ERROR", "RESOURCE_EXHAUSTED"):
                status = "RUNTIME_ERROR"
            raise CandidateError(status, str(reply.get("message", "failed"))[:2000], str(reply.get("traceback", ""))[-2000:])
        return reply

    def hung(self, timeout, what):
        """Prints the candidate's stacks (faulthandler, to stderr), ends it and raises."""
        self.resume()
        try:
            os.kill(self.pid, signal.SIGUSR1)
            time.sleep(0.5)
            os.killpg(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.ended = "killed at its time limit"
        status = "COMPILE_TIMEOUT" if what in ("import", "__init__") else "RUN_TIMEOUT"
        verb = "import and build" if status == "COMPILE_TIMEOUT" else "finish"
        print(f"Timeout (the candidate's {what})", file=sys.stderr, flush=True)
        raise CandidateError(status, f"did not {verb} within {timeout:g}s")

    def outputs(self, reply, buffers):
        """The candidate's outputs as tensors: on CUDA views of its memory, on
        the CPU copies read out of it."""
        torch = self.torch
        described = reply.get("outputs")
        if not isinstance(described, list) or len(described) > 64 * MAX_CALLS_PER_SAMPLE:
            raise CandidateError("RUNTIME_ERROR", "the candidate's process described its outputs wrongly")
        self.last_described = described
        out = []
        for i, d in enumerate(described):
            try:
                dtype = torch_dtype(torch, str(d["dtype"]))
                shape = [int(n) for n in d["shape"]]
                strides = [int(s) for s in d["strides"]]
                if len(shape) != len(strides) or any(n < 0 for n in shape):
                    raise ValueError
            except (KeyError, TypeError, ValueError):
                raise CandidateError("RUNTIME_ERROR", f"output {i} is described wrongly") from None
            if str(dtype) not in DTYPE_NAMES:
                raise CandidateError("RUNTIME_ERROR", f"output {i} has dtype {dtype}, which kevo cannot compare")
            itemsize = element_size(torch, dtype)
            nbytes = extent_bytes(shape, strides, itemsize)
            if d.get("device") != self.device:
                raise CandidateError("RUNTIME_ERROR", f"output {i} is on {d.get('device')}, not {self.device}")
            if nbytes == 0:
                out.append(torch.empty(shape, dtype=dtype, device=self.device))
            elif "input" in d:
                j, offset = int(d["input"]), int(d.get("offset", -1))
                if not 0 <= j < len(buffers) or offset < 0 or offset + nbytes > buffers[j].numel() * buffers[j].element_size():
                    raise CandidateError("RUNTIME_ERROR", f"output {i} lies outside the input it names")
                raw = buffers[j].reshape(-1).view(torch.uint8)[offset:offset + nbytes]
                out.append(raw.view(dtype).as_strided(shape, strides))
            elif self.device == "cuda":
                base, size = self.ipc.open(str(d.get("handle", "")))
                offset = int(d.get("offset", -1))
                if offset < 0 or offset + nbytes > size:
                    raise CandidateError("RUNTIME_ERROR", f"output {i} lies outside the memory it names")
                out.append(view_at(torch, base + offset, nbytes, dtype, shape, strides))
            else:
                raw = torch.empty(nbytes, dtype=torch.uint8)
                self.memory.read_into(int(d["ptr"]), raw.data_ptr(), nbytes)
                out.append(raw.view(dtype).as_strided(shape, strides))
        return out

    def close(self):
        if self.ended:
            return
        try:
            self.resume()
            self.channel.send({"op": "exit"})
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001 - it is killed below
            pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
        self.ended = self.ended or "closed by the judge"


def die_with_parent():
    libc = ctypes.CDLL(None)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# System calls the candidate's process (and whatever it starts) may not make,
# or only on itself: signals to anyone but itself (the judge, a baseline),
# tracing and reading or writing another process's memory, and leaving its
# process group (which the judge stops as one), and changing the limits or the
# scheduling of any process but itself. x86-64 and AArch64 numbers.
SECCOMP_ARCHES = {
    0xC000003E: {"self_pid_arg0": (62, 234, 129, 297),
                 # prlimit64, sched_setaffinity, sched_setscheduler, sched_setparam, sched_setattr
                 "self_or_zero_arg0": (302, 203, 144, 142, 314),
                 # ..., setpriority and ioprio_set (their targets include the user's every process)
                 "deny": (200, 101, 310, 311, 424, 434, 438, 112, 109, 141, 251)},
    0xC00000B7: {"self_pid_arg0": (129, 131, 138, 240),
                 "self_or_zero_arg0": (261, 122, 119, 118, 274),
                 "deny": (130, 117, 270, 271, 424, 434, 438, 157, 154, 140, 30)},
}


def confine_candidate():
    """Installs the seccomp filter above on this process (inherited by its
    children, and kept across exec). Returns False where the kernel refuses."""
    pid = os.getpid()
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    prog = [(ld_w_abs, 0, 0, 4)]  # seccomp_data.arch
    arch_checks, bodies = [], []
    for arch, calls in SECCOMP_ARCHES.items():
        body = [(ld_w_abs, 0, 0, 0)]  # seccomp_data.nr
        if arch == 0xC000003E:
            body.append((jge_k, 0, 1, 0x40000000))  # the x32 ABI: refused outright
            body.append((ret_k, 0, 0, eperm))
        for nr in calls["deny"]:
            body += [(jeq_k, 0, 1, nr), (ret_k, 0, 0, eperm)]
        for nr in calls["self_pid_arg0"]:
            # the target (arg 0, its low 32 bits) must be this process
            body += [(jeq_k, 0, 4, nr), (ld_w_abs, 0, 0, 16), (jeq_k, 0, 1, pid), (ret_k, 0, 0, allow),
                     (ret_k, 0, 0, eperm)]
        for nr in calls["self_or_zero_arg0"]:
            # the target must be this process, or 0 (the caller itself): never the judge's
            # limits or scheduling
            body += [(jeq_k, 0, 5, nr), (ld_w_abs, 0, 0, 16), (jeq_k, 2, 0, 0), (jeq_k, 1, 0, pid),
                     (ret_k, 0, 0, eperm), (ret_k, 0, 0, allow)]
        body.append((ret_k, 0, 0, allow))
        arch_checks.append(arch)
        bodies.append(body)
    # arch dispatch: jeq arch_i -> body_i; other arches are left unfiltered
    n = len(arch_checks)
    offsets, total = [], 0
    for body in bodies:
        offsets.append(total)
        total += len(body)
    for i, arch in enumerate(arch_checks):
        # jump over the remaining checks and the final allow to body i
        prog.append((jeq_k, (n - i - 1) + 1 + offsets[i], 0, arch))
    prog.append((ret_k, 0, 0, allow))
    for body in bodies:
        prog += body

    class Insn(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Insn))]

    insns = (Insn * len(prog))(*[Insn(*i) for i in prog])
    fprog = Prog(len(prog), insns)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def describe_exit(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}"
    return f"status {status}"


class PerSet(list):
    """One call's outputs, a list per input set (docs/kernelbench.md, "Calls
    per sample"), and `reused`: set -> the later call whose outputs are the
    same memory (which may have overwritten that set's)."""

    def __init__(self, sets, reused):
        super().__init__(sets)
        self.reused = reused


class Judge:
    """Validates and times the candidate against the problem's Model, which it
    runs itself, in this process; the candidate runs in its own (`serve`)."""

    def __init__(self, torch, args, phase, result):
        self.torch, self.args, self.phase, self.result = torch, args, phase, result
        self.device = args.device
        self.problem = Problem(torch, args)
        self.tolerances = parse_tolerances(args.tolerances)
        # Where the problem's own Model gave two different results on the same
        # inputs: (output name, index), and ModelNew's two calls then need to
        # agree within the tolerance only.
        self.reference_nondet = None
        self.buffers = None  # every input set's buffers, one list
        self.groups = []  # the buffers of each input set (docs/kernelbench.md, "Calls per sample")
        self.calls = 1
        self.layout = None
        self.shapes = None
        self.cand = None
        self.control = None
        self.input_bytes = 0

    # -- inputs ---------------------------------------------------------------

    def load(self, seed):
        """Fresh inputs for `seed`, copied into every input set the candidate
        sees. Returns the fresh tensors (kept to check the buffers afterwards)."""
        fresh = self.draw(seed)
        for group in self.groups:
            self.fill(group, fresh)
        synchronize(self.torch, self.device)
        return fresh

    @staticmethod
    def fill(group, fresh):
        for b, t in zip(group, fresh):
            b.copy_(t)

    def draw(self, seed):
        """get_inputs() for `seed` (shared with the candidate the first time)."""
        torch = self.torch
        try:
            value = self.problem.inputs(seed)
        except BaseException as e:  # noqa: BLE001
            if out_of_memory(e):
                raise ProblemTooLarge("get_inputs()", 0, e) from None
            raise CandidateError("INFRA_ERROR", f"the problem's get_inputs() failed: {e}", traceback_tail(e)) from None
        layout, fresh = [], []
        for v in value:
            judge_flatten(v, torch, fresh, layout)
        self.input_bytes = sum(t.numel() * t.element_size() for t in fresh)
        shapes = [(tuple(t.shape), t.dtype) for t in fresh]
        if self.buffers is None:
            try:
                self.buffers, message, fds = describe_inputs(torch, self.device, fresh, self.cand.ipc)
            except BaseException as e:  # noqa: BLE001
                if out_of_memory(e):
                    raise ProblemTooLarge("sharing get_inputs()'s tensors", self.input_bytes, e) from None
                raise
            self.layout, self.shapes = layout, shapes
            self.groups = [self.buffers]
            message["layout"] = layout
            self.cand.request(message, self.args.run_timeout_s, "inputs", fds)
            for fd in fds:
                os.close(fd)
        elif shapes != self.shapes or layout != self.layout:
            raise CandidateError("INFRA_ERROR", "the problem's get_inputs() returns different shapes for "
                                 "different seeds, which kevo cannot share with the candidate")
        return fresh

    def plan_calls(self, fresh, want, eager_s):
        """Gives the candidate more input sets where one eager call (eager_s,
        the quickest seen) is short: every call the candidate gets from now
        on, validated or timed, runs ModelNew once on each set."""
        torch, target = self.torch, self.args.sample_target_s
        if target < 0:  # on the CPU the path is a pipe's round trip, bounded by a trusted one's
            target = SAMPLE_TARGET_S if self.device == "cuda" else 0
        self.result["eager_call_s"] = eager_s
        if target <= 0 or eager_s >= target / 2:
            return
        per_set = self.input_bytes + sum(t.numel() * t.element_size() for t in want)
        free, _ = usable_memory(torch, self.device)
        room = min(SETS_BYTES, free // 8) if free else SETS_BYTES
        k = min(MAX_CALLS_PER_SAMPLE, math.ceil(target / max(eager_s, 1e-9)), room // max(per_set, 1))
        for _ in range(k - 1):
            try:
                buffers, message, fds = describe_inputs(torch, self.device, fresh, self.cand.ipc)
            except BaseException as e:  # noqa: BLE001
                if out_of_memory(e):
                    break
                raise
            message["append"] = True
            try:
                self.cand.request(message, self.args.run_timeout_s, "inputs", fds)
            finally:
                for fd in fds:
                    os.close(fd)
            self.fill(buffers, fresh)
            self.groups.append(buffers)
        self.buffers = [b for group in self.groups for b in group]
        self.calls = len(self.groups)
        synchronize(torch, self.device)

    def arguments(self, g=0):
        return rebuild_arguments(self.layout, self.groups[g])

    def modified_input(self, fresh, g=None):
        """The first input of set g (of any set where g is None) that no longer
        holds `fresh`'s values, or ""."""
        for j in range(len(self.groups)) if g is None else (g,):
            for i, (b, t) in enumerate(zip(self.groups[j], fresh)):
                if same_bits(self.torch, b, t) >= 0:
                    return f"input{i}" if self.calls == 1 else f"input{i} (of input set {j + 1})"
        return ""

    # -- calls ----------------------------------------------------------------

    def reference(self, model):
        with self.torch.no_grad():
            out = flatten(model(*self.arguments()), self.torch, [])
        synchronize(self.torch, self.device)
        # An output that is a view of an input would change with it.
        return [t.clone() if any(t.data_ptr() == b.data_ptr() for b in self.buffers) else t for t in out]

    def call_candidate(self, what):
        """One call: ModelNew once on each input set; their outputs, a list a set."""
        reply = self.cand.request({"op": "call"}, self.args.run_timeout_s, what)
        return self.per_set(self.cand.outputs(reply, self.buffers))

    def per_set(self, outputs):
        """A call's outputs split by input set (a PerSet), with which sets'
        outputs are memory a later call on another set returned too."""
        k = self.calls
        if len(outputs) % k:
            raise CandidateError("RUNTIME_ERROR", f"ModelNew returned {len(outputs)} tensors over {k} calls: "
                                 "a different number from different calls")
        n = len(outputs) // k
        reused, seen = {}, {}
        for i, d in enumerate(self.cand.last_described if k > 1 else []):
            if math.prod(d.get("shape") or [0]):
                first = seen.setdefault((d.get("handle"), d.get("ptr"), d.get("input"), d.get("offset")), i)
                if first // n != i // n:
                    reused.setdefault(first // n, i // n)
        return PerSet([outputs[g * n:(g + 1) * n] for g in range(k)], reused)

    def on_set(self, g, reused):
        """Where a wrong output was, when a call runs ModelNew on more than
        one set; `reused` is that call's PerSet.reused."""
        if self.calls == 1:
            return ""
        text = f" (on input set {g + 1} of {self.calls}"
        if g in reused:
            text += (f"; call {reused[g] + 1} returned the same memory: every call's outputs must be "
                     "its own, left alone by later calls")
        return text + ")"

    def judge_case(self, seed, got, want, modified, nondet):
        case = {"seed": seed, "status": "OK", "first_bad_index": -1, "max_abs_err": 0.0, "max_rel_err": 0.0,
                "output": "", "detail": ""}
        if modified:
            case.update(status="INPUT_MODIFIED", output=modified, detail=f"input '{modified}' changed during the call")
            return case
        if len(got) != len(want):
            case.update(status="WRONG_ANSWER", detail=f"returned {len(got)} tensor(s), the reference {len(want)}")
            return case
        for i, (g, w) in enumerate(zip(got, want)):
            if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
                case.update(status="WRONG_ANSWER", output=f"output{i}", detail=(
                    f"output{i} is {shape_text(g)}, the reference's {shape_text(w)}"))
                return case
        for i, (g, w) in enumerate(zip(got, want)):
            v = compare(self.torch, g, w, self.tolerances, f"output{i}")
            case["max_abs_err"] = max(case["max_abs_err"], v["max_abs_err"])
            case["max_rel_err"] = max(case["max_rel_err"], v["max_rel_err"])
            if not v["ok"] and case["status"] == "OK":
                case.update(status="NONFINITE" if v["nonfinite"] else "WRONG_ANSWER", output=f"output{i}",
                            first_bad_index=v["first_bad_index"], detail=v["detail"])
        if case["status"] == "OK" and nondet:
            case.update(status="NONDETERMINISTIC", output=nondet[0], first_bad_index=nondet[1],
                        detail=f"{nondet[0]}[{nondet[1]}] differs between two calls on the same inputs" + (
                            " beyond the tolerance (the problem's Model is itself not bitwise deterministic "
                            "here, so no more is asked)" if self.reference_nondet else ""))
        return case

    # -- stages ---------------------------------------------------------------

    def start(self):
        """Starts the candidate's process (and on a GPU the trusted control's)
        and builds both models: the judge's own work is done while the
        candidate's process imports torch and the candidate."""
        args, torch = self.args, self.torch
        self.phase.set("import")
        if self.device == "cuda":
            self.control = Candidate(torch, args, self.phase, mode="control")
        self.cand = Candidate(torch, args, self.phase)
        self.phase.set("run")
        try:
            self.eager = self.problem.build(self.problem.problem.Model, 1)
        except BaseException as e:  # noqa: BLE001
            raise CandidateError("INFRA_ERROR", f"the problem's Model failed to build: {last_line(e)}",
                                 traceback_tail(e)) from None
        t0 = _clock()
        if "compile" in args.baselines.split(",") and hasattr(torch, "compile"):
            try:  # what torch.compile imports on first use, while the candidate's process starts
                import torch._dynamo  # noqa: F401
                import torch._inductor.config  # noqa: F401
            except Exception:  # noqa: BLE001 - torch.compile reports it when it is called
                pass
        self.result.setdefault("steps_s", {})["import_torch_compile"] = _clock() - t0
        self.phase.set("import")
        self.cand.reply(args.compile_timeout_s, "import")
        self.cand.stop()
        self.phase.set("build")
        self.cand.request({"op": "build", "seed": 1}, args.compile_timeout_s, "__init__")
        self.phase.set("run")

    def check_fits(self):
        """The inputs' size before any is drawn (get_inputs() on the meta
        device): a problem whose inputs the judge cannot hold about four
        times over (the inputs, the fresh ones, the reference's and the
        candidate's outputs) in the memory it may use is RESOURCE_EXHAUSTED
        at once, naming the size. Where get_inputs() cannot run on meta
        tensors, nothing is known until it runs for real."""
        torch = self.torch
        try:
            with meta_factories(torch):
                seed_all(torch, 1 + INPUT_SEED_OFFSET)
                tensors = flatten(list(self.problem.problem.get_inputs()), torch, [])
            if any(t.device.type != "meta" for t in tensors):
                return
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
        except Exception:  # noqa: BLE001 - a get_inputs() meta cannot run: drawn for real instead
            return
        self.result["input_bytes"] = nbytes
        free, where = usable_memory(torch, self.device)
        if free and JUDGE_COPIES * nbytes > free:
            raise ProblemTooLarge(f"get_inputs() needs {nbytes / 2**30:.2f} GiB, the judge about {JUDGE_COPIES} "
                                  f"times that, and {where} {free / 2**30:.2f} GiB")

    def validate(self, seeds):
        torch = self.torch
        cases = []
        self.result["stage"] = "validate"
        for n, seed in enumerate(seeds):
            fresh = self.load(seed)
            times = []
            try:
                # Timed to plan the calls per sample: again while that is cheap,
                # the first call paying for what the Model loads once. Twice at
                # least on the first seed, to learn whether the Model itself
                # gives the same bits twice.
                while not times or (n == 0 and (len(times) < 2 or (len(times) < 4 and sum(times) < 0.5))):
                    t0 = _clock()
                    again = self.reference(self.eager)
                    times.append(_clock() - t0)
                    if len(times) == 1:
                        want = again
                    elif self.reference_nondet is None:
                        self.reference_nondet = differing_output(torch, want, again)
                    del again
            except BaseException as e:  # noqa: BLE001
                if out_of_memory(e):
                    raise ProblemTooLarge("the problem's Model", self.input_bytes, e) from None
                raise CandidateError("INFRA_ERROR", f"the problem's Model failed: {last_line(e)}",
                                     traceback_tail(e)) from None
            if self.modified_input(fresh, 0):  # the Model itself works in place
                self.fill(self.groups[0], fresh)
                self.reference_nondet = None  # its calls saw different inputs
            if n == 0:
                self.plan_calls(fresh, want, min(times))
            calls = self.call_candidate("forward")
            first = [[t.clone() for t in call] for call in calls]
            modified = self.modified_input(fresh)
            nondet = [None] * self.calls
            if not modified:
                second = self.call_candidate("forward")
                modified = self.modified_input(fresh)
                for g, (one, two) in enumerate(zip(first, second)):
                    nondet[g] = differing_output(torch, one, two, self.tolerances if self.reference_nondet else None)
            # Wrong outputs on any set first, then calls that differ.
            checks = [(g, None) for g in range(self.calls)] + [(g, d) for g, d in enumerate(nondet) if d]
            for g, differs in checks:
                case = self.judge_case(seed, first[g], want, modified, differs)
                if case["status"] != "OK":
                    case["detail"] += self.on_set(g, calls.reused)
                    break
            cases.append(case)
            del want, first
            if case["status"] != "OK":
                break
        self.result["cases"] = cases
        if self.reference_nondet:
            self.result["reference_nondeterministic"] = "{}[{}]".format(*self.reference_nondet)
        return all(c["status"] == "OK" for c in cases)

    def profile(self):
        args, torch, device = self.args, self.torch, self.device
        self.result["stage"] = "profile"
        setup_start = _clock()
        notes = {}
        series = [Series("candidate"), Series("eager", self.eager)]
        wanted = [b for b in args.baselines.split(",") if b]
        if "compile" in wanted:
            if not hasattr(torch, "compile"):
                notes["torch_compile"] = (f"torch.compile unavailable: torch {torch.__version__} has no "
                                          "torch.compile (it arrived in torch 2.0)")
            else:
                try:
                    series.append(Series("torch_compile", torch.compile(self.problem.build(self.problem.problem.Model, 1))))
                except Exception as e:  # noqa: BLE001
                    notes["torch_compile"] = f"torch.compile unavailable: it failed: {last_line(e)}"
        # Input sets: each timed call gets different values than the one
        # before it, in the same buffers, so neither the buffer's address nor
        # a sample of its values tells a call that can reuse an old result.
        self.timed_inputs_setup()
        flush = None
        if device == "cuda":
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
            flush = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
            self.result["l2_flush_bytes"] = flush.numel() * 4
        gather = torch.randint(0, 1 << 62, (1024,), device=device)

        def sample(s):
            """One timed sample of series s: the device idle (and its L2
            flushed), one call on each input set, and on CUDA their outputs
            touched at 1024 random places and the device synchronised. Returns
            (seconds, outputs a set, touched values a set); the candidate is
            stopped before its outputs are read on the CPU."""
            if flush is not None:
                torch.sum(flush)
            synchronize(torch, device)
            if s.name == "candidate":
                self.cand.resume()
                t0 = _clock()
                self.cand.channel.send({"op": "call"})
                reply = self.cand.reply(args.run_timeout_s, "forward")
                if device != "cuda":
                    seconds = _clock() - t0
                    self.cand.stop()
                    return seconds, self.per_set(self.cand.outputs(reply, self.buffers)), [[]] * self.calls
                out = self.per_set(self.cand.outputs(reply, self.buffers))
            else:
                t0 = _clock()
                with torch.no_grad():
                    out = [flatten(s.model(*self.arguments(g)), torch, []) for g in range(self.calls)]
            touched = [[touch(torch, t, gather) for t in call] if device == "cuda" else [] for call in out]
            synchronize(torch, device)
            seconds = _clock() - t0
            if s.name == "candidate":
                self.cand.stop()
            return seconds, out, touched

        steps = self.result.setdefault("steps_s", {})
        steps["setup"] = _clock() - setup_start
        # Warm-up: extensions build, torch.compile traces and autotunes.
        warm_start = _clock()
        self.phase.set("build")
        with torch.no_grad():
            for s in list(series):
                self.timed_inputs(0)
                compiling = s.name == "torch_compile"
                self.phase.set("baseline" if compiling else "build")
                faulthandler.dump_traceback_later(args.torch_compile_timeout_s + 60 if compiling
                                                  else args.compile_timeout_s + 60, exit=True)
                t0 = _clock()
                try:
                    with Alarm(args.torch_compile_timeout_s if compiling else 0):
                        for _ in range(2):
                            sample(s)
                except CandidateError:
                    raise
                except BaseException as e:  # noqa: BLE001
                    if compiling:
                        why = (f"did not compile and warm up within {args.torch_compile_timeout_s:g} s"
                               if isinstance(e, AlarmTimeout) else f"it failed: {last_line(e)}")
                        notes["torch_compile"] = f"torch.compile unavailable: {why}"
                        series.remove(s)
                        synchronize(torch, device)
                        continue
                    raise CandidateError("INFRA_ERROR", f"the problem's Model failed: {e}", traceback_tail(e)) from None
                if compiling:
                    self.result["torch_compile_warmup_s"] = _clock() - t0
        faulthandler.cancel_dump_traceback_later()
        steps["warm_up"] = _clock() - warm_start

        self.phase.set("profile")
        nops = []
        start = _clock()
        rounds, converged, checked = 0, False, 0
        while True:
            # The pipe's own round trip, to take out of the candidate's samples:
            # measured before the round's inputs are in place, so the candidate
            # cannot spend it working on them.
            self.cand.resume()
            t0 = _clock()
            self.cand.channel.send({"op": "nop"})
            self.cand.reply(args.run_timeout_s, "forward")
            nops.append(_clock() - t0)
            self.cand.stop()
            fresh = self.timed_inputs(rounds)
            order = series[rounds % len(series):] + series[:rounds % len(series)]
            results = {}
            for s in order:
                seconds, out, touched = sample(s)
                s.samples.append(seconds)
                results[s.name] = (out, touched)
            # Every timed call of the candidate is checked against eager's on
            # the same inputs, and what it showed while timed must still be
            # there (a result written after the reply is not a result).
            got, touched = results["candidate"]
            for g in range(self.calls):
                for t, before in zip(got[g], touched[g]):
                    if not torch.equal(touch(torch, t, gather), before):
                        raise CandidateError("RUNTIME_ERROR", "the candidate's output changed after its call "
                                             "returned: work still running when a call ends is not allowed")
                case = self.judge_case(0, got[g], results["eager"][0][g], self.modified_input(fresh[g], g), None)
                if case["status"] != "OK":
                    raise CandidateError(case["status"], f"timed call {rounds * self.calls + g + 1} was wrong: "
                                         f"{case['detail']}{self.on_set(g, got.reused)}")
                checked += 1
            rounds += 1
            results_bytes = sum(t.numel() * t.element_size() for t in got[0])
            out_layout = [(list(t.shape), str(t.dtype)) for t in got[0]]
            del results, got, touched
            elapsed = _clock() - start
            if rounds >= args.min_samples and all(s.spread() <= args.target_spread for s in series):
                converged = True
                break
            if elapsed >= args.time_cap_s and rounds >= 3:
                break
        steps["rounds"] = _clock() - start
        overhead = None
        if self.control is not None:
            # On a GPU the path costs more than the no-work round trip: the
            # GPU switches from the judge's context to the candidate's and
            # back, and the judge views and touches the outputs through IPC.
            # What that costs, measured on the trusted control once the
            # candidate's process (and any work it left queued) is gone.
            self.cand.close()
            t0 = _clock()
            # The control's calls keep the GPU busy as long as the
            # candidate's samples did, for what the path costs grows with the
            # time the judge waits: with a fill alone an H100 read
            # ModelNew = Model 4-5% slow on 3-7 ms problems whose kernels ran
            # no slower in the candidate's process, with this 0-2%
            # (docs/benchmarks.md, 30th and 31st sessions).
            busy = max(0.0, statistics.median(series[0].samples) - min(nops))
            overhead = self.path_cost(flush, gather, out_layout, busy)
            steps["path_control"] = _clock() - t0
        if overhead is None:
            # The candidate's samples less the cheapest round trip that carried
            # no work, at most three times that of a process that never ran its code.
            trusted = trusted_round_trip(self.cand.last_described)
            overhead = min(min(nops), 3 * trusted)
            self.result["trusted_round_trip_s"] = trusted if math.isfinite(trusted) else None
        self.result["nop_round_trip_s"] = min(nops)
        # A sample's path is paid once, whatever its calls; then per call.
        series[0].samples = [max(0.0, x - overhead) for x in series[0].samples]
        for s in series:
            s.samples = [x / self.calls for x in s.samples]
            s.calls = self.calls
        self.result["series"] = {s.name: s.summary() for s in series}
        self.check_physical(self.result["series"]["candidate"]["median_s"], results_bytes)
        self.result["ipc_overhead_s"] = overhead
        self.result["timed_calls_checked"] = checked
        self.result["calls_per_sample"] = self.calls
        self.result["fresh_inputs"] = "regenerated" if self.regenerate else "two sets, floats rescaled each call"
        self.result["working_set_bytes"] = sum(b.numel() * b.element_size() for b in self.buffers)
        self.result["converged"] = converged
        self.result["elapsed_s"] = _clock() - start
        self.result["notes"] = notes

    def path_cost(self, flush, gather, layout, busy_s=0.0, rounds=25):
        """Seconds the candidate's path adds to a call on a GPU: the median
        of the trusted control's calls timed as the candidate's are, less the
        median of the same calls timed in this process as eager is (side by
        side, in alternating order, the L2 flushed before each). A call keeps
        the GPU busy for `busy_s` (a sleep kernel), then fills outputs shaped
        as the candidate's (`layout`), or a 4 KiB one where the device has no
        room for them. None, with a note, where the control did not start."""
        torch, args = self.torch, self.args
        ctl = self.control
        try:
            ctl.reply(args.compile_timeout_s, "import")
        except CandidateError as e:
            self.result["path_control"] = {"error": e.message}
            return None
        like = control_layout(layout)
        try:
            # The control's copy and this one, beside what the judge holds.
            if 2 * sum(math.prod(shape) * element_size(torch, torch_dtype(torch, dtype))
                       for shape, dtype in like) > usable_memory(torch, "cuda")[0]:
                raise torch.cuda.OutOfMemoryError("no room")
            own = control_outputs(torch, like)
        except torch.cuda.OutOfMemoryError:
            like, layout = control_layout(None), None
            own = control_outputs(torch, like)
        output_bytes = sum(t.numel() * t.element_size() for t in own)
        cycles = int(busy_s * gpu_sleep_rate(torch)) if busy_s > 0 and hasattr(torch.cuda, "_sleep") else 0
        rounds = max(5, min(rounds, int(2.5 / max(busy_s, 1e-4))))  # about 5 s at most for long calls
        cross, inproc = [], []

        def idle():
            torch.sum(flush)
            synchronize(torch, "cuda")

        try:
            for r in range(rounds + 2):
                for kind in (("cross", "inproc") if r % 2 else ("inproc", "cross")):
                    idle()
                    if kind == "cross":
                        ctl.resume()  # woken, as the candidate's process is
                    t0 = _clock()
                    if kind == "cross":
                        ctl.channel.send({"op": "call", "like": layout, "sleep_cycles": cycles})
                        out = ctl.outputs(ctl.reply(args.run_timeout_s, "forward"), [])
                    else:
                        with torch.no_grad():
                            gpu_sleep(torch, cycles)
                            out = flatten([t.fill_(float(r)) for t in own], torch, [])
                    for t in out:
                        touch(torch, t, gather)
                    synchronize(torch, "cuda")
                    seconds = _clock() - t0
                    if kind == "cross":
                        ctl.stop()
                    if r >= 2:  # two rounds of warm-up
                        (cross if kind == "cross" else inproc).append(seconds)
        except CandidateError as e:
            self.result["path_control"] = {"error": e.message}
            return None
        finally:
            ctl.close()
        c, i = statistics.median(cross), statistics.median(inproc)
        self.result["path_control"] = {"cross_s": c, "inproc_s": i, "rounds": rounds, "output_bytes": output_bytes,
                                       "busy_s": busy_s}
        return max(0.0, c - i)

    def check_physical(self, median_s, out_bytes):
        """A candidate must at least write its outputs: a median below the
        time that takes at twice this device's measured copy rate is beyond
        what the device can do, and an error, not a speedup."""
        torch, device = self.torch, self.device
        if out_bytes <= 0:
            return
        n = max(out_bytes // 4, 1 << 22)
        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        best = float("inf")
        for _ in range(5):
            synchronize(torch, device)
            t0 = _clock()
            dst.copy_(src)
            synchronize(torch, device)
            best = min(best, _clock() - t0)
        rate = 2 * n * 4 / best  # bytes read and written per second
        del src, dst
        self.result["device_copy_gbs"] = rate / 1e9
        floor = out_bytes / (2 * rate)
        if median_s < floor:
            raise CandidateError(
                "RUNTIME_ERROR",
                f"candidate timed at {median_s * 1e6:.3g} us, less than writing its {out_bytes / 2**20:.3g} MiB of "
                f"outputs takes at twice the {rate / 1e9:.0f} GB/s this {device} copies at ({floor * 1e6:.3g} us): "
                "beyond what the device can do, so the time is not real")

    def timed_inputs_setup(self):
        """How timed calls get inputs unlike the call before: get_inputs()
        afresh for every call where that is cheap (on the GPU it is drawn
        there); else two sets drawn once, their floating-point tensors scaled
        by a different factor in [0.75, 1.5) for every call (which keeps signs
        and sorted orders)."""
        t0 = _clock()
        # Seeds and factors from a secret drawn now: the candidate's process
        # has the problem and this module too, so it could otherwise draw the
        # timed inputs ahead (in __init__, untimed) and look their outputs up.
        self.secret = int.from_bytes(os.urandom(8), "little") >> 2
        self.sets = [self.load(self.secret)]
        took = _clock() - t0
        self.regenerate = took * self.calls <= max(0.05, self.args.time_cap_s / 50)
        if not self.regenerate:
            self.sets.append(self.load(self.secret + 1))
        self.result["input_generation_s"] = took

    def timed_inputs(self, n):
        """Round n's inputs, into every input set: the fresh tensors of each."""
        sets = []
        for g, group in enumerate(self.groups):
            i = n * self.calls + g
            if self.regenerate:
                fresh = self.draw(self.secret + 2 + i)
            else:
                factor = 0.75 + 0.75 * random.Random(self.secret + i).random()
                fresh = [t * factor if t.is_floating_point() else t for t in self.sets[i % 2]]
            self.fill(group, fresh)
            sets.append(fresh)
        synchronize(self.torch, self.device)
        return sets


def touch(torch, t, gather):
    """t's values at up to 1024 random places (of its flat storage order)."""
    if t.numel() == 0:
        return torch.empty(0, dtype=t.dtype, device=t.device)
    flat = t.reshape(-1) if t.is_contiguous() else t.contiguous().reshape(-1)
    picked = flat[gather.to(flat.device) % flat.numel()]
    if picked.dtype.is_floating_point:
        picked = picked.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[picked.element_size()])
    return picked


def shape_text(t):
    return f"[{', '.join(str(n) for n in t.shape)}] {DTYPE_NAMES.get(str(t.dtype), str(t.dtype)).lower()}"


def evaluate_mode(torch, args, phase, result):
    judge = Judge(torch, args, phase, result)
    # Seconds each stage took, for the worker's counters and the docs.
    seconds = result.setdefault("stage_seconds", {})

    def stage(name, step):
        result["stage"] = name
        t0 = _clock()
        try:
            return step()
        finally:
            seconds[name] = seconds.get(name, 0.0) + (_clock() - t0)

    try:
        stage("validate", judge.check_fits)
        stage("compile", judge.start)
        seeds = [int(s) for s in args.seeds.split(",") if s]
        if stage("validate", lambda: judge.validate(seeds)):
            stage("profile", judge.profile)
    finally:
        for process in (judge.cand, judge.control):
            if process is not None:
                process.close()


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


def graph_name(target):
    """What a node calls, one name for torch.relu, F.relu, x.relu() and
    operator.add's "add" alike."""
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", None) or type(target).__name__


def graph_literal(value):
    """A node argument that is not a tensor, as a Python literal; None when
    it is not a plain value."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float)) for v in value):
        return repr(tuple(value))
    if type(value).__name__ in ("dtype", "memory_format", "layout"):
        return str(value)
    return None


def capture_mode(torch, args, phase, result):
    """The problem's Model as an operator graph: torch.fx's trace of
    Model(*get_init_inputs()), each node with its result's shape and dtype,
    found by running the graph on meta tensors (no storage, so shipped sizes
    cost nothing). A Model torch.fx cannot trace, or whose graph the meta
    device cannot run, still gets its nodes, without shapes; the reason goes
    to result["graph"]["error"]."""
    import torch.fx

    phase.set("import")
    problem = Problem(torch, args)
    graph = result["graph"] = {"nodes": [], "error": "", "torch": torch.__version__}
    phase.set("build")
    # On meta tensors where the Model allows it: a level-2 problem's 32768 x
    # 32768 Linear would take seconds and gigabytes to build for real.
    try:
        with meta_factories(torch):
            seed_all(torch, 1)
            model = problem.problem.Model(*problem.problem.get_init_inputs())
    except Exception:  # noqa: BLE001 - built for real instead
        model = problem.build(problem.problem.Model, 1)
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - data-dependent control flow, ...
        graph["error"] = f"torch.fx cannot trace the Model: {last_line(e)}"
        return
    phase.set("run")
    meta = {}
    modules = dict(gm.named_modules())
    try:
        with meta_factories(torch):
            seed_all(torch, 1 + INPUT_SEED_OFFSET)
            inputs = list(problem.problem.get_inputs())
        inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]

        class Shapes(torch.fx.Interpreter):
            def run_node(self, n):
                try:
                    value = super().run_node(n)
                except Exception:  # noqa: BLE001 - an op without a meta kernel
                    value = pool_on_one_plane(n)
                    if value is None:
                        raise
                meta[n.name] = value
                return value

        def pool_on_one_plane(n):
            """A pooling module the meta device cannot run (torch 1.13's
            MaxPool3d) works plane by plane: its result's shape from one
            real plane of zeros, the leading dims as they were."""
            module = modules.get(n.target) if n.op == "call_module" else None
            dims = {"MaxPool1d": 1, "MaxPool2d": 2, "MaxPool3d": 3, "AvgPool1d": 1, "AvgPool2d": 2,
                    "AvgPool3d": 3}.get(type(module).__name__)
            x = meta.get(n.args[0].name) if n.args and isinstance(n.args[0], torch.fx.Node) else None
            if dims is None or not isinstance(x, torch.Tensor) or x.dim() <= dims or len(n.args) != 1 or n.kwargs:
                return None
            lead = tuple(x.shape[:x.dim() - dims])
            plane = module(torch.zeros((1,) * len(lead) + tuple(x.shape[x.dim() - dims:]), dtype=x.dtype))
            return torch.empty(lead + tuple(plane.shape[len(lead):]), dtype=plane.dtype, device="meta")

        Shapes(gm.to("meta")).run(*inputs)
    except Exception as e:  # noqa: BLE001 - an op without a meta kernel
        graph["error"] = f"the graph does not run on meta tensors: {last_line(e)}"
    placeholders = 0
    for n in gm.graph.nodes:
        node = {"name": n.name, "op": n.op, "inputs": [], "attrs": {}}
        if n.op == "placeholder":
            node["target"] = str(placeholders)
            placeholders += 1
        elif n.op == "call_module":
            module = modules.get(n.target)
            node["target"] = type(module).__name__
            node["attrs"]["module"] = repr(n.target)
            for k, v in vars(module).items():
                literal = None if k.startswith("_") or k == "training" else graph_literal(v)
                if literal is not None:
                    node["attrs"][k] = literal
        else:
            node["target"] = graph_name(n.target)
        for i, a in enumerate(n.args):
            if isinstance(a, torch.fx.Node):
                node["inputs"].append(a.name)
            elif isinstance(a, (list, tuple)) and a and all(isinstance(v, torch.fx.Node) for v in a):
                node["inputs"].extend(v.name for v in a)
            elif graph_literal(a) is not None:
                node["attrs"][f"arg{i}"] = graph_literal(a)
        for k, a in n.kwargs.items():
            if isinstance(a, torch.fx.Node):
                node["inputs"].append(a.name)
            elif graph_literal(a) is not None:
                node["attrs"][k] = graph_literal(a)
        value = meta.get(n.name)
        if isinstance(value, torch.Tensor):
            node["shape"] = list(value.shape)
            if str(value.dtype) in DTYPE_NAMES:  # a bool tensor is U8: bytes 0 and 1
                node["dtype"] = DTYPE_NAMES[str(value.dtype)]
            node["contiguous"] = bool(value.is_contiguous())
        graph["nodes"].append(node)


def main():
    parser = argparse.ArgumentParser(prog="kevo-runner-kernelbench", description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["evaluate", "serve", "control", "compile", "probe", "capture"])
    parser.add_argument("--problem", default="")
    parser.add_argument("--candidate", default="")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--result", required=True)
    parser.add_argument("--phase", default="")
    parser.add_argument("--nonce_file", default="", help="read, then removed; its text goes into R")
    parser.add_argument("--tolerances", default="", help="F32=atol,rtol;F16=...")
    parser.add_argument("--channel_fd", type=int, default=-1, help="serve: the judge's socket")
    parser.add_argument("--compile_timeout_s", type=float, default=60)
    parser.add_argument("--run_timeout_s", type=float, default=60)
    parser.add_argument("--time_cap_s", type=float, default=3)
    parser.add_argument("--min_samples", type=int, default=10)
    parser.add_argument("--target_spread", type=float, default=0.01)
    parser.add_argument("--sample_target_s", type=float, default=-1,
                        help="time a sample's calls add up to at least, where the problem allows; 0: one call; "
                             "negative: SAMPLE_TARGET_S on a GPU, one call on the CPU")
    parser.add_argument("--baselines", default="eager,compile")
    parser.add_argument("--torch_compile_timeout_s", type=float, default=120)
    args = parser.parse_args()
    if args.mode != "probe" and not args.problem:
        parser.error(f"{args.mode} needs --problem")
    if args.mode in ("evaluate", "serve", "compile") and not args.candidate:
        parser.error(f"{args.mode} needs --candidate")
    if args.mode in ("serve", "control") and args.channel_fd < 0:
        parser.error(f"{args.mode} needs --channel_fd")
    args.device_arg = args.device
    gpu = 0
    if args.device.startswith("cuda:") and args.device[5:].isdigit():
        gpu = int(args.device[5:])
        args.device = "cuda"
    elif args.device not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu, cuda or cuda:N, not {args.device!r}")
    nonce = ""
    if args.mode == "evaluate":
        # Nothing of the candidate's process may read or write this one (its
        # memory, its /proc files): it is not dumpable. The nonce proves that
        # the result file is this process's, not one the candidate forged.
        ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE
        if args.nonce_file:
            try:
                with open(args.nonce_file) as f:
                    nonce = f.read().strip()
                os.unlink(args.nonce_file)
            except OSError:
                pass

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
              "python": platform.python_version(), "nonce": nonce}

    def finish(code):
        result["phase"] = phase.name
        with open(args.result + ".tmp", "w") as f:
            json.dump(strict_json(result), f, allow_nan=False)
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
        {"evaluate": evaluate_mode, "serve": serve_mode, "control": control_mode,
         "compile": compile_mode, "capture": capture_mode}[args.mode](torch, args, phase, result)
    except BaseException as e:  # noqa: BLE001
        err = classify(e, phase.name, "the runner")
        result.update(status=err.status, message=err.message, traceback=err.tb)
        if isinstance(e, ProblemTooLarge):
            result["blame"] = "problem"
        code = {"INFRA_ERROR": EXIT_INFRA, "RESOURCE_EXHAUSTED": EXIT_RESOURCE_EXHAUSTED}.get(err.status, EXIT_CANDIDATE_ERROR)
        finish(code)
    result["seconds"] = _clock() - t0
    phase.set("done")
    finish(EXIT_OK)


if __name__ == "__main__":
    main()
