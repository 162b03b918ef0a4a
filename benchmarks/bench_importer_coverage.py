"""Importer coverage over real model zoos: every Keras application and every pytorchcv ImageNet
model, converted the way their users convert them, imported into the IR and counted against the
source (generators/importers/conformance.py).

Routes: a Keras application (``weights=None``, its preprocessing layers included) through
TFLite's converter with default options, as built (free batch) and rebuilt on a batch-1 input;
a pytorchcv model (``pretrained=False``) through PyTorch's TorchScript-based ONNX exporter and
its dynamo exporter, and, when named with ``--route tflite-litert-torch``, through litert-torch
to a .tflite file (in its own environment: scripts/setup-litert-torch-env.sh). Per case: built, converted, imported (else the importer's one-line error,
which names the operator), the IR's MACs against the source's (PyTorch's flop counter, the
TensorFlow graph of the Keras call) and the parameters. It prints the coverage per zoo and
route, the failures grouped by operator, and every case whose MACs are off by more than 1%.

The cases go to a JSON-lines file as they finish (by default ``benchmarks/results/
importer_coverage.jsonl``, the committed record); a second run skips what the file holds, so the
whole (hours: hundreds of models, the dynamo exporter tens of seconds each) can be run in pieces
and resumed:

    python benchmarks/bench_importer_coverage.py                                  # everything
    python benchmarks/bench_importer_coverage.py --zoo keras                      # the Keras applications
    python benchmarks/bench_importer_coverage.py --zoo pytorchcv --route onnx-torchscript
    python benchmarks/bench_importer_coverage.py --zoo pytorchcv --route onnx-dynamo --every 10   # a spread sample
    python benchmarks/bench_importer_coverage.py --zoo pytorchcv --route tflite-litert-torch --every 10
    python benchmarks/bench_importer_coverage.py --model resnet18 --model MobileNetV2 --results /tmp/c.jsonl
    python benchmarks/bench_importer_coverage.py --retry                          # again what did not conform
    python benchmarks/bench_importer_coverage.py --report                         # the table of what the file holds
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from generators.importers.conformance import MACS_TOLERANCE, ROUTES, ZOOS, check_model  # noqa: E402

#: the project's record of the whole zoos, committed: a run takes hours, and ``--report`` reads it
#: on any clone
DEFAULT_RESULTS = Path(__file__).resolve().parent / "results" / "importer_coverage.jsonl"


def operator_of(error: str) -> str:
    """The operator a refusal names: ``(OpType)`` of an ONNX node, ``(OP, ...`` of a TFLite
    operator; else the error's kind."""
    m = re.search(r"ONNX node '[^']*' \((\w+)\)", error) or re.search(r"TFLite operator \d+ \((\w+)", error)
    if m:
        return m.group(1)
    m = re.match(r"(\w+(Error|Exception))", error)
    return m.group(1) if m else error.split(":")[0][:40]


def load(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def report(rows: list[dict]) -> None:
    """The coverage table, the failures by operator, the cases off in MACs."""
    by = defaultdict(list)
    for r in rows:
        by[(r["zoo"], r["route"])].append(r)
    print("\n| zoo | route | models | built | converted | imported | MACs within 1% | same outputs | predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (zoo, route), rs in sorted(by.items()):
        n = len(rs)
        built = sum(r["status"] != "not built" for r in rs)
        conv = sum(r["status"] in ("imported", "refused") for r in rs)
        imp = sum(r["status"] == "imported" for r in rs)
        macs = sum(r["status"] == "imported" and r["macs_error"] is not None and abs(r["macs_error"]) <= MACS_TOLERANCE
                   for r in rs)
        same = sum(r.get("same_outputs") is True for r in rs)
        compared = sum(r.get("same_outputs") is not None for r in rs)
        predicted = sum("predicted_ms" in r.get("extra", {}) for r in rs)
        print(f"| {zoo} | {route} | {n} | {built} | {conv} | {imp} ({100 * imp / max(conv, 1):.0f}% of converted) | "
              f"{macs} ({100 * macs / max(imp, 1):.0f}% of imported) | {same} of {compared} compared | {predicted} |")
    fails = [r for r in rows if r["status"] in ("refused", "not converted", "not built")]
    if fails:
        print("\nNot imported, by the operator or error named (models):")
        groups = defaultdict(list)
        for r in fails:
            groups[(r["status"], r["route"], operator_of(r["error"]))].append(r)
        for (status, route, op), rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            names = sorted({r["model"] for r in rs})
            print(f"  {status:13} {route:17} {op:28} {len(names):4}  {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}")
            print(f"      e.g. {rs[0]['error'][:220]}")
    differ = [r for r in rows if r.get("same_outputs") is False]
    if differ:
        print("\nImported, but the IR with the file's weights does not compute what the file computes:")
        for r in differ:
            print(f"  {r['zoo']:9} {r['model']:28} {r['route']:17} max |diff| / max |output| {r['output_error']:.3g} "
                  f"{r.get('extra', {}).get('outputs', '')[:120]}")
    chaotic = [r for r in rows if r["status"] == "imported" and r.get("same_outputs") is None and r.get("output_error") is not None]
    if chaotic:
        print("\nImported, outputs not comparable (the file's own runtime differs from the source framework's output "
              "by more than 1% on a random input: a chaotic random network):")
        print("  " + ", ".join(f"{r['model']} ({r['route']}, {r['reference_error']:.2g})" for r in chaotic))
    unpredicted = [r for r in rows if "predict_error" in r.get("extra", {})]
    if unpredicted:
        print("\nImported, but the shelf gave no prediction:")
        for r in unpredicted:
            print(f"  {r['zoo']:9} {r['model']:28} {r['route']:17} {r['extra']['predict_error'][:160]}")
    off = [r for r in rows if r["status"] == "imported" and (r["macs_error"] is None or abs(r["macs_error"]) > MACS_TOLERANCE)]
    if off:
        print(f"\nImported with MACs off by more than {100 * MACS_TOLERANCE:.0f}% of the source's:")
        for r in sorted(off, key=lambda r: -abs(r["macs_error"] or 0)):
            e = r["macs_error"]
            print(f"  {r['zoo']:9} {r['model']:28} {r['route']:17} IR {r['ir_macs']:>14,} source {r['src_macs'] or 0:>14,} "
                  f"({'n/a' if e is None else f'{100 * e:+.2f}%'})")
    secs = sum(r.get("seconds", 0) for r in rows)
    commits = defaultdict(int)
    for r in rows:
        commits[r.get("commit", "not recorded")] += 1
    print(f"\n{len(rows)} cases, {secs / 60:.1f} min of conversion and import in all; code: "
          + ", ".join(f"{c} ({n})" for c, n in sorted(commits.items(), key=lambda kv: -kv[1])))


def code_version() -> str:
    """The project's commit (12 hex digits, "+changes" when the work tree differs from it): each
    case records the importers it ran, so an old refusal is told from a current one."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def _check(zoo: str, name: str, routes: tuple[str, ...], predict: str | None) -> list:
    with tempfile.TemporaryDirectory(prefix="latbench-coverage-") as work:
        return check_model(zoo, name, Path(work), routes, predict=predict)


def _in_child(zoo: str, name: str, routes: tuple[str, ...], predict: str | None) -> list:
    """One model's cases in a fresh process: what a framework keeps of a model it built (Keras'
    graphs, the converter's buffers) is returned to the system with it (a single process went
    past 20 GB by VGG19), and a crash is the model's outcome, not the run's."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from generators.importers.conformance import Case

    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        try:
            return pool.submit(_check, zoo, name, routes, predict).result()
        except BrokenProcessPool as e:
            return [Case(zoo, name, r, "not converted", f"the process checking it died ({e})") for r in routes]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", action="append", choices=sorted(ZOOS), help="only these zoos (default: all)")
    ap.add_argument("--route", action="append", choices=sorted(ROUTES),
                    help="only these routes (default: each zoo's, without its extra routes such as tflite-litert-torch, "
                         "which run only when named)")
    ap.add_argument("--model", action="append", help="only these models (names as the zoo spells them)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many models per zoo (in name order)")
    ap.add_argument("--every", type=int, default=1, metavar="K",
                    help="every K-th model of each zoo in name order: a sample spread over the zoo (default: all)")
    ap.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help=f"the JSON-lines cache (default {DEFAULT_RESULTS})")
    ap.add_argument("--predict", default="host-tflite-cpu-1large-fp32", metavar="SCENARIO",
                    help="predict every imported model in this shelf scenario, as `latbench predict` does "
                         "(default %(default)s; 'none' to skip)")
    ap.add_argument("--report", action="store_true", help="print the table of what the results file holds, run nothing")
    ap.add_argument("--retry", action="store_true",
                    help="run again the cases the results file holds as not imported, not conforming or with outputs "
                         "not compared (after an importer change)")
    args = ap.parse_args(argv)

    done = load(args.results)

    def selected(r: dict) -> bool:
        return (not args.zoo or r["zoo"] in args.zoo) and (not args.route or r["route"] in args.route) \
            and (not args.model or r["model"] in args.model)

    if args.retry and not args.report:
        # only the selection's cases run again: the file's other rows stay as they are
        done = [r for r in done if not selected(r) or (r["conforms"] and r.get("same_outputs") is not None)]
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text("".join(json.dumps(r) + "\n" for r in done))
    if not args.report:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        seen = {(r["zoo"], r["model"], r["route"]) for r in done}
        version = code_version()
        for zoo in args.zoo or sorted(ZOOS):
            z = ZOOS.get(zoo)
            # a zoo's extra routes (a converter in its own environment) run only when named
            routes = tuple(r for r in z.routes + z.extra_routes if r in args.route) if args.route else z.routes
            if not routes:
                continue
            names = [n for n in z.names() if not args.model or n in args.model][:: args.every][: args.limit]
            todo = [n for n in names if any((zoo, n, r) not in seen for r in routes)]
            print(f"{zoo}: {len(names)} models, {len(todo)} to run through {', '.join(routes)}", flush=True)
            t0 = time.perf_counter()
            for k, name in enumerate(todo):
                want = tuple(r for r in routes if (zoo, name, r) not in seen)
                cases = _in_child(zoo, name, want, None if args.predict == "none" else args.predict)
                rows = [{**c.row(), "commit": version} for c in cases]
                with args.results.open("a") as fh:
                    for r in rows:
                        fh.write(json.dumps(r) + "\n")
                done += rows
                left = (time.perf_counter() - t0) / (k + 1) * (len(todo) - k - 1)
                states = ", ".join(f"{c.route} {c.status}" + (f" ({c.error[:90]})" if c.status != "imported" else
                                   f" MACs {100 * (c.macs_error or 0):+.2f}%") for c in cases)
                print(f"[{k + 1}/{len(todo)}, ~{left / 60:.0f} min left] {name}: {states}", flush=True)
    report([r for r in done if selected(r)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
