"""The host's GPU: LiteRT's WebGPU accelerator on a Vulkan device (here Mesa's software
driver lavapipe), kernel records from the latbench timestamp layer, and nnPerf's clock
synchronization (docs/gpu.md).

- :func:`vulkan_devices` lists the Vulkan devices the loader finds (the same probe as
  ``latbench-run --accelerator gpu``), :func:`unavailable_reason` says in one line why GPU
  scenarios cannot run here (None when they can);
- :func:`layer_env` gives the environment that enables the timestamp layer for any Vulkan
  program (latbench-run sets it itself in ``--mode kernel``);
- :func:`gpu_kernels` / :func:`kernels_by_run` read the ``kernel`` records with
  ``source == "gpu"`` of a :class:`pipelines.runners.records.NativeRun`;
- :class:`ClockSync` drives the C implementation of nnPerf's Algorithm 1
  (``native/src/clocksync.c``, built as ``liblatbench_clocksync.so``) so that tests and
  benchmarks check the very code latbench-run uses.

Beside it in this package: :mod:`.programs` (which kernel each GPU dispatch ran, from the
accelerator's generated programs) and :mod:`.validate` (a GPU run's outputs against the CPU's).
"""
from __future__ import annotations

import ctypes
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "native" / "build"
LAYER_NAME = "VK_LAYER_LATBENCH_timestamps"
LAYER_DIR = BUILD / "vklayer"
CLOCKSYNC_LIB = BUILD / "liblatbench_clocksync.so"
# where the Vulkan loader looks for driver manifests (besides VK_DRIVER_FILES / VK_ICD_FILENAMES)
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")


# ---------------------------------------------------------------- Vulkan devices
class _AppInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("pApplicationName", ctypes.c_char_p),
                ("applicationVersion", ctypes.c_uint32), ("pEngineName", ctypes.c_char_p),
                ("engineVersion", ctypes.c_uint32), ("apiVersion", ctypes.c_uint32)]


class _InstanceInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_int), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.POINTER(_AppInfo)), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


_DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}


def vulkan_devices() -> list[dict[str, Any]]:
    """The Vulkan physical devices this machine offers: name, type (cpu for lavapipe), API
    version. Raises OSError (one line) when there is no Vulkan loader or no instance.

    The probe runs in a child process: a Vulkan driver loaded into a process that also holds
    TensorFlow (both bring their own LLVM) crashes that process at exit."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import json; from pipelines.gpu import _vulkan_devices_here as f; "
                           "print(json.dumps(f()))"], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise OSError(lines[-1].split(": ", 1)[-1] if lines else f"Vulkan probe failed ({proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _vulkan_devices_here() -> list[dict[str, Any]]:
    try:
        vk = ctypes.CDLL("libvulkan.so.1")
    except OSError:
        raise OSError("no Vulkan loader (libvulkan.so.1); scripts/setup.sh installs it with Mesa's lavapipe") from None
    vk.vkCreateInstance.argtypes = [ctypes.POINTER(_InstanceInfo), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    vk.vkEnumeratePhysicalDevices.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    vk.vkGetPhysicalDeviceProperties.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    vk.vkDestroyInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    app = _AppInfo(0, None, b"latbench probe", 1, None, 0, (1 << 22) | (1 << 12))  # VK_API_VERSION_1_1
    info = _InstanceInfo(1, None, 0, ctypes.pointer(app), 0, None, 0, None)
    inst = ctypes.c_void_p()
    if vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(inst)) != 0:
        raise OSError("cannot create a Vulkan instance (no usable Vulkan driver)")
    try:
        n = ctypes.c_uint32(0)
        vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(n), None)
        handles = (ctypes.c_void_p * n.value)()
        if n.value:
            vk.vkEnumeratePhysicalDevices(inst, ctypes.byref(n), handles)
        out = []
        for h in handles[: n.value]:
            props = ctypes.create_string_buffer(1024)  # VkPhysicalDeviceProperties is 824 bytes
            vk.vkGetPhysicalDeviceProperties(h, props)
            api, driver, _vendor, _device, dtype = (int.from_bytes(props.raw[i:i + 4], "little") for i in range(0, 20, 4))
            name = props.raw[20:276].split(b"\0", 1)[0].decode(errors="replace")
            out.append({"name": name, "type": _DEVICE_TYPES.get(dtype, "other"),
                        "api_version": f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}", "driver_version": driver})
        return out
    finally:
        vk.vkDestroyInstance(inst, None)


PROBE_MODEL = BUILD / "gpu-probe" / "probe_fp32.tflite"


def probe() -> tuple[list[dict[str, Any]], str | None]:
    """(Vulkan devices, None) when GPU scenarios can run on this host, else (what was found,
    one line saying why not).

    A Vulkan device is not enough: with Debian bookworm's own Mesa 22.3, lavapipe enumerates
    but LiteRT's accelerator finds "No adapters". So the probe ends by compiling and running a
    tiny model on the GPU through latbench-run, output check included, exactly as a GPU
    scenario would (:func:`smoke_run`); its error, the runtime's own words, is the reason."""
    try:
        devices = vulkan_devices()
    except OSError as e:
        return [], str(e)
    if not devices:
        icds = [str(p) for d in ICD_DIRS for p in sorted(Path(d).glob("*.json"))] if any(
            Path(d).is_dir() for d in ICD_DIRS) else []
        return [], (f"no Vulkan device (driver manifests: {', '.join(icds) or 'none'}); "
                    "scripts/setup.sh installs Mesa's lavapipe from the release's backports")
    accel = _litert_dir() / "libLiteRtWebGpuAccelerator.so"
    if not accel.is_file():
        return devices, f"LiteRT's GPU accelerator is missing ({accel})"
    return devices, smoke_run()


