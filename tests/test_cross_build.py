"""The cross-compilation recipe, exercised as far as this machine allows: scripts/cross-build.sh
builds native/ for aarch64 Linux against the aarch64 libLiteRt.so of the same pinned
ai-edge-litert release (pip-downloaded wheel, cached outside git), and the result runs a
NAS-Bench-201 network under qemu-aarch64 user emulation with the same XNNPACK kernels as the
host build.

qemu-user before 8.1 shows a guest the host's x86 /proc/cpuinfo, which LiteRT's CPU detection
(the cpuinfo library) cannot parse (it crashes in the model compilation); qemu serves files of
its ``-L`` prefix in place of the host's, so the test's prefix holds an arm64 Linux
/proc/cpuinfo of the CPU that ``QEMU_CPU`` emulates (Cortex-A76). Newer qemu answers
/proc/cpuinfo itself and ignores that file.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from adbd_emulator import exported_models, model_files
from pipelines.runners.litert import run_native
from pipelines.runners.records import read_records

ROOT = Path(__file__).resolve().parents[1]
CROSS_SYSROOT = Path("/usr/aarch64-linux-gnu")
# what an arm64 kernel prints for a Cortex-A76 core (implementer Arm 0x41, part 0xd0b)
CPUINFO_A76 = ("processor\t: {n}\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics "
               "fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
               "CPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1\n\n")

pytestmark = pytest.mark.skipif(
    not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64") and CROSS_SYSROOT.is_dir()),
    reason="the aarch64 cross toolchain is not installed (scripts/debian-packages.txt: gcc-aarch64-linux-gnu, "
           "libc6-dev-arm64-cross, qemu-user; scripts/setup.sh installs them)")


@pytest.fixture(scope="module")
def cross_runner() -> Path:
    proc = subprocess.run([str(ROOT / "scripts" / "cross-build.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        pytest.fail(f"scripts/cross-build.sh failed: {proc.stderr.strip()[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def qemu_prefix(tmp_path_factory) -> Path:
    """The ``-L`` prefix: the cross libraries plus an arm64 /proc/cpuinfo (see the module doc)."""
    prefix = tmp_path_factory.mktemp("qemu-prefix")
    (prefix / "lib").symlink_to(CROSS_SYSROOT / "lib")
    (prefix / "proc").mkdir()
    n = len(os.sched_getaffinity(0))
    (prefix / "proc" / "cpuinfo").write_text("".join(CPUINFO_A76.format(n=i) for i in range(n)))
    return prefix


def test_the_build_is_aarch64_and_carries_the_pinned_library(cross_runner):
    out = cross_runner.parent
    assert cross_runner == ROOT / "build" / "native-aarch64-linux" / "latbench-run"
    head = cross_runner.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64
    lib = (out / "libLiteRt.so").read_bytes()[:20]
    assert int.from_bytes(lib[18:20], "little") == 183
    pin = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines() if "ai-edge-litert==" in line)
    assert (out / "LITERT_VERSION").read_text().strip() in pin


def test_the_aarch64_runtime_runs_a_network_under_qemu(cross_runner, qemu_prefix, tmp_path_factory, tmp_path):
    model = model_files(exported_models(tmp_path_factory))[0]
    rec = tmp_path / "arm.jsonl"
    env = {**os.environ, "QEMU_CPU": "cortex-a76", "LD_LIBRARY_PATH": str(cross_runner.parent)}
    proc = subprocess.run(["qemu-aarch64", "-L", str(qemu_prefix), str(cross_runner), "--model", str(model),
                           "--records", str(rec), "--mode", "kernel", "--warmup", "1", "--runs", "1",
                           "--threads", "1", "--cpus", "0", "--precision", "fp32"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    arm = read_records(rec)
    assert arm[0]["type"] == "meta" and arm[-1]["type"] == "end" and arm[-1]["affinity_ok"] is True
    assert Path(arm[0]["library"]).resolve() == (cross_runner.parent / "libLiteRt.so").resolve()
    host = run_native(model, cpus=[0], threads=1, mode="kernel", warmup=1, runs=1, precision="fp32")
    # the same XNNPACK operators, in the same order, on both instruction sets
    names = [r["name"] for r in arm if r["type"] == "kernel"]
    assert names and names == [k["name"] for k in host.kernels]
    assert sum(r["phase"] == "timed" for r in arm if r["type"] == "run") == 1
