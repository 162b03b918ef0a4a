"""The LiteRT runner on the GPU: its own steps around each latbench-run process (docs/gpu.md).

The GPU runner (``("tflite", "gpu")`` in the registry, pipelines/runners/__init__.py) launches
latbench-run as the CPU's does (:func:`pipelines.runners.litert.run_native` with
``accelerator="gpu"``) and names this module as its steps, which run_native calls around the
process:

- :func:`prepare`, before it: every GPU process dumps the outputs of its last timed run
  (``--dump-outputs``); in kernel mode the accelerator also writes its generated programs and
  the timestamp layer its shaders into the process's temporary folder (compile time, outside
  every timed run), so that each dispatch can be labelled with the kernel it ran;
- :meth:`GpuProcess.finish`, after it: the outputs against a CPU run of the same file (the
  accelerator can fail silently, pipelines/gpu/validate.py; a mismatch fails the run, kind
  ``gpu_output``), then in kernel mode every dispatch labelled with its kernel
  (pipelines/gpu/programs.py). The meta record's ``gpu`` section says both (``validation``,
  ``programs``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .litert import run_native
from .records import NativeRunError


def program_env(tmp: Path) -> dict[str, str]:
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


def label_kernels(records: list[dict[str, Any]], tmp: Path) -> None:
    """Adds kernel kinds to the GPU kernel records; the meta record gets the summary."""
    from ..gpu.programs import label_kernels as label

    labels = label((r for r in records if r.get("type") == "kernel"), tmp / "programs", tmp / "shaders")
    _gpu_meta(records)["programs"] = labels.summary()


def validate(records: list[dict[str, Any]], model: str, outputs: Path, precision: str | None,
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


@dataclass
class GpuProcess:
    """One GPU process as :func:`prepare` set it up: ``env`` for the process (None: the
    caller's), and what :meth:`finish` needs afterwards."""

    model: str
    mode: str
    precision: str | None
    cpus: str | Iterable[int] | None
    timeout: float | None
    tmp: Path
    outputs: Path  # the process's dumped outputs
    env: dict[str, str] | None

    def finish(self, records: list[dict[str, Any]]) -> None:
        """After the process: its outputs checked against the CPU, then (kernel mode) its
        dispatches labelled. Changes ``records`` in place; raises NativeRunError (kind
        ``gpu_output``) when the outputs do not match."""
        validate(records, self.model, self.outputs, self.precision, self.cpus, self.timeout)
        if self.mode == "kernel":
            label_kernels(records, self.tmp)


def prepare(argv: list[str], tmp: Path, *, model: str, mode: str, precision: str | None,
            cpus: str | Iterable[int] | None, timeout: float | None) -> GpuProcess:
    """Before the process: ``argv`` (latbench-run's, changed in place) dumps the outputs, and
    in kernel mode the environment sends programs and shaders into ``tmp``."""
    env = program_env(tmp) if mode == "kernel" else None
    outputs = tmp / "gpu_outputs.bin"
    if "--dump-outputs" in argv:  # the caller keeps the outputs: check that file
        outputs = Path(argv[argv.index("--dump-outputs") + 1])
    else:
        argv += ["--dump-outputs", str(outputs)]
    return GpuProcess(model, mode, precision, cpus, timeout, tmp, outputs, env)
