"""The actors that live on a farm host: its agent and one worker per phone in use.

- :class:`HostAgent` (one per host, detached, named ``host-agent:<host id>`` in the farm's
  namespace, placed by the host's own resource): knows the host's adb server and the phones it
  advertised when it joined, and tells a driver which of them are online now.
- :class:`PhoneWorker` (one per phone and sweep, owned by the driver, placed by the phone's
  resource, so it runs on the host the phone is attached to): holds the phone for the sweep
  (the adb device's own lock, so a local sweep on that host cannot interleave either), receives
  each measuring process of the sweep from the driver, runs it with
  :class:`pipelines.devices.AdbDevice` and sends back the records and the trace. The adb device
  is told the host id, so the phone's provenance names it (``meta.device.host``, as a local
  sweep names its own hostname: one record form). Failures come back as values
  (kind, one-line message), so the driver records them as a local sweep does.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

from foundation.atomic import write_bytes

from .resources import NAMESPACE, PhoneInfo, agent_name, discover_phones, host_resource


@ray.remote(num_cpus=0, max_restarts=0)
class HostAgent:
    def __init__(self, host_id: str, adb_server: str, phones: list[dict], connect: list[str] | None = None):
        self.host_id, self.adb_server = host_id, adb_server
        self.advertised = [PhoneInfo(**{k: v for k, v in p.items() if k != "resource"}) for p in phones]
        self.connect = list(connect or [])
        self.node_id = ray.get_runtime_context().get_node_id()

    def info(self) -> dict:
        return {"host": self.host_id, "adb_server": self.adb_server, "node_id": self.node_id,
                "hostname": os.uname().nodename, "phones": [p.to_dict() for p in self.advertised]}

    def phones(self) -> list[dict]:
        """The advertised phones with ``online``: whether the adb server lists them now."""
        names = {p.serial: p.name for p in self.advertised}
        try:
            online = {p.serial for p in discover_phones(self.host_id, self.adb_server, connect=self.connect,
                                                        names=names)}
            why = None
        except Exception as e:  # adb server gone: every phone is offline, and the driver says why
            online, why = set(), " ".join(str(e).split())
        return [{**p.to_dict(), "online": p.serial in online, **({"offline_reason": why} if why else {})}
                for p in self.advertised]


def start_agent(host_id: str, adb_server: str, phones: list[PhoneInfo], connect: list[str] | None = None,
                wait: float = 60.0):
    """Starts (or finds) the host's agent on the node that advertises ``host_resource(host_id)``.

    A host that joins again soon after its node died finds the name still held by the agent that
    died with that node (Ray has not noticed yet): that agent is killed, which frees the name,
    and a new one is started, for up to ``wait`` seconds."""
    opts = dict(name=agent_name(host_id), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                resources={host_resource(host_id): 1.0})
    deadline = time.monotonic() + wait
    while True:
        agent = HostAgent.options(**opts).remote(host_id, adb_server, [p.to_dict() for p in phones], connect)
        try:
            ray.get(agent.info.remote(), timeout=max(deadline - time.monotonic(), 1.0))
            return agent
        except (ray.exceptions.ActorUnavailableError, ray.exceptions.ActorDiedError) as e:
            with contextlib.suppress(Exception):
                ray.kill(agent)
            if time.monotonic() >= deadline:
                raise RuntimeError(f"farm host {host_id}: its agent does not start (the agent of its previous "
                                   f"node still holds the name {agent_name(host_id)}?): "
                                   f"{' '.join(str(e).split())[:300]}") from None
            time.sleep(0.5)


LOCK_POLL_S = 0.2  # seconds between attempts at a phone's adb lock held by an exiting worker


def _farm_tmp() -> Path:
    return Path(tempfile.gettempdir()) / "latbench-farm"


@ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1)
class PhoneWorker:
    def __init__(self, phone: dict, adb: dict | None = None):
        from pipelines.devices import AdbDevice

        self.phone = phone
        self.dev = AdbDevice(name=phone["name"], serial=phone["serial"], adb_server=phone["adb_server"],
                             host=phone["host"])
        for k, v in (adb or {}).items():  # retries, retry_wait, work_dir, ...: as the driver's config says
            setattr(self.dev, k, v)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", phone["serial"])
        self.tmp = _farm_tmp() / safe
        self.stack: contextlib.ExitStack | None = None

    def ready(self) -> bool:
        """Answers once the worker exists, i.e. once its phone's resource was free."""
        return True

    def begin(self, wait: float = 0.0) -> dict:
        """Takes the phone for a sweep (checks it is there and has taskset); returns its
        description and clusters, or ``{"error", "kind"}``. The phone's adb lock is waited
        for up to ``wait`` seconds: the worker of a sweep whose driver or node just died may
        still be exiting on this host (it lets go when its process ends); a lock held longer
        is a sweep really running (kind ``busy``)."""
        from pipelines.devices import DeviceBusy
        from pipelines.runners.records import NativeRunError

        deadline = time.monotonic() + wait
        while True:
            stack = contextlib.ExitStack()
            try:
                stack.enter_context(self.dev.lock(self.tmp / ".lock"))
                described = self.dev.describe()
                clusters = self.dev.clusters()
                break
            except DeviceBusy as e:
                stack.close()
                if time.monotonic() < deadline:
                    time.sleep(LOCK_POLL_S)
                    continue
                return {"error": str(e), "kind": "busy"}
            except NativeRunError as e:
                stack.close()
                return {"error": str(e), "kind": e.kind}
        self.stack = stack
        return {"describe": described, "clusters": clusters, "node_id": ray.get_runtime_context().get_node_id(),
                "pid": os.getpid()}

    def _model_file(self, model: dict) -> Path:
        """The model on this host, kept by content digest and fetched from the driver once. Its
        folder is named after the model id as on the driver, so the path on the phone is the one
        a local sweep uses."""
        path = self.tmp / "models" / model["digest"] / model["dir"] / model["name"]
        if not path.is_file():
            data = ray.get(model["blob"][0])
            if hashlib.sha256(data).hexdigest()[:16] != model["digest"]:
                raise ValueError(f"{model['dir']}/{model['name']}: the model's bytes do not match their digest")
            write_bytes(path, data)
        return path

    def run(self, model: dict, framework: str, scenario: Any, mode: str, warmup: int, runs: int,
            overhead_pairs: int, want_trace: bool, timeout: float | None, engine: str | None) -> dict:
        """One measuring process on the phone; returns records, trace bytes and the seconds spent
        inside the adb device's run (the rest of a round trip is the farm's own cost)."""
        from pipelines.runners.records import NativeRunError

        t0 = time.perf_counter()
        try:
            artifact = self._model_file(model)
        except ValueError as e:
            return {"error": str(e), "kind": "artifact_missing", "seconds": time.perf_counter() - t0}
        fetch = time.perf_counter() - t0  # bringing the model to this host (0 once it is here)
        work = self.tmp / "run"
        work.mkdir(parents=True, exist_ok=True)
        records_path, trace_path = work / "records.jsonl", (work / "trace.json") if want_trace else None
        try:
            kwargs = {"engine": engine} if engine else {}
            start = time.perf_counter()
            run = self.dev.run(framework, artifact, scenario=scenario, mode=mode, warmup=warmup, runs=runs,
                               overhead_pairs=overhead_pairs, records_path=records_path, trace_path=trace_path,
                               timeout=timeout, **kwargs)
            inside = time.perf_counter() - start
        except NativeRunError as e:
            return {"error": str(e), "kind": e.kind, "seconds": time.perf_counter() - t0}
        records = run.records
        trace = trace_path.read_bytes() if trace_path is not None and trace_path.is_file() else None
        records_path.unlink(missing_ok=True)
        if trace_path is not None:
            trace_path.unlink(missing_ok=True)
        return {"records": records, "trace": trace, "argv": run.argv, "seconds": inside, "fetch_seconds": fetch}

    def end(self) -> None:
        """Gives the phone back (removes the work folder on the phone, releases the locks)."""
        if self.stack is not None:
            self.stack.close()
            self.stack = None
