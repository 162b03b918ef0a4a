"""The LiteRT runner: the instrumented runtime ``native/build/latbench-run`` on this machine.

``run_native(model, cpus=..., threads=..., mode=...)`` runs the binary once, in a fresh
process (so the CPU set is applied before LiteRT's thread pool exists), reads back its
JSON-lines records and returns them as a :class:`~pipelines.runners.records.NativeRun` (the
records as plain dicts, grouped by type; the record types are described in
:mod:`pipelines.runners.records`). The binary does the measuring; nothing here sits inside a
timed region.

Errors of the binary come back as :class:`~pipelines.runners.records.NativeRunError`: one line
that names the model file, with ``kind`` telling the class (model_missing, model_invalid, cpus,
usage, runtime, output) from the binary's exit code.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

from foundation.atomic import write_text

from . import runner_for
from .process import cpus_arg, exit_failure, native_run
from .records import NativeNotBuiltError, NativeRun, NativeRunError, read_records

FRAMEWORK = "tflite"  # this runner's framework in the registry (one entry per accelerator)
ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "native" / "build" / "latbench-run"
MODES = ("e2e", "op", "kernel")


def binary_path() -> Path:
    """The built binary (``LATBENCH_NATIVE_RUNNER`` overrides the location)."""
    path = Path(os.environ.get("LATBENCH_NATIVE_RUNNER", BINARY))
    if not path.is_file() or not os.access(path, os.X_OK):
        raise NativeNotBuiltError(
            f"the native runtime is not built ({path} is missing): run scripts/setup.sh "
            f"(or native/build.sh)", kind="not_built")
    return path


def litert_version() -> str | None:
    try:
        return metadata.version("ai-edge-litert")
    except metadata.PackageNotFoundError:
        return None


def build_argv(model: str | os.PathLike, *, records: str | os.PathLike, trace: str | os.PathLike | None = None,
               cpus: str | Iterable[int] | None = None, threads: int = 1, mode: str = "e2e",
               warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, precision: str | None = None,
               accelerator: str = "cpu", keep_memory_sampling: bool = False,
               extra_args: Sequence[str] = ()) -> list[str]:
    argv = [str(binary_path()), "--model", str(model), "--records", str(records),
            "--threads", str(threads), "--mode", mode, "--warmup", str(warmup), "--runs", str(runs),
            "--accelerator", accelerator]
    if trace is not None:
        argv += ["--trace", str(trace)]
    cpu_list = cpus_arg(cpus)
    if cpu_list is not None:
        argv += ["--cpus", cpu_list]
    if overhead_pairs:
        argv += ["--overhead-pairs", str(overhead_pairs)]
    if precision is not None:
        argv += ["--precision", precision]
    version = litert_version()
    if version:
        argv += ["--runtime-version", version]
    if keep_memory_sampling:
        argv.append("--keep-memory-sampling")
    argv += list(extra_args)
    return argv


def steps_for(accelerator: str) -> Any:
    """The module of the steps the LiteRT runner on ``accelerator`` takes around each process
    (``prepare(argv, tmp, ...)`` before it, returning a process whose ``env`` the process runs
    with and whose ``finish(records)`` runs after it), None when it has none (the CPU)."""
    runner = runner_for(FRAMEWORK, accelerator)
    return runner.load_steps() if runner is not None else None


def _rewrite_records(records: list[dict[str, Any]], rec: Path) -> None:
    write_text(rec, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


def run_native(model: str | os.PathLike, *, cpus: str | Iterable[int] | None = None, threads: int = 1,
               mode: str = "e2e", warmup: int = 5, runs: int = 50, overhead_pairs: int = 0,
               precision: str | None = None, accelerator: str = "cpu",
               records_path: str | os.PathLike | None = None, trace_path: str | os.PathLike | None = None,
               keep_memory_sampling: bool = False, timeout: float | None = None,
               extra_args: Sequence[str] = ()) -> NativeRun:
    """Runs latbench-run once in a fresh process and returns its records.

    ``records_path`` / ``trace_path`` keep the files (otherwise the records go through a
    temporary file and no trace is written). Raises :class:`NativeRunError` (one line,
    naming the model) if the binary fails, :class:`NativeNotBuiltError` if it is not built.

    The runner registered for ``accelerator`` may have its own steps around the process
    (:func:`steps_for`): the GPU's (pipelines/runners/litert_gpu.py) check the outputs against
    the CPU and, in kernel mode, label every dispatch with the kernel it ran.
    """
    model = str(model)
    with tempfile.TemporaryDirectory(prefix="latbench-run-") as tmp:
        rec = Path(records_path) if records_path is not None else Path(tmp) / "records.jsonl"
        argv = build_argv(model, records=rec, trace=trace_path, cpus=cpus, threads=threads, mode=mode,
                          warmup=warmup, runs=runs, overhead_pairs=overhead_pairs, precision=precision,
                          accelerator=accelerator, keep_memory_sampling=keep_memory_sampling,
                          extra_args=extra_args)
        steps = steps_for(accelerator)
        process = steps.prepare(argv, Path(tmp), model=model, mode=mode, precision=precision, cpus=cpus,
                                timeout=timeout) if steps is not None else None
        env = process.env if process is not None else None
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise NativeRunError(f"{model}: latbench-run timed out after {timeout} s", kind="timeout",
                                 model=model) from None
        except OSError as e:
            raise NativeNotBuiltError(f"cannot execute {argv[0]}: {e.strerror}: run scripts/setup.sh",
                                      kind="not_built", model=model) from None
        if proc.returncode != 0:
            raise _error(proc, model)
        records = read_records(rec)
        if process is not None:
            process.finish(records)
            if records_path is not None:
                _rewrite_records(records, rec)  # a resumed sweep reads them back
    return native_run(records, records_path, trace_path, argv)


def launch(artifact: str | os.PathLike, *, scenario: Any, cpus: list[int] | None, mode: str = "e2e",
           warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
           trace_path: str | os.PathLike | None = None, timeout: float | None = None,
           engine: str | None = None) -> NativeRun:
    """One process of ``scenario`` as the host device runs it (the runners' ``launch``):
    latbench-run with the scenario's threads, precision and accelerator, pinned to ``cpus``
    (``engine`` is PyTorch's: not used here)."""
    return run_native(artifact, cpus=cpus, threads=scenario.threads, mode=mode, warmup=warmup, runs=runs,
                      overhead_pairs=overhead_pairs, precision=scenario.precision,
                      accelerator=scenario.accelerator, records_path=records_path, trace_path=trace_path,
                      timeout=timeout)


def _error(proc: subprocess.CompletedProcess, model: str) -> NativeRunError:
    lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
    msg = lines[-1] if lines else ""
    for prefix in ("latbench-run: error: ",):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    kind, msg = exit_failure(proc.returncode, "latbench-run", msg)
    if model not in msg:
        msg = f"{model}: {msg}"
    return NativeRunError(msg, kind=kind, returncode=proc.returncode, model=model)
