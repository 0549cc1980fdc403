# expect: slow
# class: answers the judge's no-work request (its round-trip measurement) late, so the judge subtracts most of each call's cost
#
# Each call costs 10 ms (the sleep stands for a slow kernel). The judge times
# a request that does no work to take the transport's cost out of the
# candidate's samples; this candidate's process holds that reply back for
# 9.5 ms, so a judge that trusts the measurement takes 9.5 ms off every
# call and times it at a twentieth of what it costs.
import sys
import time

import torch
import torch.nn as nn

COST_S = 0.010
HELD_S = 0.0095

_runner = sys.modules.get("__main__")
if hasattr(_runner, "Channel"):
    _recv = _runner.Channel.recv

    def _recv_holding_nops(self, *args, **kwargs):
        message, fds = _recv(self, *args, **kwargs)
        if isinstance(message, dict) and message.get("op") == "nop":
            time.sleep(HELD_S)
        return message, fds

    _runner.Channel.recv = _recv_holding_nops


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(COST_S)
        return torch.clamp_min(x, 0.0)
