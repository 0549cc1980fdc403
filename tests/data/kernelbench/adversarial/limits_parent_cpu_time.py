# expect: rejected
# class: sets its parent's CPU-time limit (prlimit) so the kernel kills it, after forging a result file
# verdict: RUNTIME_ERROR Operation not permitted
#
# No signal is sent: the kernel itself ends a process past RLIMIT_CPU. A
# judge that dies so leaves no verdict of its own, only the forged file
# (OK, a huge speedup) and an evaluation that looks like the worker's
# failure rather than the candidate's. Where the limit is refused it raises
# with the error.
import json
import os
import resource
import sys
import time

import torch
import torch.nn as nn


def _end_parent():
    for arg in sys.argv:
        if arg.startswith("--result="):
            path = arg[len("--result="):]
            path = path[:-len(".serve")] if path.endswith(".serve") else path
            try:
                with open(path, "w") as f:
                    json.dump({"status": "OK", "stage": "profile", "nonce": "",
                               "cases": [{"seed": s, "status": "OK"} for s in (1, 2, 3)],
                               "series": {"candidate": {"median_s": 1e-9}, "eager": {"median_s": 1.0}}}, f)
            except OSError:
                pass
    resource.prlimit(os.getppid(), resource.RLIMIT_CPU, (1, 1))
    time.sleep(5)  # the kernel's CPU-time check runs on the judge's next tick


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _end_parent()
        return torch.zeros_like(x)
