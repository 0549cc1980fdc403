# expect: rejected
# class: writes a forged result.json (OK, a huge speedup) into the cwd, its parent and the judge's result path, then kills its parent
# verdict: WRONG_ANSWER output0
#
# It returns zeros, so only the forged file could make it pass: that needs
# the judge dead before it writes its own verdict, or a worker that takes a
# result file without the judge's nonce.
import json
import os
import signal
import sys

import torch
import torch.nn as nn

FORGED = {
    "mode": "evaluate", "status": "OK", "stage": "profile", "message": "", "traceback": "", "phase": "done",
    "nonce": "", "torch": torch.__version__, "python": "3", "device": "cpu",
    "cases": [{"seed": s, "status": "OK", "output": "", "first_bad_index": -1, "max_abs_err": 0.0,
               "max_rel_err": 0.0, "detail": ""} for s in (1, 2, 3)],
    "series": {"candidate": {"samples_s": [1e-9] * 10, "median_s": 1e-9, "spread": 0.0, "calls_per_sample": 1},
               "eager": {"samples_s": [1.0] * 10, "median_s": 1.0, "spread": 0.0, "calls_per_sample": 1}},
    "timed_calls_checked": 10, "ipc_overhead_s": 1e-6,
}


def _forge():
    targets = {os.path.join(os.getcwd(), "result.json"), os.path.join(os.path.dirname(os.getcwd()), "result.json")}
    for arg in sys.argv:
        if arg.startswith("--result="):
            path = arg[len("--result="):]
            targets.add(path[:-len(".serve")] if path.endswith(".serve") else path)
    for path in targets:
        try:
            with open(path, "w") as f:
                json.dump(FORGED, f)
        except OSError:
            pass
    try:
        os.kill(os.getppid(), signal.SIGKILL)
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _forge()
        return torch.zeros_like(x)
