#!/usr/bin/python3
"""kevo-runner-production: times a native task's production baselines (what a
user runs today: the PyTorch expression, eager and compiled, and the vendor
library routine) against a candidate kernel, interleaved, on the same inputs.

The worker (trusted, C++) starts this script inside its sandbox after the
candidate passed validation and its own profile against the reference:

  kevo-runner-production --spec=S.json --inputs=I --kernel=K.so [--rival=V.so]
      --device=cpu|cuda[:N] --outputs=O.bin --result=R.json [--phase=F]
      [--time_cap_s=3] [--torch_compile_timeout_s=120]

S (JSON, written by the worker from the task):
  {"task": name, "inputs": [{"name", "dtype", "shape"}], "outputs": [...],
   "params": [{"name", "kind": "input"|"output"|"symbol"}] (signature order),
   "symbols": {name: value}, "torch": expr, "vendor": call,
   "threads": [N, ...] (CPU thread counts to time torch at; [] on a GPU),
   "llc_bytes": N, "mem_budget_bytes": N}
I: the timed binding's inputs, raw bytes in signature order (the same file
  kevo-runner-cpu/-cuda time on).
K: the candidate, a .so exporting `void kevo_entry(void** args)` (args[i] is a
  tensor's data pointer, on the device for cuda, or an int64_t* for a symbol).
V: optionally a second kernel of the same kind (the job's best so far), timed
  as one more series in the same loop so that the two are compared side by
  side.

Every form and the candidate are timed in one loop: each round times each of
them once (a sample: a batch of calls on the CPU, one call between CUDA events
after an L2 flush on a GPU), in an order that rotates from round to round, on
input copies rotated so that the working set exceeds the last-level cache
(the same copies for all; as many as mem_budget_bytes and a quarter of the
address space left under the worker's limit allow, at least one). The loop stops when every series' spread is under
1% after at least 10 rounds, or at the time cap once it has 10 rounds (at
three times the cap, 3 rounds do: a median of three samples is one preempted
sample away from a wrong order on a busy host). On the CPU each sample
starts once no other thread of the process is running (1 to 50 ms): the
thread pools the previous sample woke are asleep again (OpenBLAS's spin is
cut to 2^20 cycles for that), so no series is timed beside another's
spinning threads. Each series keeps the
wall-clock start of each of its samples (`starts_s`), so the interleaving can
be checked.

O: after timing, each form's outputs (in the task's output order and dtypes,
raw bytes) from one more call on the first copy, form after form in R's
"forms" order, then the candidate's outputs from one more call on fresh
NaN-filled buffers, then the rival's the same way. The worker compares each with the reference's outputs at
the timed binding; a form that disagrees is no yardstick.

Each series also names the digests (sha256 of the inputs' bytes, in order) of
the input copies its calls ran on, and R the digest of the inputs file: every
series must show that one digest alone.

R: {"status": "OK"|"INFRA_ERROR", "message", "torch": version, "inputs_digest",
    "candidate": series, "rival": series (with --rival; else "rival_error"),
    "forms": [{"name", "call", "threads", "library",
    "series": series, "timed": bool, "error": why it could not be timed
    ("" if it was)}],
    "copies", "rounds", "elapsed_s", "vm_peak_bytes"}
A form that raises, cannot be built (no torch.compile in this torch) or
returns the wrong number, shape or size of outputs is reported with its error
and timed no further; the others go on.
"""

import argparse
import ctypes
import ctypes.util
import hashlib
import json
import math
import os
import resource
import signal
import sys
import threading
import time
import traceback

DTYPES = {
    "F32": ("float32", 4), "F64": ("float64", 8), "F16": ("float16", 2),
    "BF16": ("bfloat16", 2), "I32": ("int32", 4), "I64": ("int64", 8),
    "U8": ("uint8", 1), "I8": ("int8", 1),
}


