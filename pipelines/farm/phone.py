"""A farm phone as the measure stage sees a device: :class:`FarmPhone` (driver side).

The sweep (:class:`pipelines.measure.Sweep`) talks to it exactly as to a local
:class:`pipelines.devices.AdbDevice`: ``clusters()``, ``describe()``, ``run(...)``. ``run``
sends the measuring process to the phone's :class:`pipelines.farm.host.PhoneWorker` on the
phone's host and writes the records and the trace it gets back where the sweep expects them, so
the record store, the interleaving, the resume and the failure records are the local sweep's own.

Faults: a failure on the phone comes back with its kind (``device`` when adb lost the phone);
a host that vanished (its Ray node died, the worker is unreachable, or the round trip outlived
the process's timeout) becomes kind ``device`` too. After either the phone is marked gone and
every later process of the sweep fails at once, so its pairs are recorded as device failures
(retried by the next run, or given to another phone of the same name by the driver).

Cost: for every process the round-trip time minus the time the worker spent inside the adb
device's ``run`` is the farm's own cost (scheduling, transfer of the model and the records).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from foundation.atomic import write_bytes, write_text
from pipelines.devices.base import check_run
from pipelines.runners import phone_frameworks
from pipelines.runners.records import NativeRun, NativeRunError

if TYPE_CHECKING:
    from pipelines.devices.topology import Cluster
    from pipelines.scenarios import Scenario

TIMEOUT_SLACK = 30.0  # seconds a round trip may add to a process's own timeout before the host counts as gone


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text[:400] + ("..." if len(text) > 400 else "")


class ArtifactCache:
    """Each model file goes into Ray's object store once per sweep (driver side); workers keep
    it by digest, so a phone receives a model once however many processes measure it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._refs: dict[tuple, dict] = {}

    def get(self, artifact: Path) -> dict:
        try:
            st = artifact.stat()
        except OSError:
            raise NativeRunError(f"{artifact}: model file missing", kind="model_missing", model=str(artifact)) from None
        key = (str(artifact), st.st_size, st.st_mtime_ns)
        with self._lock:
            if key not in self._refs:
                data = artifact.read_bytes()
                self._refs[key] = {"digest": hashlib.sha256(data).hexdigest()[:16], "dir": artifact.parent.name,
                                   "name": artifact.name, "blob": [ray.put(data)]}
            return self._refs[key]



class FarmPhone:
    """One phone of the farm, claimed for a sweep (see the module doc); a
    :class:`pipelines.devices.Device`."""

    kind = "adb"
    frameworks = phone_frameworks()  # the runtimes built for phones (pipelines/runners)

    def __init__(self, info: dict, worker: Any, begun: dict, artifacts: ArtifactCache):
        self.info, self.worker, self.artifacts = info, worker, artifacts
        self.name, self.serial, self.host = info["name"], info["serial"], info["host"]
        self.gpu = None  # the farm measures CPU scenarios (docs/farm.md)
        self._describe, self._clusters = begun["describe"], begun["clusters"]
        self.gone: str | None = None  # why the phone was given up
        self.overhead_s: list[float] = []  # the farm's own cost per process (seconds)
        self.fetch_s: list[float] = []  # of which bringing the model to the phone's host
        self.processes = 0

    def label(self) -> str:
        return f"device {self.name} (serial {self.serial} on farm host {self.host})"

    def clusters(self) -> list[Cluster]:
        return self._clusters

    def describe(self) -> dict:
        return self._describe

    def lock(self, path: str | os.PathLike) -> contextlib.AbstractContextManager[None]:
        """The farm driver holds the locks (the phone's Ray resource and the worker's adb lock)."""
        return contextlib.nullcontext()

    def run(self, framework: str, artifact: str | os.PathLike, *, scenario: Scenario, mode: str = "e2e",
            warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
            trace_path: str | os.PathLike | None = None, timeout: float | None = None,
            engine: str | None = None) -> NativeRun:
        artifact = check_run(self, framework, artifact)
        if self.gone:
            raise NativeRunError(f"{self.label()}: given up earlier: {self.gone}", kind="device", model=str(artifact))
        model = self.artifacts.get(artifact)
        t0 = time.perf_counter()
        ref = self.worker.run.remote(model, framework, scenario, mode, warmup, runs, overhead_pairs,
                                     trace_path is not None, timeout, engine)
        try:
            res = ray.get(ref, timeout=(timeout or 600.0) + TIMEOUT_SLACK)
        except ray.exceptions.RayTaskError as e:  # a bug in the worker, not a lost host
            raise NativeRunError(f"{self.label()}: the phone worker failed: {one_line(e)}", kind="runtime",
                                 model=str(artifact)) from None
        except ray.exceptions.RayError as e:  # the host (its node, the worker) is gone or hangs
            self.gone = f"the farm host is unreachable ({type(e).__name__}: {one_line(e)})"
            with contextlib.suppress(Exception):
                ray.kill(self.worker)
            raise NativeRunError(f"{self.label()}: lost during the run of {artifact.name}: {self.gone}",
                                 kind="device", model=str(artifact)) from None
        round_trip = time.perf_counter() - t0
        if "error" in res:
            if res["kind"] == "device":
                self.gone = res["error"]
            raise NativeRunError(res["error"], kind=res["kind"], model=str(artifact))
        records_path = Path(records_path)
        write_text(records_path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in res["records"]))
        if trace_path is not None and res["trace"] is not None:
            write_bytes(Path(trace_path), res["trace"])
        self.processes += 1
        self.overhead_s.append(max(round_trip - res["seconds"], 0.0))
        self.fetch_s.append(res.get("fetch_seconds", 0.0))
        return NativeRun(records=res["records"], records_path=records_path,
                         trace_path=Path(trace_path) if trace_path is not None else None, argv=res["argv"])
