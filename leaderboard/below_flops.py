"""Entries below FLOPs (issue 17): "no predictor may be worse than FLOPs on a scenario without the
board saying why".

For every track with a ``flops`` entry, every (scenario, entry) whose figure on the track's primary
metric is worse than the ``flops`` entry's on that scenario is *flagged* (the direction is the
metric's ``higher_is_better`` in :mod:`leaderboard.metrics`: Spearman higher, MAPE lower). Only
entries are compared (baselines and submissions), never the noise floor or published rows, which
are not entries. A figure that is missing (NaN: a constant predictor has no rank) where FLOPs has
one counts as worse. On tracks of repeated draws the figures are the means over the seeds.

Each flagged cell is explained by the first matching rule of the curated file
``leaderboard/why_below_flops.yaml`` (a list of ``{track, scenario, entry, why}``; the first three are
fnmatch globs), else by :data:`NO_REASON`. The board (README and site) shows them;
``tests/test_below_flops.py`` requires a reason for every flagged cell of the committed results, so
a new regression below FLOPs cannot land without one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .metrics import METRICS

HERE = Path(__file__).resolve().parent
REASONS_FILE = HERE / "why_below_flops.yaml"
REFERENCE = "flops"  # the entry every other is compared with
NO_REASON = "no reason recorded yet"
_KEYS = ("track", "scenario", "entry", "why")


@dataclass(frozen=True)
class Reason:
    track: str
    scenario: str
    entry: str
    why: str

    def matches(self, track: str, scenario: str, entry: str) -> bool:
        return fnmatchcase(track, self.track) and fnmatchcase(scenario, self.scenario) and fnmatchcase(entry, self.entry)


def load_reasons(path: str | Path = REASONS_FILE) -> list[Reason]:
    """The curated reasons, in file order; a missing file is no reasons. A malformed rule is an
    error naming the file, the rule's position and the key."""
    from foundation.safeload import load_yaml

    p = Path(path)
    if not p.is_file():
        return []
    doc = load_yaml(p)
    rules = (doc or {}).get("reasons", []) if isinstance(doc, dict) else doc
    if not isinstance(rules, list):
        raise ValueError(f"{p}: expected a list of reasons (or a mapping with 'reasons: [...]')")
    out = []
    for i, r in enumerate(rules):
        if not isinstance(r, dict) or set(r) - set(_KEYS) or "why" not in r:
            raise ValueError(f"{p}: reasons[{i}]: expected keys {', '.join(_KEYS)} (track, scenario, entry default '*')")
        vals = {k: r.get(k, "*") for k in _KEYS}
        bad = [k for k, v in vals.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise ValueError(f"{p}: reasons[{i}]: {bad[0]}: expected a non-empty string")
        out.append(Reason(vals["track"], vals["scenario"], vals["entry"], " ".join(vals["why"].split())))
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def worse(value: float | None, reference: float | None, higher_is_better: bool) -> bool:
    """Is ``value`` worse than ``reference``? (A missing value is worse than a present one.)"""
    if reference is None:
        return False
    if value is None:
        return True
    return value < reference if higher_is_better else value > reference


def flagged(status: dict[str, Any], by_track: dict[str, list[dict[str, Any]]],
            reasons: list[Reason] | None = None) -> list[dict[str, Any]]:
    """Every (track, scenario, entry) worse than ``flops`` on the track's primary metric, sorted,
    each with ``metric``, ``value``, ``flops`` and ``why`` (the first matching reason or NO_REASON)."""
    reasons = load_reasons() if reasons is None else reasons
    out = []
    for track in sorted(by_track):
        st = status.get(track)
        docs = by_track[track]
        ref = next((d for d in docs if d["entry"] == REFERENCE), None)
        if not isinstance(st, dict) or ref is None or st.get("primary") not in METRICS.names():
            continue
        metric = st["primary"]
        hib = METRICS.get(metric).higher_is_better
        ref_per = ref["result"].get("per_scenario") or {}
        for d in sorted(docs, key=lambda d: d["entry"]):
            if d["entry"] == REFERENCE:
                continue
            for sid, figs in sorted((d["result"].get("per_scenario") or {}).items()):
                f = _num((ref_per.get(sid) or {}).get(metric))
                v = _num((figs or {}).get(metric))
                if worse(v, f, hib):
                    why = next((r.why for r in reasons if r.matches(track, sid, d["entry"])), NO_REASON)
                    out.append({"track": track, "scenario": sid, "entry": d["entry"],
                                "kind": str(d["meta"].get("kind", "submission")), "metric": metric,
                                "value": v, "flops": f, "why": why})
    return out


def by_cell(flags: list[dict[str, Any]], track: str) -> dict[tuple[str, str], str]:
    """(scenario, entry) -> why, for one track."""
    return {(f["scenario"], f["entry"]): f["why"] for f in flags if f["track"] == track}


__all__ = ["NO_REASON", "REASONS_FILE", "REFERENCE", "Reason", "load_reasons", "flagged", "by_cell", "worse"]