# Before each CPU sample the runner waits until no other thread of this
# process is running: the thread pools the previous series woke (OpenBLAS's;
# OpenMP's, whose libgomp spins ~300k pauses after a region: milliseconds,
# ~14 ms where a pause takes 140 cycles) must be asleep, so that no
# series is timed beside another's spinning threads. At least IDLE_MIN_S, at
# most IDLE_MAX_S (a busy host may keep a pool thread runnable for longer).
# Each series' first untimed call wakes its own.
IDLE_MIN_S = 0.001
IDLE_MAX_S = 0.05


def others_running():
    """How many other threads of this process are running or runnable."""
    me = threading.get_native_id()
    n = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        if stat[stat.rfind(")") + 2:].startswith("R"):
            n += 1
    return n


def wait_idle():
    time.sleep(IDLE_MIN_S)
    deadline = time.perf_counter() + IDLE_MAX_S
    while others_running() and time.perf_counter() < deadline:
        time.sleep(0.0005)


def summarise(samples):
    s = sorted(samples)
    if not s:
        return 0.0, 0.0

    def q(p):
        x = p * (len(s) - 1)
        lo = math.floor(x)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (x - lo)

    median = q(0.5)
    return median, ((q(0.75) - q(0.25)) / median if median > 0 else 0.0)


class Series:
    def __init__(self):
        self.samples = []
        self.starts = []
        self.calls = 1
        self.copies = set()  # the input copies its calls ran on
        self.timed_calls = 0
        self.minor_faults = 0  # page faults its timed calls took (CPU)

    def add(self, start, seconds):
        self.starts.append(start)
        self.samples.append(seconds)

    def spread(self):
        return summarise(self.samples)[1] if len(self.samples) >= 3 else float("inf")

    def to_json(self, digests):
        median, spread = summarise(self.samples)
        return {"samples_s": self.samples, "starts_s": self.starts, "median_s": median,
                "spread": spread, "calls_per_sample": self.calls,
                "input_digests": sorted({digests[k] for k in self.copies}),
                "minor_faults_per_call": self.minor_faults / max(self.timed_calls, 1)}


_LIBM = ctypes.CDLL("libm.so.6")
_FENV_BYTES = 64  # >= sizeof(fenv_t) on x86-64 and aarch64 glibc


def load_keeping_fp_environment(path):
    """ctypes.CDLL(path) with this thread's floating-point environment put back
    afterwards: a kernel linked with -ffast-math runs crtfastmath's constructor,
    which turns on flush-to-zero and denormals-are-zero, and PyTorch's forms
    timed beside it would then compute in that mode."""
    env = ctypes.create_string_buffer(_FENV_BYTES)
    _LIBM.fegetenv(env)
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    finally:
        _LIBM.fesetenv(env)


_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4


def keep_freed_memory():
    """Every allocation from the heap, and freed memory kept there: each call
    of a PyTorch form allocates its result, which glibc would otherwise map
    afresh and unmap (any block over 32 MiB) and every timed call would then
    pay its first touch of every page, an OS cost that a warm allocator (or
    the jemalloc / tcmalloc that PyTorch advises for CPU serving) never pays
    and that the candidate, writing into outputs made once, does not pay
    either. On a VM whose page faults are slow this made `x + y` at 2^24
    floats read 177.6 ms against 6.2 ms warm."""
    libc = ctypes.CDLL(None)
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, 0x7FFFFFFF)


