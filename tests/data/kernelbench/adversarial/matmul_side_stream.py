# expect: rejected
# class: KernelBench's non-default-stream case: the work is queued on a side stream and the call returns without waiting
# problem: matmul.py
# verdict: WRONG_ANSWER output0
# expect on a GPU: slow
#
# On a GPU the work goes on a torch.cuda.Stream that the harness's clock
# (events on the default stream) does not wait for. On the CPU the stream is
# a worker thread fed through a queue, which starts a job a few milliseconds
# after it is queued, as a busy device would. On a GPU in kevo the
# candidate's process synchronises its whole device (every stream) before it
# replies, so the side stream buys nothing: right, and no faster.
import queue
import threading
import time

import torch
import torch.nn as nn


class _CpuStream:
    def __init__(self):
        self.jobs = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            job = self.jobs.get()
            time.sleep(0.005)
            job()

    def submit(self, job):
        self.jobs.put(job)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.stream = torch.cuda.Stream() if torch.cuda.is_available() else _CpuStream()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], self.linear.out_features, dtype=x.dtype, device=x.device)
        w, b = self.linear.weight, self.linear.bias
        if isinstance(self.stream, _CpuStream):
            x = x.clone()

            def job():
                with torch.no_grad():  # grad mode is per thread
                    torch.addmm(b, x, w.t(), out=out)

            self.stream.submit(job)
        else:
            with torch.cuda.stream(self.stream):
                torch.addmm(b, x, w.t(), out=out)
        return out
