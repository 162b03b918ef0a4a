"""The runners: what the suite can measure for each (framework, accelerator), and how.

One registered :class:`Runner` per (framework, accelerator) says which artifact each precision
runs, which granularities its processes record, and why the other granularities and precisions
are not offered (the reasons end up in SCENARIO.json and every record). The measure stage, the
scenario grid and the devices ask this registry (:func:`runner_for`, :data:`RUNNERS`); a pair
absent here has no runner in the suite. It is the one list of frameworks and accelerators
(:func:`frameworks`, :func:`accelerators`), of how each runtime is named (``title``) and of the
model files each framework takes (``suffixes``): nothing else in the suite spells them.

The modules of this package:

- :mod:`.records`: the record format every runner writes (NativeRun, NativeRunError, the
  measure stage's record schema);
- :mod:`.process`: what the runners' measuring processes share (the CPU list argument, the
  NativeRun of a finished process, the kind and message of a failed one);
- :mod:`.litert`: the instrumented runtime ``latbench-run`` (LiteRT) on this machine;
- :mod:`.litert_gpu`: the LiteRT GPU runner's own steps around each process (its outputs
  checked against the CPU, its dispatches labelled with their kernels);
- :mod:`.torch`: the PyTorch worker (``TorchRuntime`` on :mod:`.worker`; ``python -m
  pipelines.runners.torch`` runs it as a program); :mod:`.torch_zygote`: the PyTorch runner's
  processes, forks of the torch zygote (``run_torch``, and ``launch`` registered below);
- :mod:`.worker`: the measuring process of a Python runtime and its parent side (flags, pinning,
  timed loop, records, trace, errors); :mod:`.onnxruntime`: ONNX Runtime on it; :mod:`.executorch`:
  ExecuTorch (XNNPACK delegate) on it;
- :mod:`.etdump`: an ExecuTorch ETDump read back as executions, calls and operator events;
  :mod:`.bare`: packages imported without their ``__init__`` (ExecuTorch's compiler, its devtools);
- :mod:`.zygote`: one process per Python runtime that imports its libraries once and forks the
  measuring processes.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Runner:
    """What the suite can measure for one (framework, accelerator): the artifact each precision
    runs, the granularities its runner records, and why the others (and absent precisions) are
    not offered. The reasons end up in SCENARIO.json and every record.

    ``launch`` names the function that runs one measuring process of the runner on this machine
    (``"<module>:<function>"``, imported on first use: the host device calls it, see
    ``pipelines/devices/host.py``) with the keywords ``scenario, cpus, mode, warmup, runs,
    overhead_pairs, records_path, trace_path, timeout, engine``. ``steps`` names the module of the runner's own steps around each of its processes (None:
    none), imported only when a process runs: ``prepare(argv, tmp, *, model, mode, precision,
    cpus, timeout)`` before the process returns an object with the process's ``env`` and a
    ``finish(records)`` called after it (pipelines/runners/litert_gpu.py)."""

    formats: dict[str, str]  # precision -> export format (generators/export/formats.py)
    granularities: tuple[str, ...]
    title: str = ""  # how the dataset card and scenario descriptions name the runtime
    suffixes: tuple[str, ...] = ()  # model files of this framework that `latbench profile` takes
    android: bool = False  # its runtime is built for phones too (scripts/cross-build.sh --android)
    missing_granularities: dict[str, str] = field(default_factory=dict)  # granularity -> why not
    missing_precisions: dict[str, str] = field(default_factory=dict)  # precision -> why not
    launch: str = ""  # "<module>:<function>" running one measuring process here
    steps: str | None = None  # module of the runner's own steps around each process
    # e2e columns every record of this runner fills under its current protocol: a released row
    # with one of them empty was measured under an older one, and a release sweep measures it
    # again (pipelines/release.py Release.pairs, release.remeasure_outdated)
    protocol_columns: tuple[str, ...] = ()
    # why its runtime is superseded ("": current); its title says "legacy", the card adds this
    legacy: str = ""
    # its kernel process records the op rows as its op process does (same profiler, same events):
    # a point measuring both runs the kernel process only (pipelines/measure/sweep.py)
    ops_in_kernel_mode: bool = False

    def launcher(self) -> Callable[..., Any]:
        """The function named by ``launch``."""
        module, _, name = self.launch.partition(":")
        return getattr(importlib.import_module(module), name)

    def load_steps(self) -> Any:
        """The module named by ``steps`` (None when the runner has none)."""
        return importlib.import_module(self.steps) if self.steps else None


_RUNNERS: dict[tuple[str, str], Runner] = {}
# (framework, accelerator) -> its runner, in registration order (a read-only view)
RUNNERS: Mapping[tuple[str, str], Runner] = MappingProxyType(_RUNNERS)


def register_runner(framework: str, accelerator: str, runner: Runner) -> Runner:
    """Adds the runner of (framework, accelerator) to the registry (once)."""
    if (framework, accelerator) in _RUNNERS:
        raise ValueError(f"runner {framework}-{accelerator} registered twice")
    if not runner.launch.partition(":")[2]:
        raise ValueError(f"runner {framework}-{accelerator}: launch must name '<module>:<function>', "
                         f"got {runner.launch!r}")
    _RUNNERS[(framework, accelerator)] = runner
    return runner


def runner_for(framework: str, accelerator: str) -> Runner | None:
    """The runner of (framework, accelerator), None when the suite has none."""
    return _RUNNERS.get((framework, accelerator))


def frameworks() -> tuple[str, ...]:
    """The frameworks the suite has a runner for, in registration order: the one list of them."""
    return tuple(dict.fromkeys(f for f, _ in _RUNNERS))


def accelerators() -> tuple[str, ...]:
    """The accelerators some runner measures on, in registration order."""
    return tuple(dict.fromkeys(a for _, a in _RUNNERS))


def legacy_frameworks() -> dict[str, str]:
    """Framework -> why its runtime is superseded, for the frameworks the registry marks legacy."""
    return {f: r.legacy for (f, _), r in _RUNNERS.items() if r.legacy}


def phone_frameworks() -> tuple[str, ...]:
    """The frameworks whose runtime is built for Android phones (the adb and farm devices run these)."""
    return tuple(dict.fromkeys(f for (f, _), r in _RUNNERS.items() if r.android))


def framework_by_suffix() -> dict[str, str]:
    """Model file suffix (``.tflite``) -> the framework whose runners take such files."""
    return {s: f for (f, _), r in _RUNNERS.items() for s in r.suffixes}


def missing_precision(precision: str, framework: str | None = None, accelerator: str | None = None) -> str | None:
    """Why the suite does not offer ``precision`` for ``framework`` on ``accelerator`` (None:
    any): the reason of the registered runners of that framework and accelerator when none of
    them runs it; None when one of them does, or none is registered."""
    runners = [r for (f, a), r in _RUNNERS.items() if framework in (None, f) and accelerator in (None, a)]
    if not runners or any(precision in r.formats for r in runners):
        return None
    return next((r.missing_precisions[precision] for r in runners if precision in r.missing_precisions),
                "see docs/exporters.md")


# ------------------------------------------------------------------ the suite's runners
register_runner("tflite", "cpu", Runner(
    {"fp32": "tflite_fp32", "fp16": "tflite_fp16", "int8": "tflite_int8"}, ("e2e", "op", "kernel"),
    title="TFLite (LiteRT runtime, XNNPACK)", suffixes=(".tflite",), android=True,
    launch="pipelines.runners.litert:launch"))
# On the GPU the precision is the compute precision (LiteRT GPU option `precision`), not the
# weights' type: both run the fp32 artifact, so the two scenarios differ in that alone
# (as the USC study's TFLite GPU fp16 runs, docs/gpu.md).
register_runner("tflite", "gpu", Runner(
    {"fp16": "tflite_fp32", "fp32": "tflite_fp32"}, ("e2e", "kernel"),
    title="TFLite (LiteRT runtime, GPU accelerator over WebGPU/Vulkan)", suffixes=(".tflite",),
    missing_granularities={"op": "LiteRT's profiler is not implemented for the GPU accelerator (\"Profile is "
                                 "not implemented\"); kernel records come from the Vulkan timestamp layer"},
    missing_precisions={"int8": "int8 is CPU-only (the GPU accelerator runs float models)"},
    launch="pipelines.runners.litert:launch",
    steps="pipelines.runners.litert_gpu"))  # outputs checked against the CPU, dispatches labelled
register_runner("pytorch", "cpu", Runner(
    {"fp32": "torchscript_fp32", "int8": "torchscript_int8"}, ("e2e", "op"),
    title="PyTorch (TorchScript, legacy)", suffixes=(".pt", ".ptl"),
    legacy=("TorchScript and the PyTorch Mobile lite interpreter are deprecated; ExecuTorch is PyTorch's on-device "
            "runtime today. The suite keeps TorchScript as the USC study's PyTorch Mobile reproduction"),
    missing_granularities={"kernel": "torch.profiler reports operators, not the kernels that ran them"},
    missing_precisions={"fp16": ".half() on a CPU is ~25x slower than fp32 (docs/exporters.md)"},
    launch="pipelines.runners.torch_zygote:launch",
    # counted since the workers run on jemalloc (pipelines/runners/allocator.py): a row without it
    # was measured on glibc's malloc, whose runs took page faults that the VM, not the network, priced
    protocol_columns=("page_faults_per_run",)))
# Not on phones (android=False): ONNX Runtime for Android ships as an AAR on Maven Central
# (com.microsoft.onnxruntime:onnxruntime-android), which this offline machine cannot obtain; with
# it, a phone runner needs the AAR's libonnxruntime.so and a native measuring binary pushed over adb
# (docs/measure.md, The ONNX Runtime worker).
register_runner("onnxruntime", "cpu", Runner(
    {"fp32": "onnx_fp32", "int8": "onnx_int8"}, ("e2e", "op"),
    title="ONNX Runtime (CPU execution provider)", suffixes=(".onnx",),
    missing_granularities={"kernel": "ORT's profiler reports one event per graph node (the kernel it ran is the "
                                     "node's); the MLAS routines below it are not instrumented"},
    missing_precisions={"fp16": "the CPU execution provider has fp16 kernels for few operators and runs the rest "
                                "in fp32 between inserted casts (docs/exporters.md)"},
    launch="pipelines.runners.onnxruntime:launch"))
# Not on phones (android=False): ExecuTorch for Android is an AAR on Maven Central
# (org.pytorch:executorch-android) or a source build with the Android NDK, neither of which this
# offline machine can obtain; with it, a phone runner needs the AAR's libexecutorch.so and a
# native measuring binary (ExecuTorch's executor_runner with ETDump) pushed over adb
# (docs/measure.md, The ExecuTorch worker).
register_runner("executorch", "cpu", Runner(
    {"fp32": "executorch_fp32", "int8": "executorch_int8"}, ("e2e", "op", "kernel"),
    title="ExecuTorch (XNNPACK delegate)", suffixes=(".pte",), ops_in_kernel_mode=True,
    missing_precisions={"fp16": "the ExecuTorch exporter (generators/export/executorch.py) writes fp32 and int8 "
                                "programs only: no fp16 artifact to run"},
    launch="pipelines.runners.executorch:launch"))
