"""The board: ``leaderboard/README.md`` (Markdown tables) and ``leaderboard/site/index.html``
(a single self-contained page: tables sortable by any metric, and per track a predicted-vs-
measured scatter and an error CDF per entry, drawn as SVG by a few lines of inline script; no
network access, it opens from the file system). The page is ``site_template/page.html`` with
the style sheet (``board.css``), the data and the script (``board.js``) filled in.

Input: the result files ``<results>/<track>/<entry>.json`` written by
:func:`leaderboard.run.evaluate_entry`, ``<results>/status.json`` (every track, with the
reason a track without data is skipped) and ``<results>/noise_floor.json``. Beside each track's
entries the board shows reference rows (the noise floor, the perfect predictor where the source
says how its figures were formed, published results marked as published
with their source and protocol difference) and the per-scenario views of
:mod:`leaderboard.views` (HELP's per-device Table 3 layout; the USC phones' matrix of phone x
core set x precision and its aggregates). On tracks of repeated draws a figure is the mean over
the seeds, ± their standard deviation. Submissions are marked as such.

Everything shown may come from a submitter (names, descriptions, rejection messages quoting
their files): every text goes through :func:`foundation.printable.printable` (control, terminal
escape and bidi characters shown as ``\\x1b``, ``\\u202e``: nothing reorders a tooltip or a cell);
the page embeds its data as JSON with ``<``, ``>`` and ``&`` escaped (``\u003c``), so no text can
end the script element, and its script puts text in with ``textContent`` and DOM properties, never
as markup; the README escapes Markdown and HTML in such text.
"""
from __future__ import annotations

import html
import json
import math
import os
import re
import string
import sys
from pathlib import Path
from typing import Any

from foundation.printable import printable

from .metrics import METRICS
from .views import entry_kind

HERE = Path(__file__).resolve().parent


def _result_ok(doc: Any) -> bool:
    return (isinstance(doc, dict) and isinstance(doc.get("track"), str) and isinstance(doc.get("entry"), str)
            and isinstance(doc.get("meta"), dict) and isinstance(doc.get("result"), dict)
            and isinstance(doc["result"].get("aggregate"), dict) and isinstance(doc.get("plot"), dict))


def _problem_text(problems: Any) -> str:
    """The first of an entry's rejection records (results/rejected.json: ``{"track", "problem"}``)
    as one line; anything else in that file is shown as it is, never trusted to be well formed."""
    from .submission import problem_line

    first = problems[0] if isinstance(problems, list) and problems else problems
    if isinstance(first, dict):
        return problem_line(first.get("track") or None, str(first.get("problem", "")))
    return str(first)


def load_results(results_dir: str | Path) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    from foundation.safeload import LoadError, load_json

    root = Path(results_dir)
    status_file = root / "status.json"
    status = load_json(status_file) if status_file.is_file() else {}
    rej = root / "rejected.json"
    rejected = load_json(rej) if rej.is_file() else {}
    if isinstance(rejected, dict) and rejected:
        status["__rejected__"] = rejected
    by_track: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(root.glob("*/*.json")):
        try:
            doc = load_json(p)
        except LoadError as e:
            print(f"leaderboard: render: {e}; left off the board", file=sys.stderr)
            continue
        if not _result_ok(doc):
            print(f"leaderboard: render: {p}: not a result file (entry, track, meta, result, plot); left off the board",
                  file=sys.stderr)
            continue
        by_track.setdefault(doc["track"], []).append(doc)
    for name in by_track:
        status.setdefault(name, {"title": name, "available": True, "metrics": list(by_track[name][0]["result"]["aggregate"]),
                                 "primary": next(iter(by_track[name][0]["result"]["aggregate"]))})
    floors_file = root / "noise_floor.json"
    floors = load_json(floors_file) if floors_file.is_file() else {}
    for name, st in status.items():  # in memory only: the views read it from the track's status
        if name != "__rejected__" and isinstance(st, dict) and isinstance(floors, dict) and isinstance(floors.get(name), dict):
            st["noise_floor"] = floors[name]
    return status, by_track


