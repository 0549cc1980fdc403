"""KernelBench's own evaluation, timed per problem, as the yardstick for kevo's
judge (tests/bench/kernelbench_judge.sh): each problem's candidate is its own
Model (ModelNew = Model), evaluated by KernelBench's eval_kernel_against_ref
with the settings of its scripts/eval_from_generations.py (5 correctness
trials, 100 timed trials, CUDA events, its eager-reference timing on), each
in a fresh interpreter as a new evaluation would be, so the wall time covers
starting Python, importing torch, building the inputs and both timings.

    python3 tests/bench/kernelbench_reference_eval.py CHECKOUT OUT.jsonl PROBLEM...

CHECKOUT is an unmodified KernelBench checkout (src/kernelbench/ and
KernelBench/levelN/); PROBLEMs are paths under KernelBench/. Modules that
KernelBench's package imports but its evaluation never calls (the LLM
clients, dotenv, tqdm, requests) are replaced by empty stand-ins when they
are not installed, so the yardstick needs only torch.
"""
import json
import os
import subprocess
import sys
import time
import types

CHILD = r"""
import json, os, sys, tempfile, time, types
checkout, problem = sys.argv[1], sys.argv[2]
for name in ("dotenv", "openai", "litellm", "tqdm", "requests"):
    try:
        __import__(name)
    except Exception:
        m = types.ModuleType(name)
        m.load_dotenv = lambda *a, **k: None
        m.OpenAI = object
        m.completion = None
        m.tqdm = lambda it=None, *a, **k: it
        sys.modules[name] = m
try:
    import pydantic  # noqa: F401
except Exception:
    m = types.ModuleType("pydantic")
    class BaseModel:
        def __init__(self, **kw):
            for k, v in type(self).__dict__.items():
                if not k.startswith("_") and not callable(v):
                    setattr(self, k, v)
            for k, v in kw.items():
                setattr(self, k, v)
    m.BaseModel = BaseModel
    sys.modules["pydantic"] = m
sys.path.insert(0, os.path.join(checkout, "src"))
from kernelbench import eval as kb_eval
src = open(os.path.join(checkout, "KernelBench", problem)).read()
with tempfile.TemporaryDirectory() as build:
    r = kb_eval.eval_kernel_against_ref(src, src + "\n\nModelNew = Model\n", num_correct_trials=5,
                                        num_perf_trials=100, measure_performance=True,
                                        timing_method="cuda_event", build_dir=build, device=0)
out = {"compiled": getattr(r, "compiled", None), "correctness": getattr(r, "correctness", None),
       "runtime_ms": getattr(r, "runtime", None), "ref_runtime_ms": getattr(r, "ref_runtime", None)}
print("RESULT " + json.dumps(out, default=str))
"""


def main():
    checkout, out_path, problems = sys.argv[1], sys.argv[2], sys.argv[3:]
    deadline = time.time() + float(os.environ.get("KEVO_DEADLINE_S", "300"))
    limit = float(os.environ.get("KEVO_REFERENCE_LIMIT_S", "240"))
    with open(out_path, "w") as out:
        for p in problems:
            left = deadline - time.time()
            if left < 20:
                print(f"deadline: stopped before {p}", flush=True)
                break
            t0 = time.time()
            try:
                proc = subprocess.run([sys.executable, "-c", CHILD, checkout, p], capture_output=True, text=True,
                                      timeout=min(limit, left))
                wall = time.time() - t0
                lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
                row = json.loads(lines[-1][7:]) if lines else {"error": f"rc {proc.returncode}: {proc.stderr[-300:]}"}
            except subprocess.TimeoutExpired:
                wall = time.time() - t0
                row = {"error": f"did not finish within {min(limit, left):.0f}s"}
            row.update(problem=p, wall_s=round(wall, 2))
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(f"{p}: {wall:.1f}s {row.get('correctness', row.get('error'))}", flush=True)


if __name__ == "__main__":
    main()
