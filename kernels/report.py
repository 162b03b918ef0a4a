"""Kernel-deduction reports: ``python -m kernels.report <what>``.

- ``gpu``: the USC rules (Algorithms B.1-B.3) against the kernel names executed on the USC
  phones' GPUs (``--dataset`` the imported public tables; without it the USC CSVs under
  ``--shared``/external are imported into ``--workdir``);
- ``xnnpack``: the XNNPACK operators predicted from the IR against those LiteRT ran on this
  host (kernel mode of the instrumented runtime), per network family;
- ``detect``: nn-Meter's fusion-rule detection on this host, written as JSON (``--out``);
- ``nnmeter``: nn-Meter's kernels (from the rules) against the executed XNNPACK operators;
- ``gpu-host``: the USC GPU rules (B.2, B.3) against the kernels LiteRT's GPU accelerator
  generated on this host (software Vulkan), probe networks and real ones (``gpu_truth.py``);
- ``executorch``: the XNNPACK operators predicted for ExecuTorch's delegate against the kernel
  records of a measured ExecuTorch scenario, per generator source, and the export facts (delegate
  calls, delegated and portable operators) of every ExecuTorch program in the data folder; it
  only reads records and IR.

Each prints a table; the numbers are computed here, nothing is stored in the code.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SHARED = Path(os.environ.get("LATBENCH_SHARED", ROOT.parent / "shared"))
DEFAULT_WORK = Path(os.environ.get("LATBENCH_SCRATCH", "/tmp/latbench-kernels"))


def _cmd_detect(args: argparse.Namespace) -> int:
    from pipelines.devices import make_device
    from pipelines.runners.litert import litert_version

    from .nnmeter_rules import detect_rules, host_measure

    measure = host_measure(Path(args.workdir) / "detect", runs=args.runs, repeats=args.repeats)
    rules = detect_rules(measure, types=args.types or None, subtract_overhead=not args.raw, backend="host-tflite-cpu-xnnpack",
                         progress=(print if args.verbose else None))
    rules.provenance.update({
        "produced_by": "python -m kernels.report detect",
        "argv": sys.argv[1:], "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": make_device({"kind": "host", "name": "host"}).describe(),
        "runtime": "latbench-run (LiteRT C API, XNNPACK, 1 thread, CPU 0)", "litert": litert_version(),
        "python": platform.python_version(), "runs": args.runs, "repeats": args.repeats,
    })
    fused = sorted(k for k, v in rules.pairs.items() if v)
    print(f"overhead (trivial network): {rules.evidence['overhead_ms'] * 1000:.2f} us; "
          f"{len(rules.pairs)} pairs tested, {len(fused)} fused; multi-inbound {rules.multi_inbound}, "
          f"multi-outbound {rules.multi_outbound}")
    print("fused pairs:", ", ".join(fused))
    raw = sorted(k for k, e in rules.evidence.items() if isinstance(e, dict) and e.get("fused_without_overhead_correction"))
    print(f"fused by the raw inequality (no overhead correction): {len(raw)}")
    if args.out:
        print("written:", rules.save(args.out))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels.report", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("detect", help="nn-Meter's fusion-rule detection on this host")
    d.add_argument("--workdir", default=str(DEFAULT_WORK), help="scratch folder for test models and records")
    d.add_argument("--out", help="write the rules JSON here (e.g. kernels/rules/host.json)")
    d.add_argument("--types", nargs="*", help="operator types to test (default: all test types)")
    d.add_argument("--runs", type=int, default=50)
    d.add_argument("--repeats", type=int, default=3, help="fresh processes per test case")
    d.add_argument("--raw", action="store_true", help="nn-Meter's raw inequality, without subtracting the fixed overhead")
    d.add_argument("--verbose", action="store_true")
    d.set_defaults(func=_cmd_detect)
    for name, fn in _EXTRA.items():
        fn(sub)
    args = ap.parse_args(argv)
    return args.func(args)


# ---------------------------------------------------------------- gpu
def _cmd_gpu(args: argparse.Namespace) -> int:
    from . import usc_check

    ds = _usc_dataset(args)
    print("TFLite GPU delegate: Algorithm B.2 (fusion) + B.3 (grouped / Winograd) against executed kernel names")
    print("share of aligned op rows whose deduced kernel matches the executed one")
    for order in args.orders:
        res = usc_check.check_tflite(ds, order=order)
        print(f"\norder = {order}")
        print(f"{'scenario':32s} {'rows':>5s} {'aligned':>7s} {'fused':>6s} {'winogr':>6s} {'grouped':>7s} {'all 3':>6s} {'exact':>6s}")
        for sid, c in res.items():
            print(f"{sid:32s} {c.rows:5d} {c.aligned:7d} {c.share('fused'):6.3f} {c.share('winograd'):6.3f} "
                  f"{c.share('grouped'):7.3f} {c.share('all3'):6.3f} {c.share('exact'):6.3f}")
    print("\nPyTorch Vulkan: Algorithm B.1 on convolution rows (executed kernel = deduced kernel)")
    for sid, c in usc_check.check_vulkan(ds).items():
        print(f"{sid:32s} {c.rows:5d} convolutions, match {c.share('exact'):.3f}" if c.rows else f"{sid:32s} no Vulkan kernel names (Metal)")
    return 0


def _usc_dataset(args: argparse.Namespace):
    from pipelines.dataset.load import load_dataset

    if args.dataset:
        return load_dataset(args.dataset)
    from pipelines.dataset.import_public import run_import
    from pipelines.dataset.usc import UscConfig

    out = Path(args.workdir) / "usc-gpu"
    run_import(UscConfig(path=str(Path(args.shared) / "external" / "usc-mobile-ml-benchmark")), out_dir=out)
    return load_dataset(out)


# ---------------------------------------------------------------- xnnpack
def report_networks(small: int = 64, nb201: tuple[int, ...] = (7, 777, 3000, 9999, 15624),
                    synthetic_n: int = 8, synthetic_seed: int = 1) -> list[tuple[str, object]]:
    """The (family, graph) set of the CPU reports: every zoo family's reference at a small input,
    NAS-Bench-201 cells, synthetic networks at a small input."""
    from generators import nasbench201, synthetic
    from generators.ir import Graph
    from generators.zoo.registry import FAMILIES
    from generators.zoo.sampler import ReferenceSampler

    nets = []
    for fam in FAMILIES.names():
        g = Graph(f"zoo-{fam}-ref@{small}", source="zoo")
        x = g.input([1, 3, small, small])
        g.set_outputs(FAMILIES.get(fam).build(g, x, ReferenceSampler()))
        nets.append((f"zoo/{fam}", g))
    nets += [("nasbench201", nasbench201.build(i)) for i in nb201]
    cfg = synthetic.SyntheticConfig(input_size=small)
    nets += [("synthetic", synthetic.build_network(cfg, synthetic_seed, i)) for i in range(synthetic_n)]
    return nets


#: A small corner of the transformer space (32x32 inputs, 8- and 16-channel heads, shallow stages)
#: with every structural choice of the full one: both fronts, 1 to 3 stages, 1 to 6 heads (one head
#: included). Its networks convert and run in a fraction of a second each.
SMALL_TRANSFORMER_SPACE = {
    "input_size": 32, "patch_sizes": [4, 8], "head_dims": [8, 16], "single_stage_depth": [1, 3], "stage_depth": [1, 2],
    "stem_channels": [8, 16], "conv_channels": [[8, 16], [16, 24], [24, 32]], "num_classes": 10, "min_grid": 2,
}


def transformer_networks(n: int = 30, seed: int = 0) -> list[tuple[str, object]]:
    """Networks 0..n-1 of :data:`SMALL_TRANSFORMER_SPACE` (the transformer rows of the CPU reports)."""
    from generators import transformer

    cfg = transformer.validate_config(dict(SMALL_TRANSFORMER_SPACE, n=n))
    return [("transformer", transformer.build_network(cfg, seed, i)) for i in range(n)]


def _executed(graph, workdir: Path, runs: int = 3) -> list[str]:
    from generators.export.tflite import export_tflite
    from pipelines.runners.litert import run_native

    from .xnnpack import executed_kernels

    model = workdir / f"{graph.model_id}.tflite"
    # reuse a test case exported by ``detect`` into the same scratch folder (named <case>-<id>)
    found = sorted((workdir.parent / "detect").glob(f"*-{graph.model_id}.tflite"))
    if found:
        model = found[0]
    elif not model.is_file():
        export_tflite(graph, model)
    return executed_kernels(run_native(model, cpus=[0], threads=1, mode="kernel", runs=runs, warmup=1))


def _cmd_xnnpack(args: argparse.Namespace) -> int:
    from collections import defaultdict

    from . import xnnpack

    work = Path(args.workdir) / "xnnpack"
    work.mkdir(parents=True, exist_ok=True)
    per: dict[str, list] = defaultdict(list)
    for fam, g in report_networks() + transformer_networks():
        m = xnnpack.compare(xnnpack.deduce_kernels(g), _executed(g, work))
        zoo_transformer = fam in ("zoo/vit", "zoo/mobilevit", "zoo/efficientformer")
        per["zoo (transformers)" if zoo_transformer else fam.split("/")[0]].append(m)
        if args.verbose:
            print(f"{g.name:32s} predicted {m.predicted:4d} executed {m.executed:4d} share {m.share:.3f} same order {m.exact}")
    print("XNNPACK operators predicted from the IR vs executed (kernel mode, 1 thread)")
    print(f"{'family':18s} {'nets':>4s} {'operators':>9s} {'match share':>11s} {'same multiset':>13s} {'same order':>10s}")
    for fam, ms in sorted(per.items()):
        ops = sum(m.executed for m in ms)
        share = sum(m.matched for m in ms) / max(1, sum(max(m.predicted, m.executed) for m in ms))
        print(f"{fam:18s} {len(ms):4d} {ops:9d} {share:11.3f} {sum(m.share == 1 for m in ms):13d} {sum(m.exact for m in ms):10d}")
    return 0


# ---------------------------------------------------------------- nn-Meter vs XNNPACK
def _cmd_nnmeter(args: argparse.Namespace) -> int:
    from collections import defaultdict

    from .nnmeter_rules import find_kernels, load_rules, make_test_cases, singles_for

    rules = load_rules(args.rules)
    work = Path(args.workdir) / "xnnpack"
    work.mkdir(parents=True, exist_ok=True)
    # rule level: a pair truly fuses on XNNPACK when it runs fewer operators than its two singles
    agree = total = 0
    disagree = []
    types = sorted({t for key in rules.pairs for t in key.split("_")})
    for c in make_test_cases(types):
        if c.kind != "pair" or c.key not in rules.pairs:
            continue
        n_pair = len(_executed(c.graph, work, runs=1))
        n_single = sum(len(_executed(s.graph, work, runs=1)) for s in singles_for(c))
        truth = n_pair < n_single
        total += 1
        agree += int(truth == rules.pairs[c.key])
        if truth != rules.pairs[c.key]:
            disagree.append(f"{c.key} (detected {'fused' if rules.pairs[c.key] else 'not fused'}, "
                            f"XNNPACK {n_pair} vs {n_single} operators)")
    print(f"rules {args.rules}: {total} pairs; detected fusion agrees with the XNNPACK operator count for "
          f"{agree} ({agree / max(total, 1):.3f})")
    if args.verbose:
        for d in disagree:
            print("  ", d)
    # network level: kernels found by Algorithm 1 vs XNNPACK operators executed
    per: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for fam, g in report_networks():
        per[fam.split("/")[0]].append((len(find_kernels(g, rules)), len(_executed(g, work))))
    print(f"{'family':12s} {'nets':>4s} {'nn-Meter kernels':>16s} {'XNNPACK operators':>17s} {'ratio':>6s} {'same count':>10s}")
    for fam, xs in sorted(per.items()):
        k, e = sum(a for a, _ in xs), sum(b for _, b in xs)
        print(f"{fam:12s} {len(xs):4d} {k:16d} {e:17d} {k / max(e, 1):6.3f} {sum(a == b for a, b in xs):10d}")
    return 0


def _gpu_parser(sub) -> None:
    p = sub.add_parser("gpu", help="USC GPU rules against the USC phones' executed kernel names")
    p.add_argument("--dataset", help="imported public dataset folder (default: import the USC CSVs into --workdir)")
    p.add_argument("--shared", default=str(DEFAULT_SHARED), help="the shared folder with external/usc-mobile-ml-benchmark")
    p.add_argument("--workdir", default=str(DEFAULT_WORK))
    p.add_argument("--orders", nargs="*", default=["dfs", "ir", "rows"], help="node orders to report (dfs, ir, rows)")
    p.set_defaults(func=_cmd_gpu)


def _xnnpack_parser(sub) -> None:
    p = sub.add_parser("xnnpack", help="predicted vs executed XNNPACK operators on this host")
    p.add_argument("--workdir", default=str(DEFAULT_WORK))
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(func=_cmd_xnnpack)


def _nnmeter_parser(sub) -> None:
    p = sub.add_parser("nnmeter", help="nn-Meter's detected rules and kernels vs executed XNNPACK operators")
    p.add_argument("--rules", default="host", help="rules name or JSON path (default: rules/host.json)")
    p.add_argument("--workdir", default=str(DEFAULT_WORK))
    p.add_argument("--verbose", action="store_true")
    p.set_defaults(func=_cmd_nnmeter)


# ---------------------------------------------------------------- USC GPU rules vs this host's GPU
def gpu_host_networks(size: int = 224) -> list[tuple[str, object]]:
    """(family, graph) of the GPU ground truth: the B.3 probes, every zoo family's reference at
    ``size`` (Winograd needs large feature maps), NAS-Bench-201 cells."""
    from generators import nasbench201
    from generators.ir import Graph
    from generators.zoo.registry import FAMILIES
    from generators.zoo.sampler import ReferenceSampler

    from .gpu_truth import probe_networks

    nets: list[tuple[str, object]] = [("probe", g) for _, g in probe_networks()]
    for fam in FAMILIES.names():
        g = Graph(f"zoo-{fam}-ref@{size}", source="zoo")
        x = g.input([1, 3, size, size])
        g.set_outputs(FAMILIES.get(fam).build(g, x, ReferenceSampler()))
        nets.append((f"zoo/{fam}", g))
    nets += [("nasbench201", nasbench201.build(i)) for i in (7, 777, 3000)]
    return nets


def gpu_host_truth(graph, workdir: Path, precision: str = "fp32"):
    """Exports ``graph``, runs it once on the GPU in kernel mode, compares with the rules."""
    from generators.export.tflite import export_tflite
    from pipelines import gpu
    from pipelines.runners.litert import run_native

    from .gpu_truth import compare

    model = Path(workdir) / f"{graph.name}-{graph.model_id}.tflite"
    if not model.is_file():
        export_tflite(graph, model)
    run = run_native(model, accelerator="gpu", precision=precision, mode="kernel", warmup=1, runs=1)
    by_run = gpu.kernels_by_run(run)
    return compare(graph.name, graph, by_run[max(by_run)])


def _cmd_gpu_host(args: argparse.Namespace) -> int:
    import json

    from pipelines import gpu
    from pipelines.runners.records import NativeRunError

    reason = gpu.unavailable_reason()
    if reason:
        print(f"gpu-host: no GPU path on this machine: {reason}", file=sys.stderr)
        return 2
    work = Path(args.workdir) / "gpu-host"
    work.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    print("USC TFLite-GPU rules (B.2 fusion, B.3 Winograd/grouped, default vendor thresholds) vs the kernels "
          "LiteRT's GPU accelerator generated on this host")
    print(f"{'network':34s} {'deduced':>7s} {'ran':>5s} {'multiset':>8s} {'order':>5s} {'Winograd d/r':>12s} {'fusion':>9s}")
    for fam, g in gpu_host_networks(args.size):
        try:
            r = gpu_host_truth(g, work, args.precision)
        except NativeRunError as e:  # recorded, the rest goes on
            failed.append({"network": g.name, "family": fam, "error": str(e)})
            print(f"{g.name:34s} failed: {str(e)[-120:]}")
            continue
        row = {"family": fam, **r.row()}
        rows.append(row)
        wd, we = r.winograd
        print(f"{g.name:34s} {row['deduced']:7d} {row['executed']:5d} {row['multiset_share']:8.3f} "
              f"{'same' if row['same_order'] else 'diff':>5s} {wd:>6d}/{we:<5d} {r.fusion_agree:4d}/{r.fusion_checked:<4d}")
        if args.verbose:
            for d in r.differences:
                print("    " + d)
    d = sum(r["deduced"] for r in rows)
    e = sum(r["executed"] for r in rows)
    share = sum(r["multiset_share"] * max(r["deduced"], r["executed"]) for r in rows) / max(1, sum(
        max(r["deduced"], r["executed"]) for r in rows))
    fa, fc = sum(r["fusion_agree"] for r in rows), sum(r["fusion_checked"] for r in rows)
    wd, we = sum(r["winograd_deduced"] for r in rows), sum(r["winograd_executed"] for r in rows)
    print(f"\n{len(rows)} networks ({len(failed)} failed to compile on the GPU): {d} deduced / {e} executed dispatches, "
          f"multiset share {share:.3f}, Winograd deduced {wd} / ran {we}, fused parts agree {fa}/{fc} "
          f"({fa / max(fc, 1):.3f}), same order {sum(r['same_order'] for r in rows)}/{len(rows)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"precision": args.precision, "size": args.size, "networks": rows,
                                              "failed": failed}, indent=1) + "\n")
    return 0


def _gpu_host_parser(sub) -> None:
    p = sub.add_parser("gpu-host", help="USC GPU rules vs the kernels LiteRT's GPU accelerator ran on this host")
    p.add_argument("--workdir", default=str(DEFAULT_WORK))
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    p.add_argument("--size", type=int, default=224, help="input size of the zoo references (default: %(default)s)")
    p.add_argument("--out", help="write every network's comparison as JSON")
    p.add_argument("--verbose", action="store_true", help="list every difference")
    p.set_defaults(func=_cmd_gpu_host)


# ---------------------------------------------------------------- ExecuTorch's XNNPACK delegate
DEFAULT_DATA = Path(__file__).resolve().parents[1] / "data"
DEFAULT_EXECUTORCH_SCENARIO = "host-executorch-cpu-1large-fp32"


def ir_path(data: Path, model_id: str, source: str | None = None) -> Path | None:
    """The IR of a network in the data folder: ``models/<source>/<id>.json``, else the release's."""
    for base in (Path(data) / "models", Path(data) / "release" / "models"):
        found = ([base / source / f"{model_id}.json"] if source else []) + sorted(base.glob(f"*/{model_id}.json"))
        for path in found:
            if path.is_file():
                return path
    return None


