"""The host device: this machine, described from /proc and /sys (``root`` for tests).

``HostDevice(name="host").describe()`` is the device description every record carries:
hostname, CPU model and processor description (``/proc/cpuinfo``: family, model, stepping,
instruction-set flags), online cores, clusters (``topology.read_clusters``),
kernel release, cpufreq governor when readable, and its GPU (None: the host offers no GPU
scenarios; the pocl OpenCL device of ../shared/NOTES.md is a CPU, not a GPU).

The config's ``device.gpu`` is a GPU name (trusted as given: a missing driver then shows as
failed pairs), ``auto`` or null. ``auto`` asks the machine: :func:`pipelines.gpu.unavailable_reason`
probes the Vulkan loader and LiteRT's GPU accelerator; when it finds nothing wrong the GPU is
the first Vulkan device's name (``llvmpipe (LLVM 15.0.6, 256 bits)`` for Mesa's lavapipe),
otherwise the host has no GPU and ``gpu_unavailable`` keeps the probe's one-line reason, which
the measure stage writes into the GPU scenarios' SCENARIO.json ("not offered"). The probe runs
once per device object, on first use (it starts a child process; CPU-only work never pays it).
"""
from __future__ import annotations

import hashlib
import os
import platform
import socket
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..runners import frameworks as runner_frameworks
from .base import check_run, register_device_kind, sweep_lock
from .topology import CPU_DIR, Cluster, CoreSet, core_combinations, list_cpus, read_clusters

if TYPE_CHECKING:
    from pipelines.runners.records import NativeRun
    from pipelines.scenarios import Scenario


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cpu_model(root: str | os.PathLike = "/") -> str | None:
    """The CPU's name from ``/proc/cpuinfo``: ``model name`` (x86), else ``Hardware`` or
    ``Processor`` (ARM kernels), else the ``CPU part`` code."""
    text = _read(Path(root) / "proc" / "cpuinfo")
    return cpu_model_from_text(text) if text else None