def byte_view(torch, t):
    """The bytes of a contiguous CPU tensor as a writable buffer, without a
    copy (any dtype, bfloat16 included: numpy sees them as uint8)."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else memoryview(bytearray())


class Kernel:
    """A native kernel over the input copies: kevo_entry and one argument
    array per copy, every copy's pointing at the same outputs. A PyTorch
    form's result lands in the block the allocator recycles from its last
    call, the same one each time (keep_freed_memory), whose lines may still
    be in the cache; the kernel writes into one set of outputs too, as a
    caller reusing its buffers does. With an output per copy, the 2-core Zen
    4 VM's hardtanh kernel read 1.11-1.15 ms against 0.98-1.02 ms into one
    buffer, and F.hardtanh 0.96-1.00 ms: 0.91x that was the layout alone."""

    def __init__(self, path, spec, sets, make_outputs):
        lib = load_keeping_fp_environment(os.path.abspath(path))
        self.entry = lib.kevo_entry
        self.entry.restype = None
        self.entry.argtypes = [ctypes.c_void_p]
        self.symbols = {k: ctypes.c_int64(v) for k, v in spec["symbols"].items()}
        self.frames = []
        self.series = Series()
        outs = dict(zip((o["name"] for o in spec["outputs"]), make_outputs()))
        for s in sets:
            arr = (ctypes.c_void_p * len(spec["params"]))()
            for j, p in enumerate(spec["params"]):
                if p["kind"] == "symbol":
                    arr[j] = ctypes.addressof(self.symbols[p["name"]])
                elif p["kind"] == "input":
                    arr[j] = s[p["name"]].data_ptr()
                else:
                    arr[j] = outs[p["name"]].data_ptr()
            self.frames.append((arr, outs))

    def __call__(self, k):
        self.entry(self.frames[k][0])

    def checked_outputs(self, torch, cuda):
        """Its outputs from one more call on the first copy, into buffers
        filled with NaN (-1 for integers) first."""
        arr, outs = self.frames[0]
        for t in outs.values():
            if t.is_floating_point():
                t.fill_(float("nan"))
            else:
                t.fill_(-1)
        self.entry(arr)
        if cuda:
            torch.cuda.synchronize()
        return list(outs.values())


def openmp_runtimes():
    """The OpenMP runtimes mapped in this process (libgomp, libomp, libiomp:
    torch's and the kernels'), each opened for omp_set_num_threads."""
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[5]).startswith(("libgomp", "libomp", "libiomp")):
                if fields[5] not in paths:
                    paths.append(fields[5])
    libs = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            libs.append(lib)
        except (OSError, AttributeError):
            pass
    return libs


class Alarm:
    """Raises TimeoutError in the main thread after `seconds` (0: never)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds > 0:
            def fire(signum, frame):
                raise TimeoutError(f"did not build within {self.seconds:g} s")
            self.previous = signal.signal(signal.SIGALRM, fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def last_line(exc):
    lines = traceback.format_exception_only(type(exc), exc)
    line = lines[-1].strip() if lines else type(exc).__name__
    if isinstance(exc, MemoryError):
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit != resource.RLIM_INFINITY:
            line += (f" (address space {vm_kib('VmSize') >> 10} MiB, peak {vm_kib('VmPeak') >> 10} MiB,"
                     f" of the worker's limit of {limit >> 20} MiB)")
    return line


def vm_kib(field):
    """A field of /proc/self/status in KiB (VmSize: the address space now)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def copy_budget(spec):
    """Bytes the input copies may take. The worker's budget, and at most a
    quarter of the address space this process has left under the worker's
    limit (RLIMIT_AS): the forms, torch.compile's build and the checked
    outputs need the rest (measured: ~600 MiB beside 64 MiB outputs, on top
    of ~800 MiB for torch itself)."""
    budget = spec.get("mem_budget_bytes", 1 << 30)
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        budget = min(budget, max(0, limit - (vm_kib("VmSize") << 10)) // 4)
    return budget


class Blas:
    """The vendor routines a task's `vendor` call may name, over torch tensors:
    OpenBLAS cblas_sgemm/cblas_sgemv on the CPU (f32), cuBLAS cublasGemmEx /
    cublasGemmStridedBatchedEx on a GPU (f32 without TF32, bf16, f16, f32
    accumulation). Each allocates its output, as the torch call does."""

    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = device.startswith("cuda")
        self.library = ""
        self.threads = 0
        if self.cuda:
            self._init_cublas()
        else:
            self._init_openblas()

    def _init_openblas(self):
        name = ctypes.util.find_library("openblas") or "libopenblas.so.0"
        self.lib = ctypes.CDLL(name)
        self.lib.cblas_sgemm.restype = None
        self.lib.cblas_sgemv.restype = None
        version = ""
        if hasattr(self.lib, "openblas_get_config"):
            self.lib.openblas_get_config.restype = ctypes.c_char_p
            version = self.lib.openblas_get_config().decode(errors="replace").split()
            version = " ".join(version[:2]) if version else ""
        self.library = version or "OpenBLAS"
        # Its own pool, not OpenMP's: omp_set_num_threads does not reach it,
        # so the form is labelled with the count it runs at.
        if hasattr(self.lib, "openblas_get_num_threads"):
            self.lib.openblas_get_num_threads.restype = ctypes.c_int
            self.threads = self.lib.openblas_get_num_threads()

    def _init_cublas(self):
        torch = self.torch
        # torch links cuBLAS: find the copy it loaded, so both use one library.
        torch.matmul(torch.ones(8, 8, device="cuda"), torch.ones(8, 8, device="cuda"))
        path = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                part = line.split()
                if part and "libcublas.so" in part[-1] and "Lt" not in os.path.basename(part[-1]):
                    path = part[-1]
                    break
        self.lib = ctypes.CDLL(path or "libcublas.so")
        handle = ctypes.c_void_p()
        if self.lib.cublasCreate_v2(ctypes.byref(handle)) != 0:
            raise RuntimeError("cublasCreate failed")
        self.handle = handle
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.lib.cublasSetStream_v2(self.handle, stream)
        ver = ctypes.c_int()
        self.lib.cublasGetVersion_v2(self.handle, ctypes.byref(ver))
        v = ver.value
        self.library = f"cuBLAS {v // 10000}.{(v // 100) % 100}.{v % 100}"

    # cudaDataType_t of each dtype cuBLAS takes here.
    CUDA_TYPES = {"float32": 0, "float16": 2, "bfloat16": 14}

    def gemm(self, A, B, trans_a=False, trans_b=False):
        torch = self.torch
        batched = A.dim() == 3
        if batched != (B.dim() == 3) or A.dim() not in (2, 3):
            raise ValueError("gemm takes two 2-D or two 3-D tensors")
        M = A.shape[-1] if trans_a else A.shape[-2]
        K = A.shape[-2] if trans_a else A.shape[-1]
        N = B.shape[-2] if trans_b else B.shape[-1]
        Kb = B.shape[-1] if trans_b else B.shape[-2]
        if K != Kb:
            raise ValueError(f"gemm: inner sizes differ ({K} and {Kb})")
        batch = A.shape[0] if batched else 1
        C = torch.empty((batch, M, N) if batched else (M, N), dtype=A.dtype, device=A.device)
        lda = A.shape[-1]
        ldb = B.shape[-1]
        if self.cuda:
            self._cublas_gemm(A, B, C, trans_a, trans_b, M, N, K, lda, ldb, batch)
        else:
            if A.dtype != torch.float32:
                raise ValueError(f"OpenBLAS cblas_sgemm takes float32, not {A.dtype}")
            # CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112.
            for b in range(batch):
                a = A[b] if batched else A
                bb = B[b] if batched else B
                c = C[b] if batched else C
                self.lib.cblas_sgemm(101, 112 if trans_a else 111, 112 if trans_b else 111,
                                     M, N, K, ctypes.c_float(1.0), ctypes.c_void_p(a.data_ptr()), lda,
                                     ctypes.c_void_p(bb.data_ptr()), ldb, ctypes.c_float(0.0),
                                     ctypes.c_void_p(c.data_ptr()), N)
        return C

    def _cublas_gemm(self, A, B, C, trans_a, trans_b, M, N, K, lda, ldb, batch):
        dtype = str(A.dtype).replace("torch.", "")
        if dtype not in self.CUDA_TYPES:
            raise ValueError(f"cuBLAS gemm here takes float32, float16 or bfloat16, not {dtype}")
        t = self.CUDA_TYPES[dtype]
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        # Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
        # pass B first. CUBLAS_COMPUTE_32F = 68 (no TF32), CUBLAS_GEMM_DEFAULT = -1.
        common = [self.handle, 1 if trans_b else 0, 1 if trans_a else 0, N, M, K, ctypes.byref(alpha)]
        if batch == 1 and A.dim() == 2:
            status = self.lib.cublasGemmEx(
                *common, ctypes.c_void_p(B.data_ptr()), t, ldb, ctypes.c_void_p(A.data_ptr()), t, lda,
                ctypes.byref(beta), ctypes.c_void_p(C.data_ptr()), t, N, 68, -1)
        else:
            status = self.lib.cublasGemmStridedBatchedEx(
                *common, ctypes.c_void_p(B.data_ptr()), t, ldb, ctypes.c_longlong(B.stride(0)),
                ctypes.c_void_p(A.data_ptr()), t, lda, ctypes.c_longlong(A.stride(0)),
                ctypes.byref(beta), ctypes.c_void_p(C.data_ptr()), t, N, ctypes.c_longlong(C.stride(0)),
                batch, 68, -1)
        if status != 0:
            raise RuntimeError(f"cuBLAS gemm returned status {status}")

    def gemv(self, A, x):
        torch = self.torch
        if self.cuda:
            return self.gemm(A, x.reshape(-1, 1)).reshape(-1)
        if A.dtype != torch.float32:
            raise ValueError(f"OpenBLAS cblas_sgemv takes float32, not {A.dtype}")
        M, N = A.shape
        y = torch.empty(M, dtype=A.dtype)
        self.lib.cblas_sgemv(101, 111, M, N, ctypes.c_float(1.0), ctypes.c_void_p(A.data_ptr()), N,
                             ctypes.c_void_p(x.data_ptr()), 1, ctypes.c_float(0.0),
                             ctypes.c_void_p(y.data_ptr()), 1)
        return y


class Form:
    """One production form: a callable over one input copy."""

    def __init__(self, name, call, threads, library):
        self.name = name
        self.call = call
        self.threads = threads
        self.library = library
        self.fn = None
        self.error = ""
        self.series = Series()


def outputs_of(value, spec, torch):
    """The form's result as the task's outputs: a list of contiguous tensors
    in the task's dtypes; ValueError naming what does not fit."""
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(values) != len(spec["outputs"]):
        raise ValueError(f"returned {len(values)} tensor(s); the task has {len(spec['outputs'])} output(s)")
    out = []
    for v, o in zip(values, spec["outputs"]):
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"output {o['name']}: returned {type(v).__name__}, not a tensor")
        want = math.prod(o["shape"])
        if v.numel() != want:
            raise ValueError(f"output {o['name']}: returned shape {list(v.shape)} ({v.numel()} elements); "
                             f"the task's is {o['shape']} ({want})")
        out.append(v.reshape(o["shape"]).to(getattr(torch, DTYPES[o["dtype"]][0])).contiguous())
    return out