def smoke_run(model: str | os.PathLike | None = None) -> str | None:
    """Compiles and runs ``model`` (default: a conv + ReLU + add network at 8x8, built once into
    native/build/gpu-probe/) on the GPU in fp32; None when it ran and its outputs match the CPU,
    else one line saying why not (the runtime's own message)."""
    from ..runners.litert import run_native
    from ..runners.records import NativeRunError

    try:
        path = Path(model) if model is not None else _probe_model()
        run_native(path, accelerator="gpu", precision="fp32", warmup=0, runs=1, timeout=120)
    except (NativeRunError, OSError) as e:
        return f"the GPU path cannot run a tiny model: {e}"
    return None


def _probe_model() -> Path:
    """The probe's .tflite, exported from IR by the project's own exporter, in a child process
    (TensorFlow and a Vulkan driver in one process crash it at exit)."""
    import subprocess
    import sys

    if not PROBE_MODEL.is_file():
        code = ("import sys; from generators.ir import Graph; from generators.export.tflite import export_tflite\n"
                "g = Graph('gpu-probe', source='probe'); x = g.input([1, 4, 8, 8])\n"
                "y = g.add('relu', g.add('conv2d', x, out_channels=8, kernel=3, padding=1))\n"
                "g.set_outputs(g.add('add', [y, g.add('conv2d', y, out_channels=8, kernel=1)]))\n"
                "export_tflite(g, sys.argv[1], 'fp32')")
        proc = subprocess.run([sys.executable, "-c", code, str(PROBE_MODEL)], capture_output=True, text=True,
                              cwd=str(ROOT), env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            raise OSError(f"cannot export the probe model {PROBE_MODEL}: {lines[-1] if lines else proc.returncode}")
    return PROBE_MODEL


def unavailable_reason() -> str | None:
    """None when GPU scenarios can run on this host, else one line saying why not."""
    return probe()[1]


def _litert_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("ai_edge_litert")
    return Path(spec.origin).parent if spec and spec.origin else Path("/nonexistent")


def layer_env(base: dict[str, str] | None = None, layer_dir: str | os.PathLike = LAYER_DIR) -> dict[str, str]:
    """Environment that loads the timestamp layer into a Vulkan program (the loader reads
    ``VK_ADD_LAYER_PATH`` for the manifest and ``VK_INSTANCE_LAYERS`` to enable it)."""
    env = dict(os.environ if base is None else base)
    env["VK_ADD_LAYER_PATH"] = os.pathsep.join(p for p in (str(layer_dir), env.get("VK_ADD_LAYER_PATH")) if p)
    env["VK_INSTANCE_LAYERS"] = ":".join(p for p in (env.get("VK_INSTANCE_LAYERS"), LAYER_NAME) if p)
    return env


# ---------------------------------------------------------------- kernel records
def gpu_kernels(run) -> list[dict[str, Any]]:
    """The GPU commands (``kernel`` records with ``source == "gpu"``) of a NativeRun."""
    return [k for k in run.kernels if k.get("source") == "gpu"]


def kernels_by_run(run) -> dict[int, list[dict[str, Any]]]:
    """Timed run index -> its GPU commands in execution order (submission, then position)."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for k in gpu_kernels(run):
        out[k["run"]].append(k)
    for ks in out.values():
        ks.sort(key=lambda k: (k["submission"], k["index_in_submission"]))
    return dict(out)


def dispatches(kernels: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Only the compute dispatches (not the copies between host and device memory)."""
    return [k for k in kernels if k["kind"].startswith("dispatch")]


# ---------------------------------------------------------------- clock synchronization
class _History(ctypes.Structure):
    """Mirror of ``cs_history`` (the slope history's centred least-squares sums)."""

    _fields_ = [("w", ctypes.c_double), ("w2", ctypes.c_double), ("mx", ctypes.c_double), ("my", ctypes.c_double),
                ("cxx", ctypes.c_double), ("cxy", ctypes.c_double), ("cyy", ctypes.c_double),
                ("t_first", ctypes.c_double), ("t_last", ctypes.c_double), ("n", ctypes.c_int64),
                ("c0", ctypes.c_double), ("c1", ctypes.c_double), ("r_prev", ctypes.c_double),
                ("bin_start", ctypes.c_double), ("bin_t", ctypes.c_double), ("bin_tau", ctypes.c_double),
                ("bin_res", ctypes.c_double), ("bin_open", ctypes.c_bool)]


class _CS(ctypes.Structure):
    """Mirror of ``clocksync`` (native/src/clocksync.h); its size is checked at load."""

    _fields_ = [("k", ctypes.c_int), ("sigma_floor_ns", ctypes.c_double), ("min_span_ns", ctypes.c_double),
                ("history_ns", ctypes.c_double), ("bin_ns", ctypes.c_double),
                ("a", ctypes.c_double), ("b", ctypes.c_double), ("sigma", ctypes.c_double), ("a_se", ctypes.c_double),
                ("fitted", ctypes.c_bool), ("n", ctypes.c_int), ("w", ctypes.c_int),
                ("wt", ctypes.c_double * 4096), ("wtau", ctypes.c_double * 4096),
                ("nres", ctypes.c_int), ("res_head", ctypes.c_int),
                ("res", ctypes.c_double * 4096), ("t_ref", ctypes.c_double), ("t_refit", ctypes.c_double),
                ("h", _History),
                ("observed", ctypes.c_int64), ("accepted", ctypes.c_int64), ("rejected", ctypes.c_int64),
                ("refits", ctypes.c_int64), ("slope_updates", ctypes.c_int64)]


_lib = None


def _clocksync_lib(path: str | os.PathLike = CLOCKSYNC_LIB):
    global _lib
    if _lib is None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path} is not built (run native/build.sh)")
        lib = ctypes.CDLL(str(path))
        lib.cs_state_size.restype = ctypes.c_size_t
        if lib.cs_state_size() != ctypes.sizeof(_CS):
            raise RuntimeError(f"{path}: clocksync layout changed ({lib.cs_state_size()} != {ctypes.sizeof(_CS)} bytes)")
        lib.cs_init.argtypes = [ctypes.POINTER(_CS), ctypes.c_int, ctypes.c_double, ctypes.c_double]
        lib.cs_set_envelope.argtypes = [ctypes.POINTER(_CS), ctypes.c_double]
        lib.cs_bootstrap.argtypes = [ctypes.POINTER(_CS), ctypes.POINTER(ctypes.c_int64),
                                     ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
        lib.cs_bootstrap.restype = ctypes.c_double
        lib.cs_observe.argtypes = [ctypes.POINTER(_CS), ctypes.c_int64, ctypes.c_int64]
        lib.cs_observe.restype = ctypes.c_bool
        lib.cs_to_host.argtypes = [ctypes.POINTER(_CS), ctypes.c_int64]
        lib.cs_to_host.restype = ctypes.c_int64
        lib.cs_set_history.argtypes = [ctypes.POINTER(_CS), ctypes.c_double]
        lib.cs_time_observe.argtypes = [ctypes.POINTER(_CS), ctypes.POINTER(ctypes.c_int64),
                                        ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint8)]
        lib.cs_time_observe.restype = ctypes.c_int64
        _lib = lib
    return _lib


