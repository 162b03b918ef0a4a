"""Small USC- and HELP-format inputs naming every device the importers knew before the device
catalog (issue 19), written by ``tests/test_device_catalog.py`` to check that the catalog gives
the same scenario tables as the code did (``tests/data/device_catalog/``)."""
from __future__ import annotations

import hashlib
from pathlib import Path

# The devices and clusters as pipelines/dataset/usc.py had them in code (device -> [(tag, cores)]).
USC_CLUSTERS = {
    "pixel4": [("large", 1), ("med", 3), ("small", 4)],
    "s10": [("large", 2), ("med", 2), ("small", 4)],
    "a03s": [("large", 4), ("small", 4)],
    "iphonexs": [("large", 2), ("small", 4)],
    "mi8se": [("large", 2), ("small", 6)],
    "iphone7": [("large", 2), ("small", 2)],
}
HELP_NAMED = ["pixel2", "pixel3", "raspi4", "eyeriss", "fpga", "gold_6226", "gold_6240", "silver_4114",
              "silver_4210r", "samsung_a50", "samsung_s7", "essential_ph_1"]
HELP_GPUS = ["1080ti", "2080ti", "titan_rtx", "titanxp", "titanx"]
HELP_BATCHES = [1, 32, 256]
USC_MODELS = ["mobilenetv2_w1", "resnet18"]


def usc_core_sets(clusters: list[tuple[str, int]]) -> list[str]:
    out = [f"{k}{tag}" for tag, n in clusters for k in range(1, n + 1)]
    if len(clusters) > 1:
        out += [f"1{clusters[0][0]}{k}{clusters[1][0]}" for k in range(1, clusters[1][1] + 1)]
    return out


def usc_columns(devices: dict[str, list[tuple[str, int]]]) -> list[str]:
    cols = []
    for dev, clusters in devices.items():
        for cores in [*usc_core_sets(clusters), "gpu"]:
            for prec in ("float", "quant"):
                cols += [f"{dev}|{cores}|{prec}|mean", f"{dev}|{cores}|{prec}|std"]
    return cols


def write_usc(folder: Path, devices: dict[str, list[tuple[str, int]]] | None = None) -> Path:
    """The e2e and GPU op files of both frameworks in the USC layout (the same content), one column group per core
    set of each device (every value distinct, in microseconds)."""
    devices = USC_CLUSTERS if devices is None else devices
    folder.mkdir(parents=True, exist_ok=True)
    cols = usc_columns(devices)
    lines = [",".join(["model", "FLOPS", *cols])]
    for i, m in enumerate(USC_MODELS):
        vals = [f"{1000 + 10 * j + i}.5" if c.endswith("mean") else f"{j % 7 + 1}.25" for j, c in enumerate(cols)]
        lines.append(",".join([m, str(600_000_000 + i), *vals]))
    for fw in ("tflite", "torch"):
        (folder / f"cnn_real_e2e_{fw}.csv").write_text("\n".join(lines) + "\n")
    ops_cols = [c for d in devices for c in (f"{d}|gpu|float", f"{d}|gpu|kernel")]
    feature = '"{\'Input_shape\': 224, \'Input_channel\': 3, \'Output_shape\': 112, \'Stride\': 2, \'Kernel\': 3, \'Filter\': 32}"'
    ops = [",".join(["model", "operation", "feature", *ops_cols])]
    for i, m in enumerate(USC_MODELS):
        cells = []
        for j, _ in enumerate(devices):
            cells += [f"{50 + j + i}.5", f"convolution_2d_{j}_linked_:_relu_{j + 1}"]
        ops.append(",".join([m, "CONV_2D", feature, *cells]))
    for fw in ("tflite", "torch"):
        (folder / f"cnn_real_ops_gpu_{fw}.csv").write_text("\n".join(ops) + "\n")
    return folder


def help_names() -> list[str]:
    return [*HELP_NAMED, *(f"{g}_{b}" for g in HELP_GPUS for b in HELP_BATCHES)]


def write_help(folder: Path, names: list[str] | None = None, indices=(0, 1, 42)) -> Path:
    """latency.csv in the converted HELP layout with one column per device name."""
    from generators.nasbench201 import arch_str

    names = help_names() if names is None else names
    folder.mkdir(parents=True, exist_ok=True)
    lines = [",".join(["nb201_index", "arch_str", *(f"{n}_ms" for n in names)])]
    for i in indices:
        lines.append(",".join([str(i), arch_str(i), *(f"{3 + j + i / 100:.3f}" for j in range(len(names)))]))
    (folder / "latency.csv").write_text("\n".join(lines) + "\n")
    return folder


def digest(df) -> str:
    return hashlib.sha256(df.to_csv(index=False).encode()).hexdigest()
