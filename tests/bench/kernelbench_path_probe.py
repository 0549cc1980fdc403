#!/usr/bin/env python3
"""Where the KernelBench judge's cross-process path costs time on a GPU.

The judge times the candidate in its own process: it wakes the stopped
process (SIGCONT), sends a request, the candidate runs ModelNew on inputs it
reads through CUDA IPC mappings of the judge's memory, synchronises, exports
its outputs and replies; the judge views the outputs through IPC, touches them
and synchronises. On an H200 the same aten call timed that way read about
1 ms slower than in the judge's own process (docs/benchmarks.md). This probe
times one operation every way in between, side by side in one run, so the
step that costs it shows:

  inproc        the judge's own call on its own memory (as eager is timed)
  child_own     a second process, timing itself, on memory it allocated
  child_ipc     the same, on the judge's memory opened through CUDA IPC
  rt_ipc        the judge's clock around a request to that process (no stop)
  rt_stopped    the same, the process stopped (SIGSTOP) between requests
  rt_view       rt_stopped plus viewing and touching the output (the judge's
                sample exactly)
  nop           a no-work request's round trip (stopped between)

Each as a median over rounds in which every variant runs once, in rotating
order, the L2 flushed before each call. GPU-side times (CUDA events around the
call in whichever process runs it) separate a slower kernel from a slower path.

  python3 tests/bench/kernelbench_path_probe.py [--op matmul|relu|both] [--rounds N] [--confine]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "runner"))


def make_inputs(torch, op):
    g = torch.Generator(device="cuda").manual_seed(1)
    if op == "matmul":
        n = 4096
        return [torch.rand(n, n, device="cuda", generator=g), torch.rand(n, n, device="cuda", generator=g)]
    return [torch.rand(4096, 16384, device="cuda", generator=g)]


def run_op(torch, op, xs):
    return torch.matmul(xs[0], xs[1]) if op == "matmul" else torch.relu(xs[0])


def contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= n
    return strides


def send(sock, obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


def recv(sock, buf):
    while b"\n" not in buf[0]:
        data = sock.recv(1 << 16)
        if not data:
            raise EOFError
        buf[0] += data
    line, buf[0] = buf[0].split(b"\n", 1)
    return json.loads(line)


def child(fd, op, confine):
    import torch
    from kernelbench_runner import CudaIpc, confine_candidate, view_at

    if confine:  # the candidate's seccomp filter, as the judge installs it
        confine_candidate()

    sock = socket.socket(fileno=fd)
    buf = [b""]
    ipc = CudaIpc()
    own = make_inputs(torch, op)
    flush = torch.ones(2 * (64 << 20) // 4, device="cuda")
    theirs = None
    while True:
        m = recv(sock, buf)
        if m["op"] == "exit":
            return
        if m["op"] == "inputs":
            theirs = []
            for d in m["tensors"]:
                ptr = ipc.open(d["handle"])[0] + d["offset"]
                theirs.append(view_at(torch, ptr, d["nbytes"], torch.float32, d["shape"],
                                      contiguous_strides(d["shape"])))
            send(sock, {"ok": True})
        elif m["op"] == "self":  # time itself: own memory or the judge's
            xs = own if m["which"] == "own" else theirs
            torch.sum(flush)
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            e0.record()
            run_op(torch, op, xs)
            e1.record()
            torch.cuda.synchronize()
            send(sock, {"wall": time.perf_counter() - t0, "gpu": e0.elapsed_time(e1) / 1e3})
        elif m["op"] == "call":  # the judge times it
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            out = run_op(torch, op, theirs)
            e1.record()
            torch.cuda.synchronize()
            handle, offset, size = ipc.export(out.data_ptr())
            send(sock, {"handle": handle, "offset": offset, "shape": list(out.shape),
                        "gpu": e0.elapsed_time(e1) / 1e3})
        elif m["op"] == "nop":
            send(sock, {"ok": True, "pad": "x" * 200})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="both")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--confine", action="store_true", help="the child under the candidate's seccomp filter")
    ap.add_argument("--child", type=int, default=-1)
    a = ap.parse_args()
    if a.child >= 0:
        return child(a.child, a.op, a.confine)
    import torch
    from kernelbench_runner import CudaIpc, view_at

    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    report = {}
    for op in (["matmul", "relu"] if a.op == "both" else [a.op]):
        ipc = CudaIpc()
        xs = make_inputs(torch, op)
        flush = torch.ones(2 * (64 << 20) // 4, device="cuda")
        gather = torch.randint(0, 1 << 62, (1024,), device="cuda")
        ours, theirs = socket.socketpair()
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(theirs.fileno()),
                                 "--op", op] + (["--confine"] if a.confine else []), pass_fds=[theirs.fileno()], process_group=0)
        theirs.close()
        buf = [b""]
        tensors = []
        for x in xs:
            h, off, _ = ipc.export(x.data_ptr())
            tensors.append({"handle": h, "offset": off, "shape": list(x.shape), "nbytes": x.numel() * 4})
        send(ours, {"op": "inputs", "tensors": tensors})
        recv(ours, buf)
        stopped = [False]

        def stop():
            os.killpg(proc.pid, signal.SIGSTOP)
            os.waitpid(proc.pid, os.WUNTRACED)
            stopped[0] = True

        def cont():
            if stopped[0]:
                os.killpg(proc.pid, signal.SIGCONT)
                stopped[0] = False

        def idle():
            torch.sum(flush)
            torch.cuda.synchronize()

        def inproc():
            idle()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            e0.record()
            out = run_op(torch, op, xs)
            e1.record()
            out.reshape(-1)[gather % out.numel()]
            torch.cuda.synchronize()
            return time.perf_counter() - t0, e0.elapsed_time(e1) / 1e3

        def self_timed(which):
            def f():
                cont()
                send(ours, {"op": "self", "which": which})
                r = recv(ours, buf)
                return r["wall"], r["gpu"]
            return f

        def round_trip(stopping, view):
            def f():
                if stopping:
                    stop()
                idle()
                cont()
                t0 = time.perf_counter()
                send(ours, {"op": "call"})
                r = recv(ours, buf)
                if view:
                    base, _ = ipc.open(r["handle"])
                    shape = r["shape"]
                    n = 1
                    for s in shape:
                        n *= s
                    out = view_at(torch, base + r["offset"], n * 4, torch.float32, shape,
                                  contiguous_strides(shape))
                    out.reshape(-1)[gather % out.numel()]
                    torch.cuda.synchronize()
                return time.perf_counter() - t0, r["gpu"]
            return f

        def nop():
            stop()
            cont()
            t0 = time.perf_counter()
            send(ours, {"op": "nop"})
            recv(ours, buf)
            return time.perf_counter() - t0, 0.0

        variants = {"inproc": inproc, "child_own": self_timed("own"), "child_ipc": self_timed("ipc"),
                    "rt_ipc": round_trip(False, False), "rt_stopped": round_trip(True, False),
                    "rt_view": round_trip(True, True), "nop": nop}
        names = list(variants)
        samples = {n: [] for n in names}
        for r in range(a.rounds + 3):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                wall, gpu = variants[n]()
                if r >= 3:  # warm-up rounds
                    samples[n].append((wall, gpu))
        cont()
        send(ours, {"op": "exit"})
        proc.wait()
        rows = {}
        for n in names:
            wall = statistics.median(s[0] for s in samples[n])
            gpu = statistics.median(s[1] for s in samples[n])
            rows[n] = {"wall_us": round(wall * 1e6, 1), "gpu_us": round(gpu * 1e6, 1)}
            print(f"{op:7s} {n:11s} wall {wall * 1e6:9.1f} us   gpu {gpu * 1e6:9.1f} us", flush=True)
        report[op] = rows
    print(json.dumps(report))


if __name__ == "__main__":
    main()
