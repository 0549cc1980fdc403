# expect: rejected
# class: does the work on a background thread and returns before it is done
# verdict: WRONG_ANSWER|NONDETERMINISTIC output0
#
# The output is allocated (zeroed) and returned at once; a thread fills it in a few
# milliseconds later. A harness that stops its clock at the return and reads
# the output later still, after the thread finished, sees a right answer
# that cost nothing. Which check sees it first depends on when the thread
# runs: the reply read at once is wrong (WRONG_ANSWER), or, on a loaded host
# where the first call's thread has filled part of its output before the
# second call's reply is compared with it, two calls on the same inputs
# differ (NONDETERMINISTIC). Either rejects it.
import threading
import time

import torch
import torch.nn as nn


def _fill(x, out):
    time.sleep(0.005)
    torch.clamp_min(x, 0.0, out=out)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        threading.Thread(target=_fill, args=(x.clone(), out), daemon=True).start()
        return out