def _fit_field(name: str, doc: str | None = None) -> property:
    """The read-only attribute of a ClockSync that is the field ``name`` of its C struct."""
    return property(lambda self: getattr(self._cs, name), doc=doc)


# the least span of slope history latbench-run adopts a slope from (native/src/gpu.c's
# SYNC_MIN_SPAN_NS, recorded in a run's meta as gpu.sync.min_span_ns), ClockSync's default
SYNC_MIN_SPAN_NS = 1e9


class ClockSync:
    """nnPerf's GPU-to-CPU clock mapping (SenSys'23 section 3.2.2, Algorithm 1 and Eq. 2),
    the C implementation latbench-run runs, driven from Python.

    ``bootstrap(t, tau)`` takes the pairs of the injected empty kernels; ``observe(t, tau)``
    is Algorithm 1's SYNC for one enqueue pair (True if accepted); ``to_host(tau)`` maps a GPU
    timestamp to the host clock under the current fit (``a``, ``b``: tau = a t + b).

    ``history_ns`` is the forgetting time constant of the slope history (clocksync.h: the
    offset is refitted on each window of k pairs, the slope on the history of accepted
    pairs); None keeps the C default (10 s), 0 fits the slope on each window alone, the
    literal reading of Algorithm 1 that the benchmark keeps as its baseline.
    ``envelope_ns`` is the width of the bins whose least-delayed pair enters that history
    (the lower envelope); None keeps the C default (50 ms), 0 lets every accepted pair in."""

    def __init__(self, k: int = 8, sigma_floor_ns: float = 1000.0, min_span_ns: float = SYNC_MIN_SPAN_NS,
                 history_ns: float | None = None, envelope_ns: float | None = None):
        self._lib = _clocksync_lib()
        self._cs = _CS()
        self._lib.cs_init(ctypes.byref(self._cs), k, sigma_floor_ns, min_span_ns)
        if history_ns is not None:
            self._lib.cs_set_history(ctypes.byref(self._cs), float(history_ns))
        if envelope_ns is not None:
            self._lib.cs_set_envelope(ctypes.byref(self._cs), float(envelope_ns))

    def bootstrap(self, t: Sequence[int], tau: Sequence[int]) -> float:
        n = len(t)
        arr = ctypes.c_int64 * n
        return self._lib.cs_bootstrap(ctypes.byref(self._cs), arr(*map(int, t)), arr(*map(int, tau)), n)

    def observe(self, t: int, tau: int) -> bool:
        return bool(self._lib.cs_observe(ctypes.byref(self._cs), int(t), int(tau)))

    def to_host(self, tau: int) -> int:
        return int(self._lib.cs_to_host(ctypes.byref(self._cs), int(tau)))

    def time_observe(self, t: Sequence[int], tau: Sequence[int]) -> tuple[list[int], list[bool], int]:
        """Feeds the pairs through ``cs_observe`` timed in C, call by call (the FFI stays
        outside the timed intervals): (ns per call, whether the call refitted, the timer's
        own cost in ns to subtract)."""
        n = len(t)
        arr = ctypes.c_int64 * n
        ns, refit = arr(), (ctypes.c_uint8 * n)()
        timer = self._lib.cs_time_observe(ctypes.byref(self._cs), arr(*map(int, t)), arr(*map(int, tau)), n, ns, refit)
        return list(ns), [bool(r) for r in refit], int(timer)

    # the current fit, read from the C struct (floats)
    a = _fit_field("a")
    a_se = _fit_field("a_se", "Standard error of the adopted slope (inf while the nominal slope 1 stands).")
    b = _fit_field("b")
    sigma = _fit_field("sigma")

    @property
    def counts(self) -> dict[str, int]:
        return {"observed": self._cs.observed, "accepted": self._cs.accepted, "rejected": self._cs.rejected,
                "refits": self._cs.refits, "slope_updates": self._cs.slope_updates}


def idle_enqueue_delays(kernels: Iterable[dict[str, Any]]) -> list[int]:
    """GPU start minus host submit time (ns) of every command buffer submitted to an idle
    GPU (the previous one ended before it was submitted), from the raw stamps of the kernel
    records. Meaningful where the GPU clock is the host's (lavapipe: CLOCK_MONOTONIC): then
    these are the true enqueue delays, the part of each sync pair that no fit can tell from
    the clock offset, and so the measure of what the synchronized times may be early by."""
    subs: dict[int, dict[str, int]] = {}
    for k in kernels:
        s = subs.setdefault(k["submission"], {"t": k["cpu_submit_ns"], "tau": k["gpu_submit_ns"], "end": 0})
        s["end"] = max(s["end"], k["gpu_end_ns"])
    ordered = [subs[i] for i in sorted(subs)]
    return [s["tau"] - s["t"] for p, s in zip(ordered, ordered[1:]) if p["end"] < s["t"]]
