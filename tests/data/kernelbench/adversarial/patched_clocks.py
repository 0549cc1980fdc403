# expect: slow
# class: patches time.perf_counter, time.time, time.monotonic, the runner's own clock and torch.cuda.Event.elapsed_time
#
# Every call costs 10 ms (the sleep stands for a slow kernel), and every clock
# this process can reach says no time passes. A harness that timed it with
# any of them would see a call that takes nothing.
import sys
import time

import torch
import torch.nn as nn


def _frozen(*args, **kwargs):
    return 0.0


def _frozen_ns(*args, **kwargs):
    return 0


for _name in ("perf_counter", "time", "monotonic", "process_time"):
    setattr(time, _name, _frozen)
for _name in ("perf_counter_ns", "time_ns", "monotonic_ns", "process_time_ns"):
    setattr(time, _name, _frozen_ns)
for _module in list(sys.modules.values()):
    if getattr(_module, "_clock", None) is not None:
        _module._clock = _frozen
if hasattr(torch, "cuda") and hasattr(torch.cuda, "Event"):
    torch.cuda.Event.elapsed_time = _frozen


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.010)
        return torch.relu(x)