def _context(name: str, status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> Any:
    from .below_flops import by_cell, flagged
    from .views import Context, scenario_attributes

    st = status[name]
    entries = ranked(by_track.get(name, []), st["primary"])
    below = by_cell(flagged({name: st}, {name: by_track.get(name, [])}), name)
    return Context(name, st, entries, st.get("noise_floor"), scenario_attributes(entries), below)


def _spread(doc: dict[str, Any], metric: str) -> float | None:
    seeds = doc["result"].get("seeds") or {}
    v = (seeds.get("aggregate_std") or {}).get(metric)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def ranked(entries: list[dict[str, Any]], primary: str) -> list[dict[str, Any]]:
    m = METRICS.get(primary)

    def key(doc: dict[str, Any]) -> float:
        v = doc["result"]["aggregate"].get(primary)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return math.inf
        return -v if m.higher_is_better else v

    return sorted(entries, key=lambda d: (key(d), d["entry"]))


def fmt(metric: str, v: Any, sd: Any = None) -> str:
    """A figure as the board prints it; with ``sd`` (spread over seeds) as "mean ± sd"."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    unit = METRICS.get(metric).unit
    if unit == "fraction":
        out = f"{100 * v:.1f}%"
        spread = f"{100 * sd:.1f}" if sd is not None else None
    elif unit == "%":
        out, spread = f"{v:.2f}", (f"{sd:.2f}" if sd is not None else None)
    elif unit == "ms":
        out, spread = f"{v:.3g}", (f"{sd:.2g}" if sd is not None else None)
    else:
        out, spread = f"{v:.3f}", (f"{sd:.3f}" if sd is not None else None)
    return f"{out} ± {spread}" if spread is not None else out


# ---------------------------------------------------------------- README
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")  # code, emphasis, links/images, table cells


def md_text(text: Any, limit: int = 300) -> str:
    """Text from an entry as inert Markdown on one line: control and bidi characters escaped
    (printable), HTML escaped, Markdown syntax backslash-escaped, line breaks folded, length bounded."""
    s = printable(" ".join(str(text).split()))
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return _MD_SPECIAL.sub(r"\\\1", html.escape(s, quote=False))


def _not_entered(st: dict[str, Any]) -> list[tuple[str, str]]:
    """(predictor, why) for the registered predictors without a result on the track."""
    absent = st.get("not_entered")
    return sorted((str(k), str(v)) for k, v in absent.items()) if isinstance(absent, dict) else []


def _anchor(name: str) -> str:
    return "track-" + "".join(c if c.isalnum() or c == "-" else "-" for c in name)


def _primary_of(doc: dict[str, Any] | None, primary: str) -> Any:
    return None if doc is None else doc["result"]["aggregate"].get(primary)


def overview_rows(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]], avail: list[str]) -> list[dict[str, Any]]:
    """One row per track with data: what it holds, its primary metric, the best entry, FLOPs and
    the noise floor on that metric (the board's overview; the sections below detail each)."""
    rows = []
    for name in avail:
        st = status[name]
        primary = st["primary"]
        entries = ranked(by_track.get(name, []), primary)
        best = entries[0] if entries else None
        flops = next((d for d in entries if d["entry"] == "flops"), None)
        floor = st.get("noise_floor") or {}
        floor_v = (floor.get("aggregate") or {}).get(primary) if floor.get("known") else None
        rows.append({"track": name, "title": st.get("title", ""),
                     "data": f"{st.get('data', '')}: {st.get('scenarios', '?')} scenario(s), {st.get('networks', '?')} networks",
                     "metric": primary, "metric_label": METRICS.get(primary).label_in(st.get("unit", "ms")),
                     "best": best["entry"] if best else None,
                     "best_value": fmt(primary, _primary_of(best, primary), _spread(best, primary)) if best else "",
                     "flops": fmt(primary, _primary_of(flops, primary)) if flops else "–",
                     "floor": fmt(primary, floor_v) if floor_v is not None else "–"})
    return rows


def _md_overview(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]], avail: list[str]) -> list[str]:
    head = ["track", "data", "primary metric", "best entry", "FLOPs", "noise floor"]
    out = ["## Overview", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in overview_rows(status, by_track, avail):
        best = f"{md_text(r['best'], 40)} {r['best_value']}" if r["best"] else "no entries yet"
        out.append(f"| [{r['track']}](#{_anchor(r['track'])}) | {r['data']} | {r['metric_label']} | {best} | "
                   f"{r['flops']} | {r['floor']} |")
    return out + [""]


def _md_contents(avail: list[str], rejected: bool, missing: bool) -> list[str]:
    """The table of contents as one paragraph, so it stays on the first screen with the overview."""
    items = ["[Overview](#overview)"] + [f"[{name}](#{_anchor(name)})" for name in avail]
    items += ["[Rejected entries](#rejected-entries)"] if rejected else []
    items += ["[Tracks waiting for data](#tracks-waiting-for-data)"] if missing else []
    return ["**Contents:** " + " · ".join(items), ""]


def render_markdown(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]],
                    results: str = "leaderboard/results/", site: str = "leaderboard/site/index.html",
                    docs: str = "../docs/leaderboard.md") -> str:
    """The board as Markdown: the overview table and the contents first, then each track's
    entries, reference rows and per-scenario views, with a footnote beside every cell worse than
    the ``flops`` entry giving the reason recorded in ``leaderboard/why_below_flops.yaml``.
    ``results``, ``site`` and ``docs`` are what the header names (the committed board's by
    default; :func:`render` passes the folders it reads and writes)."""
    avail = [n for n in sorted(status) if n != "__rejected__" and status[n].get("available")]
    missing = [n for n in sorted(status) if n != "__rejected__" and not status[n].get("available")]
    rejected = status.get("__rejected__", {})
    lines = ["# latbench leaderboard", "",
             f"Generated by `leaderboard render` from `{results}` (do not edit by hand). Each track "
             "ranks its entries by its primary metric (marked *), the unweighted mean over the track's scenarios "
             "(on tracks of repeated draws, the mean over seeds ± their standard deviation); reference rows (the "
             "noise floor, the perfect predictor, published results) and per-scenario views follow each ranking. "
             "A cell worse than the `flops` entry carries a footnote with the reason. The site "
             f"`{site}` has the same tables, sortable, with plots; "
             f"[docs/leaderboard.md]({docs}) explains tracks, splits and submissions.", ""]
    lines += _md_contents(avail, bool(rejected), bool(missing)) + _md_overview(status, by_track, avail)
    for name in avail:
        st = status[name]
        metrics = st["metrics"]
        lines += [f'<a id="{_anchor(name)}"></a>', "", f"## {name}: {st.get('title', '')}", ""]
        if st.get("description"):
            lines += [st["description"], ""]
        lines += [f"{st.get('scenarios', '?')} scenario(s), {st.get('networks', '?')} networks, "
                  f"{st.get('folds', '?')} fold(s); source: {st.get('reference', '')}", ""]
        entries = ranked(by_track.get(name, []), st["primary"])
        absent = _not_entered(st)
        if not entries:
            lines += ["No entries yet.", ""] + [f"- not on this track: {md_text(p, 40)}: {md_text(w)}" for p, w in absent]
            lines += [""] if absent else []
            continue
        head = ["#", "entry", "kind"] + [METRICS.get(m).label_in(st.get("unit", "ms")) + (" *" if m == st["primary"] else "")
                                         for m in metrics]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, d in enumerate(entries, 1):
            agg = d["result"]["aggregate"]
            row = [str(i), md_text(d["entry"]), md_text(entry_kind(d))] + [
                fmt(m, agg.get(m), _spread(d, m)) for m in metrics]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        if any(d["result"].get("seeds") for d in entries):
            folds = max(len((d["result"].get("seeds") or {}).get("folds", [])) for d in entries)
            lines += [f"Repeated draws: each figure is the mean over the {folds} seeds of the split ± their standard "
                      "deviation (each seed scored on its own).", ""]
        ctx = _context(name, status, by_track)
        notes = _Footnotes(_anchor(name).removeprefix("track-"))
        lines += _md_reference(ctx, metrics) + _md_views(ctx, notes) + notes.lines()
        if absent:
            lines += ["Registered predictors not on this track:", ""]
            lines += [f"- {md_text(p, 40)}: {md_text(w)}" for p, w in absent] + [""]
    if rejected:
        lines += ["## Rejected entries", "", "Entries whose predictions did not validate (first problem shown):", ""]
        lines += [f"- {md_text(name, 80)}: {md_text(_problem_text(probs))}" for name, probs in sorted(rejected.items())] + [""]
    if missing:
        lines += ["## Tracks waiting for data", "", "| track | title | why it is skipped |", "|---|---|---|"]
        for name in missing:
            lines.append(f"| {name} | {status[name].get('title', '')} | {md_text(status[name].get('reason', ''), 600)} |")
        lines.append("")
    return "\n".join(lines)