def main():
    ap = argparse.ArgumentParser()
    for name in ("spec", "inputs", "kernel", "rival", "device", "outputs", "result", "phase"):
        ap.add_argument("--" + name, default="")
    ap.add_argument("--time_cap_s", type=float, default=3.0)
    ap.add_argument("--torch_compile_timeout_s", type=float, default=120.0)
    args = ap.parse_args()
    result = {"status": "INFRA_ERROR", "message": ""}

    def phase(name):
        if args.phase:
            with open(args.phase, "w") as f:
                f.write(name)

    def finish(code):
        with open(args.result, "w") as f:
            json.dump(result, f)
        sys.stdout.flush()
        os._exit(code)

    try:
        phase("import_torch")
        # OpenBLAS's pool (Debian's pthread build, under torch.matmul and the
        # vendor form) spins 2^28 cycles (~0.1 s) after each call before it
        # sleeps, beside whatever is timed next: a 6.3 ms GEMM kernel timed
        # right after torch.matmul read 15.8 ms. 2^20 cycles (~0.4 ms) keeps
        # it hot across one series' back-to-back calls and idle by the next
        # series (see wait_idle). Read when torch loads OpenBLAS.
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
        import torch
        result["torch"] = torch.__version__
        spec = json.load(open(args.spec))
        run(torch, spec, args, result, phase)
        result["status"] = "OK"
        phase("done")
        finish(0)
    except Exception as e:  # the runner's own failure, or torch missing
        result["message"] = last_line(e)
        result["traceback"] = "".join(traceback.format_exc().splitlines(True)[-8:])
        finish(2)


