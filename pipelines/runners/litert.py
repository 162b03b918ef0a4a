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

from .records import EXIT_KINDS, NativeNotBuiltError, NativeRun, NativeRunError, read_records

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


def _cpus_arg(cpus: str | Iterable[int] | None) -> str | None:
    if cpus is None:
        return None
    if isinstance(cpus, str):
        return cpus
    return ",".join(str(int(c)) for c in cpus)


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
    cpu_list = _cpus_arg(cpus)
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


def _gpu_program_env(tmp: Path) -> dict[str, str]:
    """The environment of a GPU kernel-mode run: program cache and shader dumps into ``tmp``."""
    env = dict(os.environ)
    (tmp / "programs").mkdir()
    (tmp / "shaders").mkdir()
    extra = [env.get("LATBENCH_GPU_OPTIONS", "").strip(), f'serialization_dir = "{tmp / "programs"}"',
             'model_cache_key = "latbench"', "serialize_program_cache = true"]
    env["LATBENCH_GPU_OPTIONS"] = "\n".join(x for x in extra if x)
    env["LATBENCH_VKLAYER_DUMP_DIR"] = str(tmp / "shaders")
    return env


def _gpu_meta(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``gpu`` section of the meta record (where the GPU checks and labels report)."""
    meta = next((r for r in records if r.get("type") == "meta"), {})
    return meta.setdefault("gpu", {})


def _label_gpu_kernels(records: list[dict[str, Any]], tmp: Path) -> None:
    """Adds kernel kinds to the GPU kernel records; the meta record gets the summary."""
    from ..gpu.programs import label_kernels

    labels = label_kernels((r for r in records if r.get("type") == "kernel"), tmp / "programs", tmp / "shaders")
    _gpu_meta(records)["programs"] = labels.summary()


def _validate_gpu(records: list[dict[str, Any]], model: str, outputs: Path, precision: str | None,
                  cpus: str | Iterable[int] | None, timeout: float | None) -> None:
    """The GPU run's outputs against a CPU run of the same file (meta ``gpu.validation``);
    a mismatch fails the run (kind ``gpu_output``)."""
    from ..gpu.validate import GpuOutputError, check

    def run_cpu(path: Path, out: Path) -> None:
        run_native(path, cpus=cpus, runs=1, warmup=0, timeout=timeout, extra_args=["--dump-outputs", str(out)])

    try:
        v = check(model, outputs, precision or "fp16", run_cpu)
    except GpuOutputError as e:
        raise NativeRunError(str(e), kind="gpu_output", model=model) from None
    _gpu_meta(records)["validation"] = v.to_dict()


def _rewrite_records(records: list[dict[str, Any]], rec: Path) -> None:
    part = rec.with_name(rec.name + ".part")
    part.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records), encoding="utf-8")
    os.replace(part, rec)


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
    """
    model = str(model)
    with tempfile.TemporaryDirectory(prefix="latbench-run-") as tmp:
        rec = Path(records_path) if records_path is not None else Path(tmp) / "records.jsonl"
        argv = build_argv(model, records=rec, trace=trace_path, cpus=cpus, threads=threads, mode=mode,
                          warmup=warmup, runs=runs, overhead_pairs=overhead_pairs, precision=precision,
                          accelerator=accelerator, keep_memory_sampling=keep_memory_sampling,
                          extra_args=extra_args)
        # GPU kernels: the accelerator writes its generated programs and the layer its shaders
        # into the temporary folder (compile time, outside every timed run), so that each
        # dispatch can be labelled with the kernel it ran (pipelines/gpu/programs.py)
        label_gpu = accelerator == "gpu" and mode == "kernel"
        env = _gpu_program_env(Path(tmp)) if label_gpu else None
        # every GPU run is checked against the CPU: the accelerator can fail silently
        # (pipelines/gpu/validate.py)
        gpu_outputs = Path(tmp) / "gpu_outputs.bin"
        if accelerator == "gpu":
            if "--dump-outputs" in argv:  # the caller keeps the outputs: check that file
                gpu_outputs = Path(argv[argv.index("--dump-outputs") + 1])
            else:
                argv += ["--dump-outputs", str(gpu_outputs)]
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
        if accelerator == "gpu":
            _validate_gpu(records, model, gpu_outputs, precision, cpus, timeout)
        if label_gpu:
            _label_gpu_kernels(records, Path(tmp))
        if accelerator == "gpu" and records_path is not None:
            _rewrite_records(records, rec)  # a resumed sweep reads them back
    return NativeRun(records=records, records_path=Path(records_path) if records_path is not None else None,
                     trace_path=Path(trace_path) if trace_path is not None else None, argv=argv)


def _error(proc: subprocess.CompletedProcess, model: str) -> NativeRunError:
    lines = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()]
    msg = lines[-1] if lines else ""
    for prefix in ("latbench-run: error: ",):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if proc.returncode < 0:
        kind = "crashed"
        msg = f"latbench-run was killed by signal {-proc.returncode}" + (f" ({msg})" if msg else "")
    else:
        kind = EXIT_KINDS.get(proc.returncode, "runtime")
        msg = msg or f"latbench-run failed with exit code {proc.returncode}"
    if model not in msg:
        msg = f"{model}: {msg}"
    return NativeRunError(msg, kind=kind, returncode=proc.returncode, model=model)
