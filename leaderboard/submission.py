"""Submissions: a predictions file and a metadata file. Data only, never code.

Predictions (``.parquet`` or ``.csv``): one row per predicted network x scenario with exactly
the columns ``track``, ``scenario_id``, ``model_id`` (the dataset's id) and ``predicted_ms``.
A submission may cover several tracks; for each track it covers it must predict exactly the
track's test networks in every scenario of the track (the union of the test folds: each
network is predicted once, by the model of the fold that holds it out). On a track of repeated
draws (several seeds, e.g. ``help-nb201-n10``: every fold tests the same networks) a fifth
column ``fold`` (int) says which draw a prediction comes from, and every fold is predicted;
elsewhere ``fold`` may be left out (or empty).

Metadata (``.yaml``/``.yml`` or ``.json``): ``method`` (name on the board), ``authors``,
``code`` (a link, http(s); the suite's own baselines say ``repo:<path>``), ``training_data`` (what the method trained on beyond each track's
training split, e.g. "track training split only"), ``seeds`` (list of ints), optionally
``description``, ``kind`` (``baseline`` or ``submission``), ``predictor`` and ``params``.

:func:`validate` reads and checks both and returns a :class:`Checked` submission or raises
:class:`SubmissionError` whose message lists every problem, one line each, naming the file,
the row (CSV line or parquet row) and the column: missing or extra ids, duplicates, NaN, zero,
negative or infinite predictions, unknown track or scenario, predictions for networks outside
the test split. The board evaluates only what passed.

Files come from strangers, so reading is bounded (:data:`LIMITS`: bytes, rows, metadata size
after expanding YAML aliases, text lengths) and entry names follow one policy
(:func:`check_entry_name`): registered predictor names are the baselines', and a submission
cannot call itself ``kind: baseline``. docs/leaderboard.md states the policy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from generators import limits

COLUMNS = ("track", "scenario_id", "model_id", "predicted_ms")
FOLD = "fold"  # optional column: required on tracks of repeated draws (seeds), ignored elsewhere
META_REQUIRED = ("method", "authors", "code", "training_data", "seeds")
META_OPTIONAL = ("description", "kind", "predictor", "params", "date")
MAX_LISTED = 5  # examples listed per problem

LIMITS = limits.SUBMISSION  # size limits of a submission (docs/leaderboard.md, "Submission policy")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")  # entry names: folder and result-file names
RESERVED_NAMES = ("baseline", "baselines", "status", "rejected", "submission", "submissions")


MAX_PROBLEM_CHARS = 500


def one_line(text: Any, limit: int = MAX_PROBLEM_CHARS) -> str:
    """A problem as one line of bounded length (submission text may hold newlines and be long)."""
    s = " ".join(str(text).split("\n"))
    s = s.replace("\r", " ")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def problem_line(track: str | None, problem: str) -> str:
    """One problem as shown to a person: ``track <name>: <problem>``, or the problem alone when it
    concerns the whole file; bounded like every problem line (:func:`one_line`)."""
    return one_line(f"track {track}: {problem}" if track is not None else problem)


class SubmissionError(ValueError):
    """Problems with a submission. ``tracks`` names, per problem, the track it was found on
    (None: the whole file), so a board can say which of an entry's tracks were refused and why
    without parsing the message; ``problems`` prefixes those with ``track <name>: ``."""

    def __init__(self, problems: list[str], tracks: list[str | None] | None = None):
        self.tracks = list(tracks) if tracks is not None else [None] * len(problems)
        if len(self.tracks) != len(problems):
            raise ValueError("SubmissionError: one track (or None) per problem")
        self.bare = [one_line(p) for p in problems]
        self.problems = [problem_line(t, p) for t, p in zip(self.tracks, self.bare)]
        super().__init__(f"{len(problems)} problem(s):\n" + "\n".join(self.problems))

    def records(self) -> list[dict[str, str | None]]:
        """The problems as ``{"track": name or None, "problem": text}`` (results/rejected.json)."""
        return [{"track": t, "problem": p} for t, p in zip(self.tracks, self.bare)]


def _row_label(path: Path, i: int) -> str:
    # CSV: the line in the file (header = line 1); parquet: the 0-based row
    return f"line {i + 2}" if path.suffix.lower() == ".csv" else f"row {i}"


def _examples(xs: list[Any]) -> str:
    xs = list(xs)
    more = f" (+{len(xs) - MAX_LISTED} more)" if len(xs) > MAX_LISTED else ""
    return ", ".join(map(str, xs[:MAX_LISTED])) + more


# ---------------------------------------------------------------- files
# ---------------------------------------------------------------- names
def reserved_names() -> set[str]:
    """Names no submission may take: every registered predictor's (the baselines' entries)."""
    from .baselines import PREDICTORS

    return {n.lower() for n in PREDICTORS.names()} | set(RESERVED_NAMES)


def check_entry_name(name: Any, kind: str = "submission") -> str | None:
    """The one name policy of entries: None if ``name`` may be filed as an entry of ``kind``,
    else the reason (one line). Names are lower-case letters, digits, ``.``, ``-`` and ``_`` (at most 64,
    starting with a letter or digit: never a path, never hidden; ``.`` only inside); a submission may not take a
    reserved name (a registered predictor's)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return (f"entry name {str(name)[:80]!r} is not allowed: use 1-64 lower-case letters, digits, '.', '-' or '_', "
                "starting with a letter or digit")
    if kind != "baseline" and name in reserved_names():
        return f"entry name {name!r} is reserved for the suite's baselines (registered predictors); choose another"
    return None


