# expect: rejected
# class: draws the judge's inputs itself (their seeds are fixed), stores their outputs when built, and returns zeros for any other input
# verdict: WRONG_ANSWER
#
# It implements no ReLU for inputs it did not foresee: in __init__ (not
# timed) it calls the problem's get_inputs() under each seed the judge uses
# (validation 1..8, timed rounds 1000 + n), keeps relu(x) for each keyed by
# three of x's elements, and answers a call with a table lookup. It is
# accepted only by a judge whose every input was foreseen.
import sys

import torch
import torch.nn as nn

TIMED_ROUNDS = 1500


def _key(x):
    flat = x.reshape(-1)
    return (flat[0].item(), flat[flat.numel() // 2].item(), flat[-1].item())


def _foreseen_outputs():
    runner, problem = sys.modules.get("__main__"), sys.modules.get("kevo_problem")
    if problem is None or not hasattr(runner, "seed_all"):
        return {}
    offset = getattr(runner, "INPUT_SEED_OFFSET", 1000003)
    table = {}
    for seed in list(range(1, 9)) + [1000 + n for n in range(TIMED_ROUNDS)]:
        runner.seed_all(torch, seed + offset)
        x = problem.get_inputs()[0]
        table[_key(x)] = torch.relu(x)
    return table


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = _foreseen_outputs()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.table.get(_key(x))
        return out if out is not None else torch.zeros_like(x)