class _Footnotes:
    """The reasons of one track's cells below FLOPs as Markdown footnotes, each reason once."""

    def __init__(self, prefix: str):
        self.prefix, self.reasons = prefix, {}

    def mark(self, why: str | None) -> str:
        if not why:
            return ""
        n = self.reasons.setdefault(why, len(self.reasons) + 1)
        return f"[^{self.prefix}-{n}]"

    def lines(self) -> list[str]:
        return [f"[^{self.prefix}-{n}]: Below FLOPs: {md_text(why, 900)}" for why, n in self.reasons.items()] + \
            ([""] if self.reasons else [])


def _md_reference(ctx: Any, metrics: list[str]) -> list[str]:
    from .views import reference_rows

    rows = reference_rows(ctx)
    head = ["reference", "kind"] + [ctx.label(m) for m in metrics] + ["source, protocol"]
    out = ["Reference rows (not entries): the noise floor (one measurement of a network against another), the "
           "perfect predictor (the true latency scored against the recorded figure, which carries its own noise: "
           "an estimate of the best an entry can do, pessimistic where one outlying process inflated the spread; "
           "\"(retest)\": the same from the test networks measured again in a later session, which also sees the "
           "machine's wander over a sweep) and published results.", "",
           "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [fmt(m, r["aggregate"].get(m)) if m in r["aggregate"] else "" for m in metrics]
        out.append("| " + " | ".join([md_text(r["label"]), md_text(r["kind"])] + cells + [md_text(r["note"], 900)]) + " |")
    return out + [""]


def _md_table(view: dict[str, Any], notes: _Footnotes) -> list[str]:
    m = view["metric"]
    out = [f"### {view['title']}", "", view["caption"], ""]
    if "layers" in view:
        layers = [view["layers"][0]] + [layer for layer in view["layers"][1:] if layer["kind"] == "floor"]
        for layer in layers:
            out += [f"{md_text(layer['label'])} ({layer['kind']}):", ""]
            out += ["| | " + " | ".join(md_text(c) for c in view["columns"]) + " |", "|" + "---|" * (len(view["columns"]) + 1)]
            below = layer.get("below_flops") or [[None] * len(view["columns"])] * len(layer["cells"])
            for label, cells, whys in zip(view["row_labels"], layer["cells"], below):
                out.append(f"| {md_text(label)} | " + " | ".join(fmt(m, v) + notes.mark(w) for v, w in zip(cells, whys))
                           + " |")
            out.append("")
        return out
    out += ["| | kind | " + " | ".join(md_text(c) for c in view["columns"]) + " |", "|" + "---|" * (len(view["columns"]) + 2)]
    for r in view["rows"]:
        whys = r.get("below_flops") or [None] * len(r["cells"])
        cells = [fmt(m, v, sd) + notes.mark(w) for v, sd, w in zip(r["cells"], r["spread"], whys)]
        out.append(f"| {md_text(r['label'])} | {md_text(r['kind'])} | " + " | ".join(cells) + " |")
    notes = [r for r in view["rows"] if r["kind"] == "floor" and r.get("note")]  # published: in the reference rows
    if notes:
        out += [""] + [f"- {md_text(r['label'])}: {md_text(r['note'], 600)}" for r in notes]
    return out + [""]


def _md_views(ctx: Any, notes: _Footnotes) -> list[str]:
    from .views import views_for

    return [line for view in views_for(ctx) for line in _md_table(view, notes)]


# ---------------------------------------------------------------- site
# the page's skeleton (page.html: ${board_css}, ${board_data} and ${board_js} are filled by
# string.Template), its style sheet and its script, as files
SITE_TEMPLATE = HERE / "site_template"


def _site_file(name: str) -> str:
    return (SITE_TEMPLATE / name).read_text(encoding="utf-8")


def site_data(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    tracks, missing = [], []
    for name in sorted(status):
        if name == "__rejected__":
            continue
        st = status[name]
        if not st.get("available"):
            missing.append({"name": name, "title": st.get("title", ""), "reason": st.get("reason", "")})
            continue
        entries = [{"entry": d["entry"], "kind": entry_kind(d),
                    "description": d["meta"].get("description", ""), "aggregate": d["result"]["aggregate"],
                    "spread": {m: _spread(d, m) for m in st["metrics"]}, "plot": d["plot"]}
                   for d in ranked(by_track.get(name, []), st["primary"])]
        from .views import reference_rows, views_for

        ctx = _context(name, status, by_track)
        folds = max((len((d["result"].get("seeds") or {}).get("folds", [])) for d in ctx.entries), default=0)
        seeds = (f"Repeated draws: each figure is the mean over the {folds} seeds of the split ± their standard deviation."
                 if folds > 1 else "")
        info = (f"{st.get('scenarios', '?')} scenario(s), {st.get('networks', '?')} networks, {st.get('folds', '?')} fold(s). "
                f"{st.get('reference', '')}")
        tracks.append({"name": name, "title": st.get("title", ""), "description": st.get("description", ""), "info": info,
                       "metrics": st["metrics"], "primary": st["primary"], "entries": entries, "seeds": seeds,
                       "labels": {m: ctx.label(m) for m in st["metrics"]},
                       "reference": reference_rows(ctx), "views": views_for(ctx),
                       "not_entered": [{"predictor": p, "why": w} for p, w in _not_entered(st)]})
    metrics = {n: {"label": METRICS.get(n).label, "unit": METRICS.get(n).unit,
                   "higher_is_better": METRICS.get(n).higher_is_better} for n in METRICS.names()}
    avail = [t["name"] for t in tracks]
    return inert({"overview": overview_rows(status, by_track, avail), "tracks": tracks, "missing": missing,
                  "metrics": metrics})


def inert(x: Any) -> Any:
    """The page's data with every text (keys too) shown as it is read: line breaks and tabs as
    spaces, every other control, escape, bidi or separator character escaped (printable)."""
    if isinstance(x, str):
        return printable(x.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " "))
    if isinstance(x, dict):
        return {inert(k) if isinstance(k, str) else k: inert(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [inert(v) for v in x]
    return x


def render_html(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]]) -> str:
    # < > & escaped inside the JSON strings: no text (say "<!--<script>") can end or comment out the element
    data = (json.dumps(site_data(status, by_track), separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    # one pass: the filled in texts (the script's template literals, ``$`` in the data) are not read again
    page = string.Template(_site_file("page.html"))
    return page.substitute(board_css=_site_file("board.css"), board_data=data, board_js=_site_file("board.js"))


def _shown(path: str | Path) -> str:
    """A path as the header names it: relative to the working folder when inside it."""
    p = Path(path).resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def render(results_dir: str | Path, readme: str | Path, site_dir: str | Path) -> tuple[Path, Path]:
    status, by_track = load_results(results_dir)
    readme, site = Path(readme), Path(site_dir) / "index.html"
    docs = os.path.relpath(Path(__file__).resolve().parents[1] / "docs" / "leaderboard.md", readme.resolve().parent)
    readme.write_text(render_markdown(status, by_track, results=f"{_shown(results_dir)}/", site=_shown(site),
                                      docs=Path(docs).as_posix()) + "\n")
    site.parent.mkdir(parents=True, exist_ok=True)
    site.write_text(render_html(status, by_track))
    return readme, site


__all__ = ["render", "render_markdown", "render_html", "load_results", "ranked", "site_data", "inert", "md_text"]
