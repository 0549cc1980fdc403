"""The Python client (clients/python/kevo_client) against a real coordinator
run with --auth and a real cpu worker, all on loopback: a team submits a job,
watches it with progress to the end, reads its best kernel and cancels another;
a caller without a token and another team are refused. Run by ctest with
PYTHONPATH=build/python:clients/python and KEVO_BIN_DIR, KEVO_SOURCE_DIR."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

import grpc

from kevo.v1 import job_pb2
from kevo_client import Client, KevoError, load_task, progress_line

BIN = os.environ["KEVO_BIN_DIR"]
SRC = os.environ["KEVO_SOURCE_DIR"]
KEVO = os.path.join(BIN, "kevo")


def admin(address, token, *args):
    r = subprocess.run([KEVO, "admin", *args, "--coordinator", address], capture_output=True, text=True,
                       env={**os.environ, "KEVO_TOKEN": token}, timeout=60, check=False)
    if r.returncode != 0:
        raise AssertionError(f"kevo admin {' '.join(args)}: {r.stderr}")
    return r.stdout.strip().splitlines()[-1]


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kevo-pyclient-")
        cls.coordinator = subprocess.Popen(
            [os.path.join(BIN, "kevo-coordinator"), "--listen", "127.0.0.1:0", "--db", cls.dir + "/db", "--auth"],
            stdout=subprocess.PIPE, stderr=open(cls.dir + "/coordinator.log", "w"), text=True)
        line = cls.coordinator.stdout.readline()
        assert line.startswith("listening "), line
        cls.address = line.split()[1]
        with open(cls.dir + "/db/admin.token", encoding="utf-8") as f:
            cls.admin_token = f.read().strip()
        cls.team = admin(cls.address, cls.admin_token, "team", "create", "notebooks")
        cls.other = admin(cls.address, cls.admin_token, "team", "create", "others")
        with open(cls.dir + "/worker.token", "w", encoding="utf-8") as f:
            f.write(admin(cls.address, cls.admin_token, "worker-token", "create", "py") + "\n")
        # The client is what this test is about, not timing: no production
        # baselines (PyTorch, timed beside each candidate, tens of seconds).
        cls.worker = subprocess.Popen(
            [os.path.join(BIN, "kevo-worker"), "--coordinator", cls.address, "--platform", "cpu",
             "--work-dir", cls.dir + "/work", "--profile-cap", "0.3", "--production", "off", "--token-file", cls.dir + "/worker.token"],
            stdout=subprocess.DEVNULL, stderr=open(cls.dir + "/worker.log", "w"))

    @classmethod
    def tearDownClass(cls):
        for p in (cls.worker, cls.coordinator):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_submit_watch_best_and_cancel(self):
        # vector_add timed at 1 Mi elements, not 16 Mi: about 3 s an evaluation instead of 10.
        task_dir = os.path.join(self.dir, "vector_add")
        shutil.copytree(os.path.join(SRC, "tasks/vector_add"), task_dir)
        with open(os.path.join(task_dir, "task.textproto"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("value: 16777216", text)
        with open(os.path.join(task_dir, "task.textproto"), "w", encoding="utf-8") as f:
            f.write(text.replace("value: 16777216", "value: 1048576", 1))
        task = load_task(task_dir, kevo=KEVO)
        self.assertEqual(task.name, "vector_add")
        with Client(self.address, token=self.team) as client:
            job_id = client.submit(task, platform="cpu", budget=2)
            seen = []
            final = client.watch(job_id, progress=lambda j: seen.append(progress_line(j)))
            self.assertEqual(final.state, job_pb2.JOB_DONE, seen)
            self.assertEqual(final.spec.team, "notebooks")
            self.assertTrue(any("2/2 evaluated" in s for s in seen), seen)
            best = client.best(job_id)
            self.assertTrue(best.candidate.source)
            self.assertGreater(best.node.fitness, 0)
            self.assertEqual([j.job_id for j in client.jobs()], [job_id])

            second = client.submit(task, platform="nowhere", budget=5)
            cancelled = client.cancel(second)
            self.assertEqual(cancelled.job_id, second)
            deadline = time.time() + 30
            while client.job(second).state == job_pb2.JOB_RUNNING and time.time() < deadline:
                time.sleep(0.2)
            self.assertEqual(client.job(second).state, job_pb2.JOB_CANCELLED)

        # Another team does not see the job; no token is refused.
        with Client(self.address, token=self.other) as other:
            with self.assertRaises(KevoError) as e:
                other.best(job_id)
            self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertEqual(other.jobs(), [])
        with Client(self.address, token="") as anonymous:
            with self.assertRaises(KevoError) as e:
                anonymous.jobs()
            self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED)

    def test_a_bad_task_folder_is_a_clear_error(self):
        with self.assertRaises(KevoError) as e:
            load_task(os.path.join(self.dir, "no-such-task"), kevo=KEVO)
        self.assertIn("no-such-task", e.exception.message)


if __name__ == "__main__":
    unittest.main()
