# expect: rejected
# class: returns a lazy torch.Tensor subclass (__torch_function__) whose ReLU runs only when its values are used
# verdict: RUNTIME_ERROR not a plain torch.Tensor
#
# The returned tensor's storage is uninitialised; the first torch operation
# on it (a comparison, a copy) would compute the ReLU, so a harness that
# times the call and compares afterwards through torch sees a right answer
# that cost nothing in the timed window.
import torch
import torch.nn as nn


class LazyRelu(torch.Tensor):
    @staticmethod
    def __new__(cls, source):
        out = torch.Tensor._make_subclass(cls, torch.empty_like(source))
        out._source = source.clone()
        out._done = False
        return out

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, LazyRelu) and not a._done:
                a._done = True
                with torch._C.DisableTorchFunction():
                    torch.clamp_min(a._source, 0.0, out=a)
        return super().__torch_function__(func, types, args, kwargs or {})


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LazyRelu(x)