def scenario_folder(data: Path, scenario: str | Path) -> Path:
    """A scenario's measurement folder: ``scenario`` itself when it is one, else
    ``<data>/measurements/<device>/<scenario>``."""
    if Path(scenario).is_dir():
        return Path(scenario)
    found = sorted((Path(data) / "measurements").glob(f"*/{scenario}"))
    if not found:
        raise FileNotFoundError(f"no measurement folder for scenario {scenario!r} under {Path(data) / 'measurements'}")
    return found[0]


def measure_records(folder: Path):
    """The measure records of a scenario folder (not SCENARIO.json, traces or error records)."""
    import json

    for path in sorted(Path(folder).glob("*.json")):
        if path.name == "SCENARIO.json" or path.name.endswith((".trace.json", ".error.json")):
            continue
        yield json.loads(path.read_text())


def executorch_rows(data: Path = DEFAULT_DATA, scenario: str | Path = DEFAULT_EXECUTORCH_SCENARIO) -> list[dict]:
    """One row per network of the scenario with XNNPACK kernel records: the deduction
    (``kernels/executorch.py``) against the executed operator names (``missing_ir``: no IR found)."""
    from generators.ir import Graph

    from . import executorch as et

    rows = []
    for rec in measure_records(scenario_folder(data, scenario)):
        executed = et.recorded_kernels(rec)
        if not executed:
            continue
        path = ir_path(data, rec["model_id"], rec.get("source"))
        row = {"model_id": rec["model_id"], "source": rec.get("source") or (path.parent.name if path else "?")}
        if path is None:
            rows.append({**row, "missing_ir": True, "executed": len(executed)})
            continue
        m = et.compare(et.deduce_kernels(Graph.load(path)), executed)
        rows.append({**row, "predicted": m.predicted, "executed": m.executed, "matched": m.matched, "share": m.share,
                     "same_multiset": m.share == 1.0, "same_order": m.exact})
    return rows


