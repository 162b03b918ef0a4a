from __future__ import annotations

import os
from pathlib import Path

import pytest

# the helpers in tests/support/ assert too: pytest explains their failures as it does a test's
pytest.register_assert_rewrite("support")

# Ray resolves 127.0.0.1 to the machine's outward address unless told it runs on one machine,
# and reads this once, when it is first imported: set before any test module imports it, so the
# farm tests' clusters stay on loopback whichever module imports Ray first
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LATBENCH_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout: public measurements under external/ (never committed). A
    clone without it (a user's) skips the tests of the public data, saying so."""
    for name in ("usc-mobile-ml-benchmark", "help-nasbench201"):
        if not (SHARED / "external" / name).is_dir():
            pytest.skip(f"public data not on this machine: {SHARED / 'external' / name} not found "
                        "(these tests read the shared copies; LATBENCH_SHARED names another folder)")
    return SHARED


# the public datasets' folders under ../shared/external, for the tests that read their files
@pytest.fixture(scope="session")
def usc_dir(shared_dir) -> Path:
    return shared_dir / "external" / "usc-mobile-ml-benchmark"


@pytest.fixture(scope="session")
def help_dir(shared_dir) -> Path:
    return shared_dir / "external" / "help-nasbench201"


@pytest.fixture(scope="session")
def qaihub_dir() -> Path:
    """The copy of Qualcomm AI Hub's perf.yaml files under ../shared/external (never committed);
    a clone without it skips the tests that read it, saying so."""
    folder = SHARED / "external" / "qai-hub-models"
    if not any(folder.glob("*/perf.yaml")):
        pytest.skip(f"public data not on this machine: no {folder}/<model>/perf.yaml (these tests read the "
                    "shared copy; LATBENCH_SHARED names another folder)")
    return folder


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` once per test session, whichever xdist worker asks first (the others
    wait on a file lock and read the same folder): the session's shared temporary folder."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.is_file():
            build(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def qaihub_public(qaihub_dir, tmp_path_factory) -> Path:
    """The AI Hub copy imported alone (IR rebuilt) into a public data folder, once per session."""
    from pipelines.dataset import QaihubConfig
    from pipelines.dataset.import_public import run_import

    return built_once(tmp_path_factory, "public-qaihub", lambda out: run_import(
        None, None, out_dir=out, progress=False, card=False, cfg_qaihub=QaihubConfig(path=str(qaihub_dir))))


@pytest.fixture(scope="session")
def public(shared_dir, tmp_path_factory) -> dict[str, str]:
    """Leaderboard data roots for tests: a small public import (USC Pixel 4 + a HELP subset, built
    once per session) and a host folder that does not exist (host tracks are skipped)."""
    from support.fixtures import public_subset

    out = built_once(tmp_path_factory, "public-subset", lambda out: public_subset(shared_dir, out, usc_devices=["pixel4"]))
    return {"public": str(out), "host": str(tmp_path_factory.getbasetemp() / "no-host-data")}


# ---------------------------------------------------------------- the native build and the GPU
@pytest.fixture(scope="session")
def native_built() -> Path:
    """native/build.sh once per test session (incremental); the latbench-run binary."""
    from pipelines.runners import litert as nr
    from support.native import build_native

    build_native()
    return nr.BINARY


@pytest.fixture(scope="session")
def needs_gpu(native_built) -> None:
    """Skips, saying why, exactly where this machine's GPU path cannot compile and run a tiny model
    (the probe `device.gpu: auto` uses, pipelines.gpu.probe; scripts/setup.sh installs Mesa's
    lavapipe: docs/gpu.md), or the timestamp layer was not built."""
    from pipelines import gpu

    reason = gpu.unavailable_reason()
    if reason:
        pytest.skip(f"no GPU path on this machine: {reason}")
    if not (gpu.LAYER_DIR / "libVkLayer_latbench_timestamps.so").is_file():
        pytest.skip("the timestamp layer was not built (Vulkan headers missing: apt-get install libvulkan-dev)")


@pytest.fixture(scope="session")
def tiny_gpu_model(tmp_path_factory) -> Path:
    """conv3x3+ReLU, conv3x3 + residual add + ReLU, depthwise+ReLU, 1x1 conv+ReLU, average
    pool, global average pool, dense at 16x16x8: nine TFLite ops, ten GPU commands, ~3 ms a run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    inp = tf.keras.Input((16, 16, 8), batch_size=1)
    x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    y = tf.keras.layers.Conv2D(16, 3, padding="same")(x)
    x = tf.keras.layers.ReLU()(tf.keras.layers.Add()([x, y]))
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = tf.keras.layers.Conv2D(32, 1, activation="relu")(x)
    x = tf.keras.layers.AveragePooling2D(2)(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(10)(x)
    path = tmp_path_factory.mktemp("gpu-models") / "tiny_fp32.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(tf.keras.Model(inp, x)).convert())
    return path
