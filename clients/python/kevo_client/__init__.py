"""A thin Python client for a kevo coordinator (docs/security.md, README).

    from kevo_client import Client, load_task
    client = Client("coordinator.example:50051")      # token: KEVO_TOKEN / KEVO_TOKEN_FILE
    job = client.submit(load_task("tasks/softmax"), platform="cpu", budget=20)
    final = client.watch(job, progress=print)          # blocks until the job ends
    kernel = client.best(job)                          # GetBestResponse: node, candidate, evaluation
    client.cancel(job)

The gRPC stubs are generated from proto/ at build time (build/python, the CMake
target kevo_python_proto); put that folder and this one on PYTHONPATH.
Tasks are loaded by the kevo CLI (`kevo task export`), so Python never
re-implements the task format's checks.
"""

import os
import subprocess

import grpc

from kevo.v1 import job_pb2, job_pb2_grpc, task_pb2

__all__ = ["Client", "KevoError", "load_task", "token_from_environment"]


class KevoError(Exception):
    """A call the coordinator refused: `code` is the grpc.StatusCode."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


def token_from_environment():
    """KEVO_TOKEN, else the file KEVO_TOKEN_FILE names, else ~/.config/kevo/token; None without."""
    token = os.environ.get("KEVO_TOKEN", "").strip()
    if token:
        return token
    path = os.environ.get("KEVO_TOKEN_FILE", "")
    if not path:
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        path = os.path.join(config, "kevo", "token")
        if not os.path.exists(path):
            return None
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token:
        raise KevoError(grpc.StatusCode.INVALID_ARGUMENT, f"token file {path} is empty")
    return token


def load_task(path, kevo="kevo"):
    """The task at `path` (a task folder or a KernelBench .py) as a kevo.v1.Task, loaded by `kevo task export`."""
    r = subprocess.run([kevo, "task", "export", path], capture_output=True, check=False)
    if r.returncode != 0:
        raise KevoError(grpc.StatusCode.INVALID_ARGUMENT, r.stderr.decode(errors="replace").strip())
    task = task_pb2.Task()
    task.ParseFromString(r.stdout)
    return task


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call (plaintext on loopback too, as the CLI does)."""

    def __init__(self, token):
        self._metadata = (("authorization", f"Bearer {token}"),)

    def _with_token(self, details):
        metadata = tuple(details.metadata or ()) + self._metadata
        return details._replace(metadata=metadata) if hasattr(details, "_replace") else _Details(details, metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)


class _Details(grpc.ClientCallDetails):
    def __init__(self, base, metadata):
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


class Client:
    """JobService for one team (or the admin): submit, watch, best, cancel, jobs."""

    def __init__(self, address="127.0.0.1:50051", token=None, tls_ca=None, timeout_s=30):
        token = token if token is not None else token_from_environment()
        tls_ca = tls_ca if tls_ca is not None else os.environ.get("KEVO_TLS_CA")
        options = [("grpc.max_receive_message_length", 64 << 20)]
        if tls_ca:
            with open(tls_ca, "rb") as f:
                channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(f.read()), options)
        else:
            channel = grpc.insecure_channel(address, options)
        if token:
            channel = grpc.intercept_channel(channel, _Bearer(token))
        self._channel = channel
        self._stub = job_pb2_grpc.JobServiceStub(channel)
        self._timeout = timeout_s
        self.address = address

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout=None):
        try:
            return method(request, timeout=timeout or self._timeout)
        except grpc.RpcError as e:
            raise KevoError(e.code(), e.details()) from None

    def submit(self, task, platform="cpu", budget=60, **spec_fields):
        """Submits a search job for `task` (a kevo.v1.Task, see load_task); returns its id.

        Other JobSpec fields (policy, proposer, warm_start, seed, ...) go by keyword."""
        spec = job_pb2.JobSpec(task=task, platform=platform, budget=job_pb2.Budget(max_evaluations=budget),
                               **spec_fields)
        return self._call(self._stub.SubmitJob, job_pb2.SubmitJobRequest(spec=spec)).job_id

    def job(self, job_id):
        return self._call(self._stub.GetJob, job_pb2.GetJobRequest(job_id=job_id))

    def jobs(self):
        """Every job the caller may see (a team: its own), page by page."""
        out, token = [], ""
        while True:
            resp = self._call(self._stub.ListJobs, job_pb2.ListJobsRequest(page_size=500, page_token=token))
            out.extend(resp.jobs)
            token = resp.next_page_token
            if not token:
                return out

    def watch(self, job_id, progress=None, timeout_s=24 * 3600):
        """Streams the job's events until it ends; calls progress(job) after each; returns the final Job."""
        last = None
        try:
            for event in self._stub.WatchJob(job_pb2.WatchJobRequest(job_id=job_id), timeout=timeout_s):
                last = event.job
                if progress is not None:
                    progress(last)
        except grpc.RpcError as e:
            raise KevoError(e.code(), e.details()) from None
        return self.job(job_id) if last is None else self.job(last.job_id)

    def best(self, job_id):
        """The job's best kernel: GetBestResponse (node, candidate with its source, evaluation)."""
        return self._call(self._stub.GetBest, job_pb2.GetBestRequest(job_id=job_id))

    def cancel(self, job_id):
        return self._call(self._stub.CancelJob, job_pb2.CancelJobRequest(job_id=job_id))


def progress_line(job):
    """One line a script can print for a Job: evaluations done of the budget, best so far."""
    return (f"{job.job_id} {job_pb2.JobState.Name(job.state)} "
            f"{job.evaluations_done}/{job.spec.budget.max_evaluations} evaluated, best {job.best_speedup:.2f}x")
