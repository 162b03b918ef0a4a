"""The record format every runner writes and the measure stage keeps, and its types.

A measuring process (``latbench-run``, :mod:`.litert`; the torch worker, :mod:`.torch`; the
same binary on a phone, ``pipelines/devices/adb.py``) writes JSON-lines records. Record types
(see ``latbench-run --help`` for every field): ``meta`` (first line: provenance, observed
per-thread CPU sets), ``run`` (phase warmup|timed|overhead, start_ns, end_ns, duration_ns,
profiled), ``op`` (one per executed TFLite node: op mode, and in kernel mode the nodes not
delegated to XNNPACK), ``kernel`` (one per executed XNNPACK operator, or builtin node in
kernel mode; on the GPU one per command the Vulkan timestamp layer saw), ``runtime`` (the
runtime's own spans), ``overhead`` and ``end`` (last line). Times are integer nanoseconds of
CLOCK_MONOTONIC. :func:`read_records` reads them back as a :class:`NativeRun`.

A failed process is a :class:`NativeRunError`: one line that names the model file, with
``kind`` telling the class (model_missing, model_invalid, cpus, usage, runtime, output) from
the process's exit code (:data:`EXIT_KINDS`, shared by every runner).

The measure stage's record of a (model, scenario) pair (``<model_id>.json``, read back by
``pipelines/assemble.py``) is :data:`RECORD_SCHEMA`; its aggregated op and kernel entries keep
:data:`EVENT_KEYS` of the events (and :data:`GPU_EVENT_KEYS` for GPU commands).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the measure stage's record of one (model, scenario) pair
RECORD_SCHEMA = "latbench.measurement/1"
# what an aggregated op/kernel entry keeps of its per-run events (the first run's value): the
# runtime's identification of the event (ONNX Runtime's also the node's name and execution
# provider); for GPU commands (source "gpu", docs/gpu.md) the
# timestamp layer's identity of the dispatch and what pipelines/gpu/programs.py read from the
# WGSL program (kernel_kind, fused parts, program index), whichever the record has
EVENT_KEYS = ("node", "subgraph", "source", "partition", "index_in_partition", "input_shapes", "node_name",
              "provider", "output_shapes")
GPU_EVENT_KEYS = ("kind", "kernel_kind", "fused", "program", "shader", "groups", "local_size")

# exit code of latbench-run -> error class
EXIT_KINDS = {
    2: "usage",
    3: "model_missing",
    4: "model_invalid",
    5: "cpus",
    6: "runtime",
    7: "output",
}


class NativeRunError(RuntimeError):
    """latbench-run failed; ``str(err)`` is one line naming the model file."""

    def __init__(self, message: str, *, kind: str = "runtime", returncode: int | None = None,
                 model: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.returncode = returncode
        self.model = model


class NativeNotBuiltError(NativeRunError):
    """The binary does not exist (or cannot be executed)."""


@dataclass
class NativeRun:
    """The records of one latbench-run invocation, as dicts in file order."""

    records: list[dict[str, Any]]
    records_path: Path | None = None
    trace_path: Path | None = None
    argv: list[str] = field(default_factory=list)
    # CPU seconds of the process that this interpreter's getrusage cannot count because the
    # process was not its child (a fork of the torch zygote); the load check counts them as
    # the measurement's own, not as another process's
    outside_cpu_s: float = 0.0

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("type") == kind]

    @property
    def meta(self) -> dict[str, Any]:
        return self.of_type("meta")[0]

    @property
    def end(self) -> dict[str, Any]:
        return self.of_type("end")[0]

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The timed runs (warm-up and overhead runs are in ``of_type('run')``)."""
        return [r for r in self.of_type("run") if r["phase"] == "timed"]

    @property
    def ops(self) -> list[dict[str, Any]]:
        return self.of_type("op")

    @property
    def kernels(self) -> list[dict[str, Any]]:
        return self.of_type("kernel")

    @property
    def overhead(self) -> dict[str, Any] | None:
        found = self.of_type("overhead")
        return found[0] if found else None

    def durations_ns(self) -> list[int]:
        return [r["duration_ns"] for r in self.runs]


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Parses a JSON-lines records file (one object per non-empty line)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise NativeRunError(f"{path}:{n}: not a JSON record ({e.msg})", kind="output") from None
    return out
