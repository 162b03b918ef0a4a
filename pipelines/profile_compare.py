"""``latbench profile MODEL --framework all``: one model on every runtime of the suite, side by side.

The USC study's question (how much does the framework matter?) asked of a user's own model: the
file goes through its importer into the IR (:func:`pipelines.predict.load_model`: ONNX, TFLite or
an IR file), the export stage writes it in the format each registered runtime runs at the asked
precision (:data:`pipelines.runners.RUNNERS`), and :func:`pipelines.profile.run_profile` measures
each of those files exactly as ``latbench profile`` measures one (fresh pinned processes, the
stopping rule, the op and kernel processes). One table shows each runtime's e2e median with its
interval, its ratio to the fastest, and the op and kernel types that take most of its time; a
runtime that cannot take the model (its exporter fails, or it does not run that precision here)
has a row saying why. ``comparison.csv`` in the output folder holds the table.

Every runtime sees the same network: the IR is exported once per format from one graph, and each
exporter checks its file against the IR (``checks`` in the export facts).
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .profile import Profile, ProfileError, ProfileRequest, device_config, run_profile

_NUMBERED = re.compile(r" #\d+$")


@dataclass
class RuntimeRow:
    """One runtime's outcome: its profile, or why it has none."""

    framework: str
    title: str
    fmt: str | None
    profile: Profile | None = None
    why_not: str | None = None
    export_s: float | None = None

    @property
    def e2e_ms(self) -> float | None:
        return float(self.profile.record["e2e"]["latency_ms"]) if self.profile else None


@dataclass
class Comparison:
    model: Path
    model_id: str
    precision: str
    out: Path
    rows: list[RuntimeRow] = field(default_factory=list)


def parse_frameworks(spec: str) -> list[str]:
    """``all`` (every registered framework) or a comma-separated list of registered ones."""
    from .runners import frameworks

    known = list(frameworks())
    if spec == "all":
        return known
    names = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ProfileError(f"--framework: unknown framework {', '.join(bad) or repr(spec)} "
                           f"(known: all, {', '.join(known)})")
    return names


def compare_runtimes(cfg: Any, req: ProfileRequest, framework_names: list[str], *, device: Any = None,
                     progress: bool = True, say: Callable[[str], None] = print) -> Comparison:
    """Import ``req.model`` into the IR, export it for every framework in ``framework_names`` and
    profile each file on ``req.device`` (see the module docstring)."""
    from generators.export.formats import exporter_version

    from .devices import make_device
    from .export import export_model
    from .predict import load_model
    from .runners import runner_for

    path = Path(req.model)
    dev_cfg, accelerator = device_config(req.device, req.adb_server)
    if accelerator != "cpu":
        raise ProfileError("--framework: the comparison runs on CPUs (--device host or an adb serial); the suite's "
                           "GPU runner is LiteRT's alone")
    try:
        graph = load_model(path, req.shape)
    except ValueError as e:
        raise ProfileError(str(e).splitlines()[0]) from None
    precision = "fp32" if req.precision == "auto" else req.precision  # the IR is a float network
    out = Path(req.out or Path("profiles") / f"{path.stem}-runtimes")
    ir_path = graph.save(out / "ir" / f"{graph.model_id}.json")
    device = device or make_device(dev_cfg)
    options = {"int8_engine": cfg.export.int8_engine, "calibration_samples": cfg.export.calibration_samples}
    version = exporter_version()
    cmp = Comparison(path, graph.model_id, precision, out)
    for fw in framework_names:
        runner = runner_for(fw, accelerator)
        title = runner.title if runner else fw
        if runner is None:
            cmp.rows.append(RuntimeRow(fw, title, None, why_not=f"the suite has no {fw} runner on the {accelerator}"))
            continue
        fmt = runner.formats.get(precision)
        if fmt is None:
            why = runner.missing_precisions.get(precision, "not exported at this precision")
            cmp.rows.append(RuntimeRow(fw, title, None, why_not=f"{precision}: {why}"))
            continue
        if fw not in device.frameworks:
            cmp.rows.append(RuntimeRow(fw, title, fmt, why_not=f"device {device.name} does not run {fw}"))
            continue
        say(f"{title}: exporting {fmt}")
        result = export_model(str(ir_path), [fmt], str(out / "exported"), options, version)[0]
        folder = out / "exported" / graph.model_id
        if result["status"] != "ok":
            cmp.rows.append(RuntimeRow(fw, title, fmt, why_not=f"export failed: {result['error']}"))
            continue
        from generators.export.formats import FORMATS

        facts = json.loads((folder / f"{fmt}.facts.json").read_text())
        art = folder / FORMATS.get(fmt).filename
        # the input shape the file was exported for (TorchScript files do not carry it)
        shape = None if fw == "tflite" else (facts.get("inputs") or [{}])[0].get("shape")
        sub = ProfileRequest(art, device=req.device, cores=req.cores, precision=precision, threads=req.threads,
                             shape=shape, out=out, processes=req.processes, adb_server=req.adb_server)
        say(f"{title}: measuring")
        try:
            prof = run_profile(cfg, sub, device=device, progress=progress)
        except ProfileError as e:
            cmp.rows.append(RuntimeRow(fw, title, fmt, why_not=str(e), export_s=facts.get("seconds")))
            continue
        cmp.rows.append(RuntimeRow(fw, title, fmt, profile=prof, export_s=facts.get("seconds")))
    write_csv(cmp)
    return cmp


