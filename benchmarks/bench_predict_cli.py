"""Prints the wall time of ``latbench predict`` for one model file, per input kind (an IR JSON, an
ONNX file, a TFLite file), in fresh processes: what a user waits for, Python's start-up and every
import included.

What is timed: ``--n`` fresh ``python -m pipelines.cli predict FILE --scenario S`` processes one
after the other, per kind and per scenario (``--scenarios``: by default the USC Pixel 4's TFLite
CPU scenario, whose predictor is ``additive_mlp``, and the iPhone XS's, an op-wise ``usc_lasso``),
and ``predict --list``; the median and the fastest are printed. The files are one network of the
release (``--model-id``, default zoo-mobilenetv2-ref): its IR from ``data/release/models/`` (else
from a committed release, ``datasets/*/models.parquet``) and its ONNX and TFLite files from
``data/release/artifacts/`` (exported from the IR into a temporary folder when the artifacts are
gone).

Beside them, what sets the floor: one more process per kind lists the heavy libraries the
command imported (TensorFlow, torch, scikit-learn, scipy, LightGBM, onnx, ...: no shelf predictor
needs torch, scikit-learn or scipy), and fresh processes time importing each library the command
needs alone (the median of ``--n``). A kind over :data:`TARGET_S` gets a line saying which of
them its time goes to. The load average is printed before and after.

    python benchmarks/bench_predict_cli.py [--n 7] [--scenarios usc-pixel4-tflite-cpu-1large-fp32,...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
DEFAULT_SCENARIOS = "usc-pixel4-tflite-cpu-1large-fp32,usc-iphonexs-tflite-cpu-1large-fp32"
HEAVY = ("tensorflow", "torch", "sklearn", "scipy", "lightgbm", "onnx", "onnxruntime", "ai_edge_litert", "pandas")
# the import a library costs a fresh process (what the floor is made of)
# why predict needs each library
WHY = {"pandas": "the predictors' op tables", "onnx": "the ONNX importer's parser",
       "ai_edge_litert": "the TFLite flatbuffer schema"}
LIBRARIES = {"pandas": "import pandas", "onnx": "import onnx", "ai_edge_litert": "import ai_edge_litert.schema_py_generated"}


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    return took


def times(cmd: list[str], n: int) -> list[float]:
    return [wall(cmd) for _ in range(n)]


def imported(args: list[str]) -> list[str]:
    """The heavy libraries a ``latbench`` run with ``args`` imports (one more process)."""
    code = ("import sys, json; from pipelines.cli import main; rc = main(sys.argv[1:]); "
            f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)), file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    return json.loads(p.stderr.strip().splitlines()[-1])


def committed_ir(model_id: str, tmp: Path) -> Path:
    """The network's IR from a committed release (``datasets/*/models.parquet``), written into
    ``tmp``: for a checkout without ``data/release/``."""
    from pipelines.dataset.load import load_dataset

    for folder in sorted((ROOT / "datasets").glob("*/models.parquet")):
        ds = load_dataset(folder.parent)
        if model_id in set(ds.models["model_id"]):
            out = tmp / f"{model_id}.json"
            out.write_text(ds.graph(model_id).to_json())
            print(f"(IR JSON: data/release/models/ has no {model_id}: taken from {folder.parent.relative_to(ROOT)})")
            return out
    sys.exit(f"--model-id {model_id}: no IR in data/release/models/ nor in a committed release (datasets/)")


def files(model_id: str, tmp: Path) -> dict[str, Path]:
    """kind -> the model file of that kind for one network of the release."""
    ir = next((ROOT / "data/release/models").glob(f"*/{model_id}.json"), None)
    if ir is None:
        ir = committed_ir(model_id, tmp)
    out = {"IR JSON": ir}
    art = ROOT / "data/release/artifacts" / model_id
    for kind, name, export in (("ONNX", "onnx_fp32.onnx", "export_onnx"), ("TFLite", "tflite_fp32.tflite", "export_tflite")):
        if (art / name).is_file():
            out[kind] = art / name
            continue
        from generators.ir import Graph

        mod = __import__(f"generators.export.{'onnx' if kind == 'ONNX' else 'tflite'}", fromlist=[export])
        getattr(mod, export)(Graph.load(ir), tmp / name)
        print(f"({kind}: {art / name} is gone: exported from the IR into {tmp / name})")
        out[kind] = tmp / name
    return out


def predictor_libraries(scenario: str) -> list[str]:
    """The libraries the scenario's saved predictor names (its predictor.json ``libraries``)."""
    from shelf.store import Shelf

    shelf = Shelf()
    names = json.loads((shelf.folder / shelf.entry(scenario)["folder"] / "predictor.json").read_text())
    return [{"scikit-learn": "sklearn"}.get(n, n) for n in names.get("libraries", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=7, help="fresh processes per figure")
    ap.add_argument("--scenarios", default=DEFAULT_SCENARIOS)
    ap.add_argument("--model-id", default="f0ff2912cb003bcb", help="a release network (default: zoo-mobilenetv2-ref)")
    args = ap.parse_args()
    py = [sys.executable, "-m", "pipelines.cli"]
    load0 = os.getloadavg()
    print(f"load average at start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} (1, 5, 15 min) on "
          f"{os.cpu_count()} CPUs; {args.n} fresh processes per figure, median (fastest)")
    if sys.flags.dont_write_bytecode:
        print("(PYTHONDONTWRITEBYTECODE is set: every process compiles the project's modules anew, which an "
              "installed latbench with its bytecode caches does not)")
    print(f"python start-up alone: {statistics.median(times([sys.executable, '-c', 'pass'], args.n)):.2f} s; "
          f"`latbench predict --list`: {statistics.median(times(py + ['predict', '--list'], args.n)):.2f} s")
    lib_s = {lib: statistics.median(times([sys.executable, "-c", code], args.n)) for lib, code in LIBRARIES.items()}
    print("importing alone, in a fresh process: " + ", ".join(f"{lib} {s:.2f} s" for lib, s in lib_s.items()))
    with tempfile.TemporaryDirectory(prefix="bench-predict-cli-") as tmp:
        for kind, path in files(args.model_id, Path(tmp)).items():
            for sid in args.scenarios.split(","):
                cmd = ["predict", str(path), "--scenario", sid]
                t = times(py + cmd, args.n)
                med = statistics.median(t)
                libs = imported(cmd)
                print(f"  {kind:<8} {sid:<40} {med:5.2f} s ({min(t):.2f})  imports "
                      f"{', '.join(libs) or 'none of ' + ', '.join(HEAVY)}", flush=True)
                if med >= TARGET_S:
                    own = predictor_libraries(sid)
                    need = [x for x in lib_s if x in libs or x in own]
                    unneeded = [x for x in libs if x not in lib_s and x not in own]
                    print(f"    over {TARGET_S:.0f} s: it needs " + ", ".join(
                        f"{x} ({lib_s[x]:.2f} s to import alone, {WHY[x] if x not in own else 'the saved predictor'})"
                        for x in need) + (f"; it imports {', '.join(unneeded)}, which no shelf predictor needs"
                                          if unneeded else ""))
    load1 = os.getloadavg()
    print(f"load average at end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