def cpu_model_from_text(text: str) -> str | None:
    """:func:`cpu_model` of a ``/proc/cpuinfo`` text."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, value = (s.strip() for s in line.split(":", 1))
        if value and key.lower() not in found:
            found[key.lower()] = value
    for key in ("model name", "hardware", "processor name", "cpu model"):
        if key in found:
            return found[key]
    if "processor" in found and not found["processor"].isdigit():
        return found["processor"]
    if "cpu part" in found:
        return f"CPU part {found['cpu part']}"
    return None


#: The instruction-set flags that decide which kernels an inference library picks on this
#: processor (XNNPACK's, oneDNN's, ONNX Runtime's MLAS): x86's SSE4/AVX/AVX-512/AMX families and
#: FMA/F16C, ARM's SIMD, dot-product, matrix and SVE extensions. A processor description keeps
#: these flags and a hash of the whole flags line (:func:`processor_description`).
ISA_FLAGS = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
             "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
             "asimd", "asimdhp", "asimddp", "fphp", "i8mm", "bf16", "sve", "sve2", "sme")

# /proc/cpuinfo keys of the first processor -> the description's keys (x86, else ARM's)
_IDENTITY_KEYS = {"vendor": ("vendor_id", "cpu implementer"), "model_name": ("model name",),
                  "family": ("cpu family", "cpu architecture"), "model": ("model", "cpu part"),
                  "stepping": ("stepping", "cpu revision")}


def parse_cpuinfo(text: str) -> dict | None:
    """The description of the first processor of a ``/proc/cpuinfo`` text: ``vendor``,
    ``model_name``, ``family``, ``model``, ``stepping`` (as the kernel writes them; ARM kernels:
    implementer, architecture, part, revision), ``isa`` (the :data:`ISA_FLAGS` it has, sorted),
    ``flags`` (how many flags the line has) and ``flags_sha256`` (the first 16 hex digits of the
    hash of its sorted flags: two processors with one hash have the same flags). A key the text
    lacks is None; None when the text names no processor at all."""
    first: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        if ":" in line:
            key, value = (s.strip() for s in line.split(":", 1))
            first.setdefault(key.lower(), value)
    out: dict = {k: next((first[c] for c in keys if first.get(c)), None) for k, keys in _IDENTITY_KEYS.items()}
    if out["model_name"] is None:
        out["model_name"] = cpu_model_from_text(text)
    flags = sorted(set((first.get("flags") or first.get("features") or "").split()))
    if not flags and all(v is None for v in out.values()):
        return None
    out["isa"] = sorted(f for f in flags if f in ISA_FLAGS)
    out["flags"] = len(flags)
    out["flags_sha256"] = hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16] if flags else None
    return out


def processor_description(root: str | os.PathLike = "/") -> dict | None:
    """:func:`parse_cpuinfo` of ``<root>/proc/cpuinfo`` (None: unreadable)."""
    text = _read(Path(root) / "proc" / "cpuinfo")
    return parse_cpuinfo(text) if text else None


def governors(root: str | os.PathLike = "/") -> dict[str, str]:
    """cpufreq governor per cluster policy (``policyN`` or per CPU), where readable."""
    base = Path(root) / CPU_DIR
    out: dict[str, str] = {}
    policies = sorted((base / "cpufreq").glob("policy*")) if (base / "cpufreq").is_dir() else []
    for p in policies:
        g = _read(p / "scaling_governor")
        if g:
            out[p.name] = g.strip()
    if not out:
        for c in list_cpus(root):
            g = _read(base / f"cpu{c}" / "cpufreq" / "scaling_governor")
            if g:
                out[f"cpu{c}"] = g.strip()
    return out


GPU_AUTO = "auto"  # device.gpu: probe this machine for a usable GPU


def probe_gpu() -> tuple[str | None, str | None]:
    """(GPU name, None) when GPU scenarios can run on this machine, else (None, why not)."""
    from pipelines import gpu

    devices, reason = gpu.probe()
    return (None, reason) if reason else (devices[0]["name"], None)


@register_device_kind("host")
@dataclass
class HostDevice:
    """This machine as a device (a :class:`pipelines.devices.Device`). ``name`` comes from the
    config (``device.name``); ``gpu_setting`` is ``device.gpu`` as configured (a name, ``auto``
    or None, see the module doc) and ``gpu`` what it resolves to."""

    name: str = "host"
    root: str = "/"
    gpu_setting: str | None = None
    frameworks = runner_frameworks()  # every framework the suite has a runner for

    @classmethod
    def from_config(cls, cfg) -> "HostDevice":
        get = cfg.get if isinstance(cfg, dict) else (lambda k, d=None: getattr(cfg, k, d))
        return cls(name=get("name", "host") or "host", gpu_setting=get("gpu", None))

    @cached_property
    def _gpu(self) -> tuple[str | None, str | None]:
        if self.gpu_setting != GPU_AUTO:
            return self.gpu_setting or None, None if self.gpu_setting else "device.gpu is null"
        if self.root not in ("/", ""):
            return None, f"device.gpu auto probes the live machine, not the recorded tree {self.root}"
        return probe_gpu()

    @property
    def gpu(self) -> str | None:
        """The GPU that GPU scenarios run on (None: the host offers none)."""
        return self._gpu[0]

    @property
    def gpu_unavailable(self) -> str | None:
        """Why the host has no GPU (None when it has one)."""
        return self._gpu[1]

    @property
    def kind(self) -> str:
        return "host"

    def lock(self, path: str | os.PathLike):
        return sweep_lock(path, self.name)

    def run(self, framework: str, artifact: str | os.PathLike, *, scenario: Scenario, mode: str = "e2e",
            warmup: int = 5, runs: int = 50, overhead_pairs: int = 0, records_path: str | os.PathLike,
            trace_path: str | os.PathLike | None = None, timeout: float | None = None,
            engine: str | None = None) -> NativeRun:
        """One fresh measuring process pinned to the scenario's CPU set, launched by the runner
        registered for the framework on the scenario's accelerator (pipelines/runners/:
        latbench-run, or the torch worker); returns its NativeRun (see base.py)."""
        from pipelines.runners import runner_for

        check_run(self, framework, artifact)
        runner = runner_for(framework, scenario.accelerator)
        if runner is None:
            raise ValueError(f"device {self.name}: the suite has no {framework} runner for the {scenario.accelerator} "
                             f"(pipelines.runners)")
        return runner.launcher()(artifact, scenario=scenario, cpus=list(scenario.cpus) or None, mode=mode,
                                 warmup=warmup, runs=runs, overhead_pairs=overhead_pairs, records_path=records_path,
                                 trace_path=trace_path, timeout=timeout, engine=engine)

    def clusters(self) -> list[Cluster]:
        return read_clusters(self.root)

    def core_combinations(self, max_cores: int | None = None) -> list[CoreSet]:
        return core_combinations(self.clusters(), max_cores)

    def describe(self) -> dict:
        clusters = self.clusters()
        gov = governors(self.root)
        govs = sorted(set(gov.values()))
        if self.root in ("/", ""):
            hostname, kernel = socket.gethostname(), platform.release()
        else:  # a recorded tree: read what it has
            hostname = (_read(Path(self.root) / "etc" / "hostname") or "").strip() or None
            kernel = (_read(Path(self.root) / "proc" / "sys" / "kernel" / "osrelease") or "").strip() or None
        return {
            "name": self.name,
            "kind": self.kind,
            "hostname": hostname,
            "cpu_model": cpu_model(self.root),
            # family, model, stepping and ISA flags: what a release records of its machine
            "processor": processor_description(self.root),
            "machine": platform.machine() if self.root in ("/", "") else None,
            "cores": sum(c.size for c in clusters),
            "clusters": [c.to_dict() for c in clusters],
            "kernel": kernel,
            "governor": govs[0] if len(govs) == 1 else (gov or None),
            "gpu": self.gpu,
        }
