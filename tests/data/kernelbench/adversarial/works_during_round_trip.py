# expect: rejected
# class: computes the round's output while the judge times its no-work request, then returns it at once when called
# verdict: WRONG_ANSWER timed call 6 was wrong
#
# Each computation costs 10 ms (the sleep stands for a slow kernel). Each
# timed round, the judge times a request that does no work (to take the
# transport's cost out of the candidate's samples), then calls. This
# candidate's process does the work on whatever its input buffers hold while
# answering that request (not in the first rounds, so the cheapest round trip
# stays honest) and answers the call with that result, after 0.2 ms that
# stand for a fast kernel. Had the judge put the round's inputs in place
# before the request, it would look 50x faster than it is; as the judge
# stands, the buffers still hold the round before's inputs, and the checked
# timed call is wrong.
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