def executorch_facts_rows(data: Path = DEFAULT_DATA) -> list[dict]:
    """One row per ExecuTorch fp32 program of the data folder (its artifacts, then the release's):
    the deduction against the export's facts (:func:`kernels.executorch.facts_agreement`)."""
    import json

    from generators.ir import Graph

    from . import executorch as et

    rows, seen = [], set()
    data = Path(data)
    for facts_path in [*sorted(data.glob("artifacts/*/executorch_fp32.facts.json")),
                       *sorted(data.glob("release/artifacts/*/executorch_fp32.facts.json"))]:
        model_id = facts_path.parent.name
        path = ir_path(data, model_id)
        if model_id in seen or path is None:
            continue
        seen.add(model_id)
        agree = et.facts_agreement(Graph.load(path), json.loads(facts_path.read_text()))
        rows.append({"model_id": model_id, "source": path.parent.name, **agree})
    return rows


def _cmd_executorch(args: argparse.Namespace) -> int:
    from collections import defaultdict

    try:
        rows = executorch_rows(Path(args.data), args.scenario)
    except FileNotFoundError as e:
        print(f"executorch: {e}", file=sys.stderr)
        return 2
    missing = [r for r in rows if r.get("missing_ir")]
    rows = [r for r in rows if not r.get("missing_ir")]
    if args.verbose:
        for r in rows:
            print(f"{r['model_id']:18s} {r['source']:12s} predicted {r['predicted']:4d} executed {r['executed']:4d} "
                  f"share {r['share']:.3f} same order {r['same_order']}")
    print(f"XNNPACK operators predicted from the IR vs executed by ExecuTorch's delegate ({args.scenario}, kernel records)")
    print(f"{'source':12s} {'nets':>4s} {'operators':>9s} {'match share':>11s} {'same multiset':>13s} {'same order':>10s}")
    per: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        per[r["source"]].append(r)
    for source, rs in sorted(per.items()):
        share = sum(r["matched"] for r in rs) / max(1, sum(max(r["predicted"], r["executed"]) for r in rs))
        print(f"{source:12s} {len(rs):4d} {sum(r['executed'] for r in rs):9d} {share:11.3f} "
              f"{sum(r['same_multiset'] for r in rs):13d} {sum(r['same_order'] for r in rs):10d}")
    if missing:
        print(f"{len(missing)} networks without an IR in {args.data}: {', '.join(r['model_id'] for r in missing)}")
    if not rows:
        print("no ExecuTorch kernel records found", file=sys.stderr)
        return 1
    if args.facts:
        facts = executorch_facts_rows(Path(args.data))
        print("\nExecuTorch export facts vs the deduction (programs agreeing on each count)")
        print(f"{'source':12s} {'programs':>8s} {'delegate calls':>14s} {'delegated ops':>13s} {'portable ops':>12s}")
        by: dict[str, list[dict]] = defaultdict(list)
        for r in facts:
            by[r["source"]].append(r)
        for source, rs in sorted(by.items()):
            print(f"{source:12s} {len(rs):8d} {sum(r['delegate_calls'] for r in rs):14d} "
                  f"{sum(r['delegated_ops'] for r in rs):13d} {sum(r['portable_ops'] for r in rs):12d}")
        if args.verbose:
            for r in facts:
                if not (r["delegate_calls"] and r["delegated_ops"] and r["portable_ops"]):
                    print(f"  differs: {r['model_id']} ({r['source']})")
    return 0


def _executorch_parser(sub) -> None:
    p = sub.add_parser("executorch", help="predicted vs executed XNNPACK operators of ExecuTorch's delegate (records)")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="data folder (default: %(default)s)")
    p.add_argument("--scenario", default=DEFAULT_EXECUTORCH_SCENARIO,
                   help="scenario id under <data>/measurements/<device>/, or its folder (default: %(default)s)")
    p.add_argument("--no-facts", dest="facts", action="store_false", help="skip the check against the export facts")
    p.add_argument("--verbose", action="store_true", help="one line per network, and the programs whose facts differ")
    p.set_defaults(func=_cmd_executorch)


_EXTRA: dict = {"gpu": _gpu_parser, "xnnpack": _xnnpack_parser, "nnmeter": _nnmeter_parser,
                "gpu-host": _gpu_host_parser, "executorch": _executorch_parser}

if __name__ == "__main__":
    sys.exit(main())
