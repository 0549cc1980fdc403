# expect: rejected
# class: sends SIGSTOP, then SIGKILL, to its parent (os.getppid()) and its parent's process group
# verdict: RUNTIME_ERROR Operation not permitted
#
# A stopped judge never times anything; a killed one never writes a verdict.
# Each attempt's error is kept, and the candidate raises with all of them.
import os
import signal

import torch
import torch.nn as nn


def _signal_parent():
    refused = []
    parent = os.getppid()
    attempts = [(os.kill, parent, signal.SIGSTOP), (os.kill, parent, signal.SIGKILL)]
    try:
        attempts.append((os.killpg, os.getpgid(parent), signal.SIGKILL))
    except OSError as e:
        refused.append(f"getpgid: {e}")
    for send, target, sig in attempts:
        try:
            send(target, sig)
        except OSError as e:
            refused.append(f"{send.__name__}({target}, {sig.name}): {e.strerror}")
    if refused:
        raise PermissionError("kevo-adversarial: " + "; ".join(refused))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _signal_parent()
        return torch.zeros_like(x)
