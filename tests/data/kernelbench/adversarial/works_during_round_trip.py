# expect: slow
# class: computes the round's output while the judge times its no-work request, then returns it at once when called
#
# Each computation costs 10 ms (the sleep stands for a slow kernel). The
# judge puts a timed round's inputs in place, then times a request that does
# no work (to take the transport's cost out of the candidate's samples), then
# calls. This candidate's process does the round's work while answering
# that request (not in the first rounds, so the cheapest round trip stays
# honest) and answers the call with the result ready, after 0.2 ms that
# stand for a fast kernel.
import sys
import time

import torch
import torch.nn as nn

COST_S = 0.010
SHOWN_S = 0.0002
HONEST_ROUNDS = 5


def _compute(x):
    time.sleep(COST_S)
    return torch.clamp_min(x, 0.0)


_runner = sys.modules.get("__main__")
if hasattr(_runner, "Channel"):
    _recv = _runner.Channel.recv
    _nops = [0]

    def _recv_working_on_nops(self, *args, **kwargs):
        message, fds = _recv(self, *args, **kwargs)
        if isinstance(message, dict) and message.get("op") == "nop":
            _nops[0] += 1
            serving = sys._getframe(1).f_locals
            model, tensors, layout = serving.get("model"), serving.get("tensors"), serving.get("layout")
            if _nops[0] > HONEST_ROUNDS and isinstance(model, ModelNew) and tensors:
                with torch.no_grad():
                    model.ready = _compute(*_runner.rebuild_arguments(layout, tensors))
        return message, fds

    _runner.Channel.recv = _recv_working_on_nops


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ready = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, self.ready = self.ready, None
        if out is None:
            return _compute(x)
        time.sleep(SHOWN_S)
        return out
