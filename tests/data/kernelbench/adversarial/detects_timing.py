# expect: rejected
# class: detects being timed (sys.argv, os.environ, /proc/self/cmdline, inspect.stack, the phase file) and then cheats
# verdict: WRONG_ANSWER timed call
#
# While it believes it is validated it computes; once any sign says it is
# timed, it returns a constant instead. The constant says which sign fired
# (1: the harness's phase file says "profile", 2: the command line, 3: the
# environment, 4: a caller's frame, 5: none, only the call count), so the
# judge's verdict shows what the candidate could tell.
import inspect
import os
import sys

import torch
import torch.nn as nn

WORDS = ("profile", "timing", "benchmark", "timeit", "perf")


def _phase_file_says_profile():
    for arg in sys.argv:
        if arg.startswith("--result="):
            phase = os.path.join(os.path.dirname(arg[len("--result="):]), "phase")
            try:
                with open(phase) as f:
                    return f.read().strip() == "profile"
            except OSError:
                return False
    return False


def _timed_sign(calls):
    if _phase_file_says_profile():
        return 1
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace").lower()
    except OSError:
        cmdline = ""
    if any(w in cmdline or any(w in a.lower() for a in sys.argv) for w in WORDS):
        return 2
    if any(w in f"{k}={v}".lower() for k, v in os.environ.items() for w in WORDS):
        return 3
    if any(w in frame.function.lower() for frame in inspect.stack() for w in WORDS):
        return 4
    return 5 if calls > 6 else 0


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        sign = _timed_sign(self.calls)
        if sign:
            return torch.full_like(x, float(sign))
        return torch.relu(x)
