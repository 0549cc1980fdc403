# A KernelBench-format problem written for kevo's tests (in the style of
# KernelBench level1/94_MSELoss, 96_HuberLoss and 98_KLDivLoss): losses and
# a sum that reduce every element to one number, written as KernelBench
# writes them, and one as a module.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.l1 = nn.L1Loss(reduction="sum")

    def forward(self, predictions, targets, p, q):
        mse = torch.mean((predictions - targets) ** 2)
        huber = torch.nn.functional.smooth_l1_loss(predictions, targets)
        kl = torch.nn.functional.kl_div(torch.log(p), q, reduction="batchmean")
        l1 = self.l1(predictions, targets)
        total = predictions.sum()
        return mse, huber, kl, l1, total


def get_inputs():
    p = torch.rand(64, 500).softmax(dim=-1)
    q = torch.rand(64, 500).softmax(dim=-1)
    return [torch.randn(64, 500), torch.randn(64, 500), p, q]


def get_init_inputs():
    return []