def _top(record: dict, mode: str, entries: str, n: int) -> list[tuple[str, float]]:
    """The ``n`` op (or kernel) types of a record with the largest share of their sum."""
    m = record.get(mode) or {}
    by: dict[str, float] = {}
    for e in m.get(entries) or []:
        label = str(e.get("kernel_kind") or e.get("name"))
        label = _NUMBERED.sub("", label)  # XNNPACK's per-call numbering ("... IGEMM #2") is not a type
        by[label] = by.get(label, 0.0) + float(e.get("median_ms") or 0.0)
    total = sum(by.values())
    return [(k, v / total) for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:n]] if total else []


def _ci(record: dict) -> str:
    """The e2e median's 95% interval, however few processes ran (the record's own across process
    medians, else :func:`pipelines.stats.median_interval`'s t-interval or single-process
    bootstrap, marked ``t`` or ``b``)."""
    from .stats import median_interval

    e = record["e2e"]
    lo, hi = e.get("medians_ci_low_ms"), e.get("medians_ci_high_ms")
    if lo is not None and hi is not None and lo == lo and hi == hi:
        return f"{lo:.3f}-{hi:.3f}"
    iv = median_interval(e["samples_ns"], 0.95)
    return f"{iv['low_ms']:.3f}-{iv['high_ms']:.3f} ({iv['kind'][0]})"


def table_rows(cmp: Comparison, top: int = 3) -> list[dict[str, Any]]:
    """The comparison as rows (what ``comparison.csv`` holds)."""
    fastest = min((r.e2e_ms for r in cmp.rows if r.e2e_ms), default=None)
    out = []
    for r in cmp.rows:
        row: dict[str, Any] = {"framework": r.framework, "runtime": r.title, "format": r.fmt or "",
                               "scenario_id": r.profile.scenario_id if r.profile else "",
                               "e2e_ms": r.e2e_ms, "ci_ms": _ci(r.profile.record) if r.profile else "",
                               "vs_fastest": r.e2e_ms / fastest if r.e2e_ms and fastest else None,
                               "top_ops": "", "top_kernels": "", "export_s": r.export_s, "why_not": r.why_not or ""}
        if r.profile:
            for mode, entries, key in (("op", "ops", "top_ops"), ("kernel", "kernels", "top_kernels")):
                row[key] = ", ".join(f"{k} {100 * s:.0f}%" for k, s in _top(r.profile.record, mode, entries, top))
        out.append(row)
    return out


def write_csv(cmp: Comparison) -> Path:
    rows = table_rows(cmp)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["framework"])
    w.writeheader()
    w.writerows(rows)
    path = cmp.out / "comparison.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue())
    return path


def comparison_lines(cmp: Comparison, top: int = 3) -> list[str]:
    """The side-by-side report ``latbench profile --framework`` prints."""
    rows = table_rows(cmp, top)
    lines = [f"{cmp.model} ({cmp.model_id}) at {cmp.precision} on every runtime:",
             f"  {'runtime':<42} {'e2e median':>11} {'95% CI':>15} {'vs fastest':>10}"]
    for r in rows:
        if r["e2e_ms"] is None:
            lines.append(f"  {r['runtime'][:42]:<42} {'-':>11} {'':>15} {'':>10}  {r['why_not']}")
            continue
        lines.append(f"  {r['runtime'][:42]:<42} {r['e2e_ms']:>8.3f} ms {r['ci_ms']:>15} {r['vs_fastest']:>9.2f}x")
    for r in rows:
        if r["e2e_ms"] is None:
            continue
        parts = [f"ops: {r['top_ops']}" if r["top_ops"] else "", f"kernels: {r['top_kernels']}" if r["top_kernels"] else ""]
        what = "; ".join(p for p in parts if p) or "e2e only"
        lines.append(f"  {r['framework']:<12} {what}")
    if any(str(r.get("ci_ms", "")).endswith(("(t)", "(b)")) for r in rows):
        lines.append("  95% CI (t): a t-interval over the few process medians; (b): a bootstrap over one process's runs, "
                     "within-process noise only (--processes 6 gives the distribution-free interval)")
    lines.append(f"records and traces: {cmp.out}/<scenario id>/; table: {cmp.out / 'comparison.csv'}")
    return lines


__all__ = ["Comparison", "RuntimeRow", "compare_runtimes", "comparison_lines", "parse_frameworks", "table_rows",
           "write_csv"]
