"""What the measure stage needs of a device, and the registry of device kinds.

A device is where scenarios run: the host itself (``host.py``), a phone over adb (``adb.py``)
or a farm phone (``pipelines/farm/phone.py``). The ``measure`` stage talks to every device
through the same few calls, the :class:`Device` protocol below (its docstrings say what each
call must do), so a new kind is one class registered with ``@register_device_kind("<kind>")``.

``make_device(cfg)`` builds the device a ``device:`` config section names.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

from foundation.registry import Registry

if TYPE_CHECKING:
    from pipelines.runners.records import NativeRun
    from pipelines.scenarios import Scenario

    from .topology import Cluster

DEVICE_KINDS: Registry[type] = Registry("device kind", entry_points="latbench.devices")


class Device(Protocol):
    """The device contract: what the measure stage, the profile command and the farm use.

    Kept by :class:`pipelines.devices.HostDevice`, :class:`pipelines.devices.AdbDevice` and
    :class:`pipelines.farm.phone.FarmPhone`. A device may also say why it has no GPU
    (``gpu_unavailable``: a one-line reason, read with ``getattr`` where present)."""

    name: str
    """From the config (``device.name``); the first part of every scenario id."""

    @property
    def kind(self) -> str:
        """The registered kind (``host``, ``adb``)."""
        ...

    @property
    def gpu(self) -> str | None:
        """The GPU that GPU scenarios run on (None: the device offers no GPU scenarios)."""
        ...

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks it can run (``tflite``, ``pytorch``)."""
        ...

    def clusters(self) -> list[Cluster]:
        """Its CPU clusters (``topology.Cluster``), from which scenarios are enumerated."""
        ...

    def describe(self) -> dict:
        """The device description every record carries (provenance)."""
        ...

    def run(self, framework: str, artifact: str | os.PathLike, *, scenario: Scenario, mode: str = "e2e",
            warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
            trace_path: str | os.PathLike | None = None, timeout: float | None = None,
            engine: str | None = None) -> NativeRun:
        """One fresh measuring process for one artifact in one scenario. Its records (and trace)
        are also left at ``records_path`` (``trace_path``) on this machine; failures raise
        :class:`pipelines.runners.records.NativeRunError` with a ``kind`` (model_missing, cpus,
        timeout, crashed, device, ...) and a one-line message."""
        ...

    def lock(self, path: str | os.PathLike) -> contextlib.AbstractContextManager[None]:
        """A context manager held for a whole sweep (one sweep at a time per device)."""
        ...


def register_device_kind(kind: str):
    def deco(cls: type) -> type:
        return DEVICE_KINDS.register(kind)(cls)

    return deco


def check_run(device: Device, framework: str, artifact: str | os.PathLike) -> Path:
    """What every device kind's ``run`` checks first: ValueError naming the device when it cannot
    run ``framework``. Returns the artifact as a Path."""
    if framework not in device.frameworks:
        raise ValueError(f"device {device.name}: unknown framework {framework!r} (known: {', '.join(device.frameworks)})")
    return Path(artifact)


def make_device(cfg: Any) -> Device:
    """The device of a ``device`` config section (``kind`` picks the class, which reads the
    fields it needs with ``from_config``)."""
    kind = getattr(cfg, "kind", None) or (cfg.get("kind") if isinstance(cfg, dict) else None) or "host"
    return DEVICE_KINDS.get(kind).from_config(cfg)


class DeviceBusy(RuntimeError):
    """Another sweep holds the device's lock."""


@contextlib.contextmanager
def sweep_lock(path: str | os.PathLike, device: str) -> Iterator[None]:
    """An exclusive, non-blocking lock file: a second sweep on the same device fails at once
    with a one-line error instead of interleaving with the first (and skewing both)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            raise DeviceBusy(f"device {device}: a sweep is already running ({holder}; lock {path})") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()}")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
