#!/usr/bin/env python3
"""The share of a model's time each kevo task covers, as a campaign's model block.

    scripts/model_profile.py MODEL.py --name ranker --platform cpu [--iters 10] [--threads N]

MODEL.py is in the KernelBench layout (Model, get_inputs, get_init_inputs). Its
forward marks the operators kevo's tasks cover with
torch.profiler.record_function("kevo:<task name>"); the script runs a few warm-up
calls, then profiles --iters calls with torch.profiler and prints, on stdout, a
`model { ... }` block for a campaign file (docs/campaigns.md): each task's share
is the time inside its ranges over the time of the whole forward calls. Time
outside any kevo range (concatenations, allocation, Python) stays unoptimised, so
the shares sum to below 1. A per-task table goes to stderr.
"""
import argparse
import importlib.util
import sys
import time
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--name", required=True, help="the model's name in the campaign")
    ap.add_argument("--platform", default="cpu")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    spec = importlib.util.spec_from_file_location("kevo_profiled_model", args.model)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = module.get_inputs()
    with torch.no_grad():
        for _ in range(args.warmup):
            model(*inputs)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.iters):
                with record_function("kevo-model-forward"):
                    model(*inputs)
    per_task = defaultdict(float)
    total = 0.0
    for event in prof.events():
        if event.name == "kevo-model-forward":
            total += event.cpu_time_total
        elif event.name.startswith("kevo:"):
            per_task[event.name[len("kevo:"):]] += event.cpu_time_total
    if total <= 0 or not per_task:
        sys.exit(f"{args.model}: no kevo:<task> ranges were profiled (mark operators with record_function)")
    shares = {t: v / total for t, v in per_task.items()}
    print(f"model {{  # measured by scripts/model_profile.py: torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {args.iters} calls, {time.strftime('%Y-%m-%d')}")
    print(f'  name: "{args.name}"')
    print(f'  platform: "{args.platform}"')
    for task, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f'  operator {{ task: "{task}" share: {share:.4f} }}')
    print("}")
    ms = total / 1000 / args.iters
    print(f"{args.model}: {ms:.1f} ms per call; kevo tasks cover {100 * sum(shares.values()):.1f}%", file=sys.stderr)
    for task, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {task:20s} {100 * share:5.1f}%  {share * ms:8.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
