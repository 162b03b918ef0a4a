"""Entry points run on untrusted input in a bounded child process, for the tests of that contract
(tests/test_untrusted_models.py, tests/test_untrusted_properties.py).

``run_jobs`` (the test side) writes a list of jobs to a file and starts ``python -m
tests.support.bounded JOBS RESULTS`` (this module, the driver) under resource limits. A job is
a dict with a ``kind``:

- ``latbench``, ``leaderboard``: the CLI's ``main(argv)`` (``argv``); SystemExit is its answer;
- ``torch_runner``: the measure stage's TorchScript worker, ``main(argv)``;
- ``predict_load``: what ``latbench predict`` does with a model file (``path``, ``shape``) before
  predicting; ``profile_load``: what ``latbench profile`` does with it before running it;
- ``load_predictor``: a saved predictor's folder (``path``);
- ``import_usc``, ``import_help``: a public dataset's folder (``path``), problems printed.

Each result holds ``rc``, the job's ``out`` and ``err``, ``exc`` (a traceback or ``MemoryError``
when the entry point broke its contract, else None), ``seconds`` and ``peak_bytes``: the
process's peak resident memory so far, from VmHWM in /proc/self/status, or the peak of one of
its descendants (``getrusage(RUSAGE_CHILDREN)``) when larger. VmHWM is the high-water mark of the
current address space, which exec replaces; ``ru_maxrss`` of the process (RUSAGE_SELF, or wait4
in the parent) also keeps the resident size the forked child had before exec, that of the test
process, so it measures the test worker rather than the command.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the child (the driver)
def _status_bytes(field: str) -> int:
    """A ``kB`` field of /proc/self/status (VmHWM, VmPeak), in bytes."""
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def peak_resident() -> int:
    """The process's own peak resident memory (VmHWM), or its descendants' when larger."""
    return max(_status_bytes("VmHWM"), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)


def _cli(main, argv: list[str]) -> int:
    try:
        return main(argv) or 0
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)


def _call(job: dict) -> int:
    kind = job["kind"]
    if kind == "latbench":
        from pipelines.cli import main

        return _cli(main, job["argv"])
    if kind == "leaderboard":
        from leaderboard.cli import main

        return _cli(main, job["argv"])
    if kind == "torch_runner":
        from pipelines.runners.torch import main

        return main(job["argv"])
    if kind == "predict_load":  # what `latbench predict` does with the file before predicting
        from pipelines.predict import load_model

        try:
            load_model(job["path"], job.get("shape"))
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    if kind == "profile_load":  # what `latbench profile` does with the file before running it
        from pipelines.profile import (ProfileError, check_model_file, framework_of, tflite_precision,
                                       torchscript_precision)

        p = Path(job["path"])
        try:
            fw = framework_of(p)
            check_model_file(p, fw, job.get("shape"))
            (tflite_precision if fw == "tflite" else torchscript_precision)(p)
        except ProfileError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    if kind == "load_predictor":
        from leaderboard.baselines import load_predictor
        from leaderboard.baselines.persist import PersistError

        try:
            load_predictor(job["path"])
        except PersistError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    if kind in ("import_usc", "import_help"):
        from pipelines.dataset import HelpConfig, PublicDataError, UscConfig, import_help, import_usc

        try:
            r = import_usc(UscConfig(path=job["path"], rebuild_ir=False)) if kind == "import_usc" \
                else import_help(HelpConfig(path=job["path"], rebuild_ir=False))
            print("\n".join(str(p) for p in r.problems))
        except PublicDataError as e:
            print(e, file=sys.stderr)
            return 2
        return 0
    raise ValueError(f"unknown job kind {kind!r}")


def run(job: dict) -> dict:
    """One job, its output captured; a traceback or MemoryError is reported, not raised."""
    out, err = io.StringIO(), io.StringIO()
    rc, exc = 0, None
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = _call(job)
    except MemoryError:
        rc, exc = 98, "MemoryError"
    except Exception:  # the contract is broken: report the traceback to the test
        rc, exc = 99, traceback.format_exc()[-3000:]
    seconds = time.perf_counter() - t0
    return {"rc": rc, "out": out.getvalue()[-20000:], "err": err.getvalue()[-20000:], "exc": exc,
            "seconds": seconds, "peak_bytes": peak_resident()}


def main(jobs_file: str, results_file: str) -> None:
    with open(jobs_file) as f:
        jobs = json.load(f)
    results = [run(j) for j in jobs]
    with open(results_file, "w") as f:
        json.dump({"results": results, "vm_peak": _status_bytes("VmPeak")}, f)


# ---------------------------------------------------------------- the test side
def run_jobs(jobs: list[dict], work: Path, *, cwd: Path | None = None, address_space: int | None = None,
             file_size: int, cpu_seconds: int, wall: float) -> dict:
    """Run the jobs in one child process (the driver above, in ``cwd``, default ``work``) under
    RLIMIT_AS ``address_space`` (None: unlimited), RLIMIT_FSIZE ``file_size`` and RLIMIT_CPU
    ``cpu_seconds``, its files (jobs, results, stdout, stderr) in ``work``. Fails the test when
    the child runs past ``wall`` seconds (killed), ends with a status other than 0, or a job
    breaks its entry point's contract (``exc``). Returns ``results`` (one per job), ``vm_peak``
    (the child's peak address space), ``wall`` (seconds) and ``peak_bytes`` (the largest of the
    jobs' ``peak_bytes``)."""
    import pytest

    work.mkdir(parents=True, exist_ok=True)
    jf, rf = work / "jobs.json", work / "results.json"
    jf.write_text(json.dumps(jobs))

    def limits() -> None:
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    with open(work / "stdout", "wb") as so, open(work / "stderr", "wb") as se:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.bounded", str(jf), str(rf)], cwd=cwd or work,
                                stdout=so, stderr=se, preexec_fn=limits, env=env)
        try:
            proc.wait(timeout=wall)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"the child took more than {wall} s: {jobs}")
        elapsed = time.monotonic() - t0
    assert proc.returncode == 0, f"child ended with {proc.returncode}: {(work / 'stderr').read_text()[-3000:]}"
    out = json.loads(rf.read_text())
    for job, r in zip(jobs, out["results"]):
        assert r["exc"] is None, f"{job}: {r['exc']}"
    return {**out, "wall": elapsed, "peak_bytes": max((r["peak_bytes"] for r in out["results"]), default=0)}


if __name__ == "__main__":
    main(*sys.argv[1:3])