def run(torch, spec, args, result, phase):
    device = args.device or "cpu"
    cuda = device.startswith("cuda")
    if cuda:
        if not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} sees no GPU")
        torch.cuda.set_device(torch.device(device))
    else:
        keep_freed_memory()
    start_all = time.perf_counter()

    # The timed inputs, as the worker wrote them.
    phase("inputs")
    # Read straight into each tensor (no whole-file or per-input copy: under
    # the worker's address-space limit every transient buffer counts, and
    # this process keeps what it frees, keep_freed_memory).
    first = {}
    digest = hashlib.sha256()
    with open(args.inputs, "rb") as f:
        for i in spec["inputs"]:
            t = torch.empty(i["shape"], dtype=getattr(torch, DTYPES[i["dtype"]][0]))
            view = byte_view(torch, t)
            if f.readinto(view) != len(view):
                raise RuntimeError("the timed-inputs file is shorter than the inputs")
            digest.update(view)
            first[i["name"]] = t.to(device).contiguous() if cuda else t
    set_bytes = sum(t.numel() * t.element_size() for t in first.values())
    set_bytes += sum(math.prod(o["shape"]) * DTYPES[o["dtype"]][1] for o in spec["outputs"])
    set_bytes = max(set_bytes, 1)
    # Input copies, as kevo-runner-cpu rotates them; on a GPU the L2 is flushed
    # before every sample instead.
    copies = 1
    if not cuda:
        target = 2 * min(spec.get("llc_bytes", 32 << 20), 256 << 20)
        copies = max(1, min(256, -(-target // set_bytes), copy_budget(spec) // set_bytes))
    sets = [first] + [{k: v.clone() for k, v in first.items()} for _ in range(copies - 1)]
    result["copies"] = copies

    def make_outputs():
        # Written once here, so that no timed call pays for the first touch of
        # its output pages: with many copies (a large last-level cache) the
        # first pass over them was mostly page faults (3 ms a call on a VM
        # whose faults cost ~10 us each, for a 25 us kernel).
        outs = [torch.empty(o["shape"], dtype=getattr(torch, DTYPES[o["dtype"]][0]), device=device)
                for o in spec["outputs"]]
        for t in outs:
            t.zero_()
        return outs

    # The candidate (and the rival) over each copy: argument arrays built once.
    phase("load")
    cand = Kernel(args.kernel, spec, sets, make_outputs)
    rival = None
    if args.rival:
        try:
            rival = Kernel(args.rival, spec, sets, make_outputs)
        except Exception as e:  # the candidate is timed without it
            result["rival_error"] = f"the rival did not load: {last_line(e)}"
    kernels = [k for k in (cand, rival) if k is not None]

    # The forms, each built and called once (a form that fails is dropped).
    phase("build")
    torch_threads = torch.get_num_threads()
    forms = []
    names = [i["name"] for i in spec["inputs"]] + list(spec["symbols"].keys())
    scope = {"torch": torch, "F": torch.nn.functional}
    expr = spec.get("torch", "")
    if expr:
        lam = f"lambda {', '.join(names)}: ({expr})"
        thread_counts = [0] if cuda else ([torch_threads] + [n for n in spec.get("threads", []) if n != torch_threads])
        for n in dict.fromkeys(thread_counts):
            f = Form("torch_eager" if n in (0, torch_threads) else f"torch_eager_{n}t", expr, n,
                     f"torch {torch.__version__}")
            try:
                f.fn = eval(lam, dict(scope))
            except SyntaxError as e:
                f.error = f"the expression does not parse: {last_line(e)}"
            forms.append(f)
        comp = Form("torch_compile", expr, torch_threads if not cuda else 0, f"torch {torch.__version__}")
        if not hasattr(torch, "compile"):
            comp.error = f"torch.compile unavailable: torch {torch.__version__} has no torch.compile"
        else:
            try:
                comp.fn = torch.compile(eval(lam, dict(scope)))
            except Exception as e:
                comp.error = f"torch.compile unavailable: {last_line(e)}"
        forms.append(comp)
    vendor = spec.get("vendor", "")
    if vendor:
        f = Form("vendor", vendor, 0 if cuda else torch_threads, "")
        try:
            blas = Blas(torch, device)
            f.library = blas.library
            if not cuda and blas.threads > 0:
                f.threads = blas.threads
            f.fn = eval(f"lambda {', '.join(names)}: ({vendor})",
                        {"gemm": blas.gemm, "gemv": blas.gemv, "torch": torch})
        except Exception as e:
            f.error = f"the vendor library is unavailable: {last_line(e)}"
        forms.append(f)

    def call_form(f, s):
        args_ = [s[n] for n in names[:len(spec["inputs"])]] + [spec["symbols"][n] for n in names[len(spec["inputs"]):]]
        return f.fn(*args_)

    # Each call runs under its own thread count, the kernels under the
    # worker's (every CPU, as in kevo-runner-cpu). The count is OpenMP's for
    # the process: torch's operators (at::get_num_threads is
    # omp_get_max_threads) and the kernels' `#pragma omp parallel` follow it.
    # It is set with omp_set_num_threads in every OpenMP runtime mapped, not
    # with torch.set_num_threads: that one also resizes torch's pthreadpool,
    # whose threads then spin beside the next calls (seen on a 2-CPU host: a
    # 2.3 ms kernel timed at 6-8 ms in most samples after each change).
    cand_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    result["candidate_threads"] = 0 if cuda else cand_threads
    omp = [] if cuda else openmp_runtimes()

    def use_threads(n):
        if cuda or not n or torch.get_num_threads() == n:
            return
        if omp:
            for lib in omp:
                lib.omp_set_num_threads(n)
        else:
            torch.set_num_threads(n)

    def set_threads(f):
        use_threads(cand_threads if f is None else f.threads)

    for f in forms:
        if f.fn is None:
            continue
        set_threads(f)
        try:
            with Alarm(args.torch_compile_timeout_s if f.name == "torch_compile" else 0):
                for _ in range(2):  # compile, then warm
                    outputs_of(call_form(f, sets[0]), spec, torch)
                if cuda:
                    torch.cuda.synchronize()
        except Exception as e:
            f.error = (f"torch.compile unavailable: {last_line(e)}" if f.name == "torch_compile"
                       else f"raised {last_line(e)}")
            f.fn = None
    live = [f for f in forms if f.fn is not None]
    use_threads(cand_threads)

    # Timing.
    phase("profile")
    next_copy = [0]
    if cuda:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = getattr(props, "L2_cache_size", 0) or (64 << 20)
        flush = torch.ones(2 * l2 // 4, dtype=torch.float32, device="cuda")
        ev0 = torch.cuda.Event(enable_timing=True)
        ev1 = torch.cuda.Event(enable_timing=True)

    def sample(fn, calls, series=None):
        """Runs fn(copy) `calls` times; returns (start, seconds per call)."""
        if cuda:
            torch.cuda.synchronize()
            torch.sum(flush)
            start = time.perf_counter()
            if series is not None:
                series.copies.add(0)
            ev0.record()
            fn(0)
            ev1.record()
            ev1.synchronize()
            torch.cuda.synchronize()
            return start, ev0.elapsed_time(ev1) / 1e3
        wait_idle()
        # One untimed call first: the previous sample may have run under
        # another thread count, and OpenMP's first region after a change
        # pays for waking its team, which a loop of calls never does.
        fn(next_copy[0])
        next_copy[0] = (next_copy[0] + 1) % len(sets)
        if series is not None:
            series.copies.update((next_copy[0] + i) % len(sets) for i in range(calls))
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        for _ in range(calls):
            fn(next_copy[0])
            next_copy[0] = (next_copy[0] + 1) % len(sets)
        seconds = (time.perf_counter() - start) / calls
        if series is not None:
            # A form that faulted in its result on every call would be timed
            # at the OS's cost (keep_freed_memory); the worker's tests read it.
            series.minor_faults += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
            series.timed_calls += calls
        return start, seconds

    # (name, form): form None for a kernel, which runs under the worker's
    # thread count.
    entries = [("candidate", None)] + ([("rival", None)] if rival else []) + [(f.name, f) for f in live]
    kernel_of = {"candidate": cand, "rival": rival}

    def fn_of(name, f):
        if f is None:
            return kernel_of[name]
        return lambda k: call_form(f, sets[k])

    def series_of(name, f):
        return kernel_of[name].series if f is None else f.series

    # Warm-up and the batch size of each series (CPU: a sample lasts >= 200 us).
    est = {}
    for name, f in entries:
        set_threads(f)
        best = min(sample(fn_of(name, f), 1)[1] for _ in range(3))
        est[name] = best
    use_threads(cand_threads)
    for name, f in entries:
        series_of(name, f).calls = 1 if cuda else max(1, min(100000, int(200e-6 / max(est[name], 1e-9)) + 1))
    all_series = [series_of(name, f) for name, f in entries]
    t0 = time.perf_counter()
    rounds = 0
    while True:
        order = entries[rounds % len(entries):] + entries[:rounds % len(entries)]
        for name, f in order:
            series = series_of(name, f)
            set_threads(f)
            st, sec = sample(fn_of(name, f), series.calls, series)
            use_threads(cand_threads)
            series.add(st, sec)
        rounds += 1
        elapsed = time.perf_counter() - t0
        if rounds >= 10 and all(s.spread() < 0.01 for s in all_series):
            break
        if (elapsed > args.time_cap_s and rounds >= 10) or (elapsed > 3 * args.time_cap_s and rounds >= 3) \
                or rounds >= 20000:
            break
    result["rounds"] = rounds

    # One more call of each form on the first copy, then the candidate's and
    # the rival's on fresh NaN-filled outputs: the worker checks them against
    # the reference.
    phase("check")
    with open(args.outputs, "wb") as out:
        for f in forms:
            if f.fn is None:
                continue
            set_threads(f)
            try:
                for t in outputs_of(call_form(f, sets[0]), spec, torch):
                    out.write(byte_view(torch, t.cpu().contiguous()))
            except Exception as e:
                f.error = f"raised {last_line(e)}"
                f.fn = None
                raise RuntimeError(f"form {f.name} raised after timing: {last_line(e)}")
        use_threads(cand_threads)
        for k in kernels:
            for t in k.checked_outputs(torch, cuda):
                out.write(byte_view(torch, t.cpu().contiguous()))
    # What each series ran on: a digest of every input copy it touched, after
    # timing (a copy a call changed no longer matches the inputs file).
    digests = []
    for s_ in sets:
        h = hashlib.sha256()
        for i in spec["inputs"]:
            h.update(byte_view(torch, s_[i["name"]].cpu().contiguous()))
        digests.append(h.hexdigest())
    result["inputs_digest"] = digest.hexdigest()
    result["candidate"] = cand.series.to_json(digests)
    if rival:
        result["rival"] = rival.series.to_json(digests)
    result["forms"] = [{"name": f.name, "call": f.call, "threads": f.threads, "library": f.library,
                        "series": f.series.to_json(digests),
                        "timed": f.fn is not None, "error": f.error} for f in forms]
    result["elapsed_s"] = time.perf_counter() - start_all
    result["vm_peak_bytes"] = vm_kib("VmPeak") << 10


if __name__ == "__main__":
    main()
