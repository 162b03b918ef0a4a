"""The torch zygote (pipelines/runners/torch_zygote.py): torch imported once, a forked fresh
process per measurement.

Checked: every run is its own process (its own pid, not the zygote's) forked by one long-lived
zygote, says so in its meta, keeps every thread on its CPU set; the child's CPU time comes back
(the load check counts it as the measurement's own, else a zygote's child would read as another
process's load); a worker over its time is killed and the zygote serves the next one; a dead
zygote is replaced; the worker run as a program still says ``process_start: exec``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.machine_load import LoadWindow
from pipelines.measure.records import meta_digest
from pipelines.runners import torch as trn
from pipelines.runners.torch_zygote import ZYGOTE_ENV, run_torch, zygote, zygote_env
from test_torch_runner import ALLOWED, SHAPE, artifacts  # noqa: F401 (artifacts: a fixture)

ROOT = Path(__file__).resolve().parents[1]


def run(model, **kw):
    kw.setdefault("input_shapes", [SHAPE])
    kw.setdefault("timeout", 120)
    return run_torch(model, **kw)


def test_each_run_is_a_fresh_fork_of_one_zygote(artifacts):
    first = run(artifacts["pt-fp32"], cpus=ALLOWED[-1:], threads=1, warmup=1, runs=5)
    z = zygote()
    second = run(artifacts["pt-fp32"], cpus=ALLOWED[-1:], threads=1, warmup=1, runs=5)
    assert zygote() is z and z.alive()
    pids = {first.meta["pid"], second.meta["pid"]}
    assert len(pids) == 2 and z.proc.pid not in pids
    for res in (first, second):
        assert res.meta["process_start"] == "zygote"
        assert meta_digest(res.meta)["process_start"] == "zygote"  # the measure stage's record keeps it
        assert res.meta["affinity_ok"] and all(t["cpus"] == ALLOWED[-1:] for t in res.meta["thread_affinity"])


def test_the_childs_cpu_time_counts_as_the_measurements_own(artifacts):
    with LoadWindow(ALLOWED[-1:]) as w:
        res = run(artifacts["pt-fp32"], cpus=ALLOWED[-1:], threads=1, warmup=2, runs=30)
        w.count_own(res.outside_cpu_s)
    busy_s = sum(res.durations_ns()) / 1e9
    # the child computed its timed runs on one thread: at least that much CPU time came back
    assert res.outside_cpu_s >= 0.8 * busy_s > 0
    assert w.result["own_cpu_s"] >= res.outside_cpu_s


def test_a_worker_over_its_time_is_killed_and_the_zygote_goes_on(artifacts):
    z = zygote()
    with pytest.raises(trn.TorchRunError) as info:
        run(artifacts["pt-fp32"], cpus=ALLOWED, warmup=0, runs=10**7, timeout=3)
    assert info.value.kind == "timeout" and "timed out" in str(info.value)
    assert zygote() is z and z.alive()
    assert len(run(artifacts["pt-fp32"], cpus=ALLOWED, warmup=0, runs=2).runs) == 2


def test_a_dead_zygote_is_replaced(artifacts):
    z = zygote()
    os.kill(z.proc.pid, signal.SIGKILL)
    z.proc.wait(timeout=30)
    res = run(artifacts["pt-fp32"], cpus=ALLOWED, warmup=0, runs=2)
    assert len(res.runs) == 2 and zygote() is not z


def test_the_worker_run_as_a_program_says_exec(artifacts, tmp_path):
    rec = tmp_path / "r.jsonl"
    argv = trn.build_argv(artifacts["pt-fp32"], records=rec, cpus=ALLOWED, warmup=0, runs=2, input_shapes=[SHAPE])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(argv, check=True, capture_output=True, env=env, timeout=120)
    meta = json.loads(rec.read_text().splitlines()[0])
    assert meta["type"] == "meta" and meta["process_start"] == "exec"


def test_importing_torch_in_the_zygotes_environment_makes_no_thread():
    """What the zygote rests on (and checks at start): a fork after ``import torch`` loses no
    thread; without ZYGOTE_ENV numpy's OpenBLAS starts one (on a machine of more than one CPU)."""
    code = "import os, torch; print(len(os.listdir('/proc/self/task')))"

    def threads(env):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                             env={**os.environ, **env})
        return int(out.stdout)

    assert threads(zygote_env({})) == 1  # jemalloc preloaded makes none either (no background thread)
    if len(os.sched_getaffinity(0)) > 1:
        assert threads({k: "" for k in ZYGOTE_ENV}) > 1