def _parquet_precheck(p: Path, problems: list[str]) -> bool:
    """Refuse a parquet file by its footer alone: too many rows (a 1 MB file of dictionary-encoded
    rows can decode to gigabytes) or too many columns."""
    import pyarrow.parquet as pq

    import pyarrow as pa

    try:
        md = pq.ParquetFile(p).metadata
    except (OSError, ValueError, TypeError, pa.ArrowException) as e:  # an unreadable file is one reported problem
        problems.append(f"{p}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
        return False
    if md.num_rows > LIMITS["predictions_rows"]:
        problems.append(f"{p}: {md.num_rows} rows (at most {LIMITS['predictions_rows']}); not read")
        return False
    if md.num_columns > 4 * len(COLUMNS):
        problems.append(f"{p}: {md.num_columns} columns (expected exactly {', '.join(COLUMNS)}); not read")
        return False
    return True


def read_predictions(path: str | Path, problems: list[str]) -> pd.DataFrame | None:
    p = Path(path)
    suffix = p.suffix.lower()
    if not p.is_file():
        problems.append(f"{p}: no such file")
        return None
    if suffix not in (".parquet", ".csv"):
        problems.append(f"{p}: unsupported predictions format {suffix or '(none)'} (use .parquet or .csv)")
        return None
    size = p.stat().st_size
    if size > LIMITS["predictions_bytes"]:
        problems.append(f"{p}: {size} bytes (at most {LIMITS['predictions_bytes']}); not read")
        return None
    if suffix == ".parquet" and not _parquet_precheck(p, problems):
        return None
    try:
        if suffix == ".parquet":
            df = pd.read_parquet(p)
        else:
            df = pd.read_csv(p, dtype={"track": "string", "scenario_id": "string", "model_id": "string"},
                             keep_default_na=True, nrows=LIMITS["predictions_rows"] + 1)
    except Exception as e:  # noqa: BLE001 - any unreadable file (MemoryError included) is one reported problem
        problems.append(f"{p}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
        return None
    if len(df) > LIMITS["predictions_rows"]:
        problems.append(f"{p}: more than {LIMITS['predictions_rows']} rows; not read")
        return None
    try:
        return _check_predictions(p, df, problems)
    except MemoryError:
        problems.append(f"{p}: too large to check in memory")
    except (TypeError, ValueError) as e:  # e.g. nested values in a parquet column
        problems.append(f"{p}: unreadable values ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return None


def _check_predictions(p: Path, df: pd.DataFrame, problems: list[str]) -> pd.DataFrame | None:
    missing = [c for c in COLUMNS if c not in df.columns]
    extra = [c for c in df.columns if c not in COLUMNS and c != FOLD]
    if missing:
        problems.append(f"{p}: missing column(s) {', '.join(missing)} (expected exactly {', '.join(COLUMNS)})")
    if extra:
        problems.append(f"{p}: unexpected column(s) {', '.join(map(str, extra))} (expected exactly {', '.join(COLUMNS)})")
    if missing:
        return None
    df = df[list(COLUMNS) + ([FOLD] if FOLD in df.columns else [])].reset_index(drop=True)
    if FOLD in df.columns:
        f = pd.to_numeric(df[FOLD], errors="coerce")
        bad = (f.isna() & df[FOLD].notna()) | (f.notna() & ((f % 1 != 0) | (f < 0)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            problems.append(f"{p}: fold: {int(bad.sum())} value(s) not a fold number (int >= 0), first at "
                            f"{_row_label(p, i)}: {df[FOLD].iloc[i]!r}")
            return None
        df[FOLD] = f.astype("Int64")
    if len(df) == 0:
        problems.append(f"{p}: no predictions (the file has a header but no rows)")
        return None
    stored = df["predicted_ms"].dtype
    if not (pd.api.types.is_integer_dtype(stored) or pd.api.types.is_float_dtype(stored)
            or pd.api.types.is_string_dtype(stored)) or pd.api.types.is_bool_dtype(stored):
        problems.append(f"{p}: predicted_ms: stored as {stored}, expected numbers (milliseconds as float or int)")
        return None
    if stored == object:
        odd = df["predicted_ms"].map(lambda v: not (v is None or isinstance(v, str)
                                                    or (isinstance(v, (int, float)) and not isinstance(v, bool))))
        if odd.any():
            i = int(np.flatnonzero(odd)[0])
            problems.append(f"{p}: predicted_ms: {int(odd.sum())} value(s) not numbers, first at {_row_label(p, i)}: "
                            f"{type(df['predicted_ms'].iloc[i]).__name__}")
            return None
    for c in ("track", "scenario_id", "model_id"):
        empty = df[c].isna() | (df[c].astype("string").str.strip() == "")
        if empty.any():
            problems.append(f"{p}: {c}: {int(empty.sum())} empty value(s), first at {_row_label(p, int(np.flatnonzero(empty)[0]))}")
        df[c] = df[c].astype("string")
    v = pd.to_numeric(df["predicted_ms"], errors="coerce")
    notnum = v.isna() & df["predicted_ms"].notna()
    if notnum.any():
        i = int(np.flatnonzero(notnum)[0])
        problems.append(f"{p}: predicted_ms: {int(notnum.sum())} value(s) not a number, first at {_row_label(p, i)}: "
                        f"{df['predicted_ms'].iloc[i]!r}")
    v = v.astype("float64")
    big = LIMITS["predicted_ms"]
    for what, mask in (("NaN (missing)", v.isna() & ~notnum), ("infinite", np.isinf(v)), ("zero", v == 0),
                       ("negative", v < 0), (f"larger than {big:g} ms", np.isfinite(v) & (v > big))):
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            problems.append(f"{p}: predicted_ms: {int(mask.sum())} value(s) {what}, first at {_row_label(p, i)} "
                            f"({df['scenario_id'].iloc[i]}, {df['model_id'].iloc[i]})")
    df["predicted_ms"] = v
    key = ["track", "scenario_id", "model_id"] + ([FOLD] if FOLD in df.columns else [])
    dup = df.duplicated(key, keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        problems.append(f"{p}: {int(dup.sum())} duplicate ({', '.join(key)}) row(s), first at {_row_label(p, i)}: "
                        f"{df['track'].iloc[i]}, {df['scenario_id'].iloc[i]}, {df['model_id'].iloc[i]}")
    return df


_URL = re.compile(r"https?://\S+|repo:[\w./-]+")


def read_metadata(path: str | Path, problems: list[str], kind: str | None = None) -> dict[str, Any] | None:
    """Read and check the metadata; ``kind="submission"`` also refuses ``kind: baseline``
    (what ``leaderboard submit`` and filed submissions pass)."""
    from generators.safeload import LoadError, load_json_text, load_yaml_text, read_text

    p = Path(path)
    if not p.is_file():
        problems.append(f"{p}: no such file")
        return None
    suffix = p.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        problems.append(f"{p}: unsupported metadata format {p.suffix or '(none)'} (use .yaml or .json)")
        return None
    bounds = {"max_nodes": LIMITS["metadata_values"], "max_depth": LIMITS["metadata_depth"]}
    try:
        text = read_text(p, LIMITS["metadata_bytes"])
        # bounded and safe: plain data, no tags that build objects, aliases counted and expanded
        meta = load_json_text(text, str(p), **bounds) if suffix == ".json" else load_yaml_text(text, str(p), **bounds)
    except LoadError as e:
        msg = str(e)
        problems.append(f"{p}: unreadable ({msg[len(str(p)) + 2:] if msg.startswith(f'{p}: ') else msg})")
        return None
    if not isinstance(meta, Mapping):
        problems.append(f"{p}: expected a mapping of keys {', '.join(META_REQUIRED)}")
        return None
    n0 = len(problems)
    for k in META_REQUIRED:
        if k not in meta or meta[k] in (None, "", []):
            problems.append(f"{p}: {k}: missing")
    for k in sorted(set(meta) - set(META_REQUIRED) - set(META_OPTIONAL)):
        problems.append(f"{p}: {k}: unknown key (known: {', '.join(META_REQUIRED + META_OPTIONAL)})")
    if "method" in meta and not isinstance(meta["method"], str):
        problems.append(f"{p}: method: expected a name (string)")
    a = meta.get("authors")
    if a is not None and not (isinstance(a, str) or (isinstance(a, list) and all(isinstance(x, str) for x in a))):
        problems.append(f"{p}: authors: expected a string or a list of strings")
    c = meta.get("code")
    if c and not (isinstance(c, str) and _URL.fullmatch(c)):
        problems.append(f"{p}: code: expected a link (http:// or https://, or repo:<path> in this repository), got {c!r}")
    if "training_data" in meta and meta["training_data"] and not isinstance(meta["training_data"], str):
        problems.append(f"{p}: training_data: expected a sentence (string)")
    s = meta.get("seeds")
    if s not in (None, []) and not (isinstance(s, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in s)):
        problems.append(f"{p}: seeds: expected a list of integers, got {s!r}")
    if meta.get("kind", "submission") not in ("baseline", "submission"):
        problems.append(f"{p}: kind: expected baseline or submission, got {meta['kind']!r}"[:300])
    elif kind == "submission" and meta.get("kind") == "baseline":
        problems.append(f"{p}: kind: baseline is reserved for the suite's own baselines (trained by "
                        "`leaderboard train`); a submission is kind: submission")
    _check_lengths(p, meta, problems)
    return dict(meta) if len(problems) == n0 else None


def _check_lengths(p: Path, meta: Mapping[str, Any], problems: list[str]) -> None:
    for key, limit in (("method", "name_chars"), ("predictor", "name_chars"), ("code", "text_chars"),
                       ("description", "text_chars"), ("training_data", "text_chars"), ("date", "name_chars")):
        v = meta.get(key)
        if isinstance(v, str) and len(v) > LIMITS[limit]:
            problems.append(f"{p}: {key}: {len(v)} characters (at most {LIMITS[limit]})")
        if key in ("description", "predictor", "date") and v is not None and not isinstance(v, (str, int, float)) \
                and not type(v).__module__ == "datetime":
            problems.append(f"{p}: {key}: expected text, got {type(v).__name__}")
    a = meta.get("authors")
    if isinstance(a, list) and (len(a) > LIMITS["authors"] or any(isinstance(x, str) and len(x) > LIMITS["name_chars"] for x in a)):
        problems.append(f"{p}: authors: at most {LIMITS['authors']} names of at most {LIMITS['name_chars']} characters")
    if isinstance(a, str) and len(a) > LIMITS["text_chars"]:
        problems.append(f"{p}: authors: {len(a)} characters (at most {LIMITS['text_chars']})")
    s = meta.get("seeds")
    if isinstance(s, list) and len(s) > LIMITS["seeds"]:
        problems.append(f"{p}: seeds: {len(s)} seeds (at most {LIMITS['seeds']})")
    if "params" in meta and meta["params"] is not None and not isinstance(meta["params"], Mapping):
        problems.append(f"{p}: params: expected a mapping of parameter names to values")


# ---------------------------------------------------------------- against the tracks
@dataclass
class Checked:
    """A valid submission: metadata and, per track, its predictions joined with the measured
    latency (columns scenario_id, model_id, name, predicted_ms, latency_ms; and fold on tracks
    of repeated draws)."""

    meta: dict[str, Any]
    tracks: dict[str, pd.DataFrame] = field(default_factory=dict)


def check_against_tracks(df: pd.DataFrame, source: str, roots: Mapping[str, Any] | None,
                         splits_dir: Path | None, problems: list[str]) -> dict[str, pd.DataFrame]:
    from .tracks import TRACKS, Unavailable, read_split, resolve

    out: dict[str, pd.DataFrame] = {}
    for track_name, g in df.groupby("track", sort=True):
        track_name = str(track_name)
        if track_name not in TRACKS:
            problems.append(f"{source}: track: unknown track {track_name!r} ({len(g)} row(s); known: {', '.join(TRACKS.names())})")
            continue
        track = TRACKS.get(track_name)
        data = resolve(track, roots)
        if isinstance(data, Unavailable):
            problems.append(f"{source}: track {track_name}: cannot be evaluated here ({data.reason})")
            continue
        split = read_split(track, splits_dir)
        if split is None:
            problems.append(f"{source}: track {track_name}: no split file {track.split_file.name} yet "
                            "(run `leaderboard splits` on the data first)")
            continue
        unknown_s = sorted(set(g["scenario_id"]) - set(data.scenario_ids))
        if unknown_s:
            problems.append(f"{source}: track {track_name}: unknown scenario(s) {_examples(unknown_s)}"
                            f" (the track's: {_examples(data.scenario_ids)})")
        rows = []
        repeated = split.repeated
        if not repeated and FOLD in g.columns:  # one fold per network: the fold says nothing
            dup = g[g.duplicated(["scenario_id", "model_id"], keep="first")]
            if len(dup):
                problems.append(f"{source}: track {track_name}: {len(dup)} network(s) predicted twice (its split tests "
                                f"each network once; fold is only for repeated draws): {_examples(dup['model_id'])}")
            g = g.drop(columns=FOLD)
        if repeated and (FOLD not in g.columns or g[FOLD].isna().any()):
            n = len(g) if FOLD not in g.columns else int(g[FOLD].isna().sum())
            problems.append(f"{source}: track {track_name}: fold: missing on {n} row(s); this track repeats its "
                            f"draws (folds {_examples(sorted({f.fold for f in split.folds}))}), predict each fold")
            continue
        for sid in data.scenario_ids:
            e = data.measured(sid)
            test_names = set(split.test_names(sid))
            test = e[e["name"].isin(test_names)][["model_id", "name", "latency_ms"]]
            train_ids = set(e["model_id"]) - set(test["model_id"])
            got = g[g["scenario_id"] == sid]
            folds = sorted({f.fold for f in split.for_scenario(sid)}) if repeated else [None]
            if repeated:
                odd = sorted(set(got[FOLD].astype(int)) - set(folds))
                if odd:
                    problems.append(f"{source}: track {track_name}, {sid}: fold(s) {_examples(odd)} not in the split "
                                    f"(its folds: {_examples(folds)})")
            for fold in folds:
                part = got if fold is None else got[got[FOLD] == fold]
                where = f"{sid}" if fold is None else f"{sid} fold {fold}"
                outside = part[~part["model_id"].isin(set(test["model_id"]))]["model_id"].tolist()
                if outside:
                    kind = "training networks" if set(outside) <= train_ids else "networks not in the test split"
                    problems.append(f"{source}: track {track_name}, {where}: {len(outside)} prediction(s) for {kind}: "
                                    f"{_examples(outside)}")
                missing = sorted(set(test["model_id"]) - set(part["model_id"]))
                if missing:
                    problems.append(f"{source}: track {track_name}, {where}: {len(missing)} test network(s) not predicted: "
                                    f"{_examples(missing)}")
                j = test.merge(part[["model_id", "predicted_ms"]].drop_duplicates("model_id"), on="model_id", how="inner")
                rows.append(j.assign(scenario_id=sid, fold=fold if fold is not None else 0))
        if rows:
            cols = ["scenario_id", "model_id", "name", "predicted_ms", "latency_ms"] + ([FOLD] if repeated else [])
            out[track_name] = pd.concat(rows, ignore_index=True)[cols]
    return out


def validate(predictions: str | Path, metadata: str | Path, roots: Mapping[str, Any] | None = None,
             splits_dir: Path | None = None, kind: str | None = None) -> Checked:
    """Read and check a submission; raise SubmissionError listing every problem. ``kind=
    "submission"``: a submitter's files (``kind: baseline`` refused)."""
    problems: list[str] = []
    meta = read_metadata(metadata, problems, kind=kind)
    df = read_predictions(predictions, problems)
    tracks = {}
    if df is not None and not problems:
        tracks = check_against_tracks(df, str(predictions), roots, splits_dir, problems)
    elif df is not None:
        # the file itself is broken: still report what the track checks would say
        clean = df.dropna(subset=["track", "scenario_id", "model_id"])
        check_against_tracks(clean, str(predictions), roots, splits_dir, problems)
    if problems:
        raise SubmissionError(problems)
    return Checked(meta=meta or {}, tracks=tracks)


__all__ = ["COLUMNS", "LIMITS", "META_REQUIRED", "Checked", "SubmissionError", "check_entry_name", "read_predictions",
           "read_metadata", "reserved_names", "check_against_tracks", "validate"]
