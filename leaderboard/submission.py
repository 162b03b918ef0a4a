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

Files come from strangers, so reading is bounded (:data:`LIMITS`, ``SUBMISSION`` in
foundation/limits.py: bytes, rows, columns, line and cell lengths, metadata size after expanding
YAML aliases, text lengths), each bound checked before the expensive part: a CSV's header and
line lengths in one streaming pass before pandas parses it, a parquet file's rows, columns and
unpacked size from its footer, then only the used columns read with their text kept dictionary
encoded until its size is known. Every problem line shows submitted text inertly
(:func:`foundation.printable.printable`: no terminal escape or bidi character reaches a reviewer).
Entry names follow one policy (:func:`check_entry_name`): registered predictor names are the
baselines', and a submission cannot call itself ``kind: baseline``. docs/leaderboard.md states
the policy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from foundation import limits
from foundation.printable import printable

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
    """A problem as one inert line of bounded length: submission text may hold newlines, be long
    and hold terminal escapes or bidi characters (shown as ``\\x1b``, ``\\u202e``: printable())."""
    s = " ".join(str(text).split("\n"))
    s = printable(s.replace("\r", " "))
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


def _at_most(key: str) -> str:
    """A bound as a refusal names it: its value and its key in foundation/limits.py."""
    return f"(at most {LIMITS[key]}: {key} in foundation/limits.py)"


def _unreadable(p: Path, e: BaseException) -> str:
    return f"{p}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def _columns(p: Path, names: list[str], where: str, problems: list[str]) -> list[str] | None:
    """The columns to read, from the file's column names (read before its data): the four, and
    ``fold`` if present. Missing, duplicate or unexpected names are problems; None: not read."""
    if len(names) > LIMITS["predictions_columns"]:
        problems.append(f"{p}: {where}{len(names)} columns {_at_most('predictions_columns')}; "
                        f"expected exactly {', '.join(COLUMNS)}; not read")
        return None
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        problems.append(f"{p}: {where}duplicate column(s) {', '.join(map(repr, dup))}; not read")
        return None
    missing = [c for c in COLUMNS if c not in names]
    extra = [n for n in names if n not in COLUMNS and n != FOLD]
    if missing:
        problems.append(f"{p}: missing column(s) {', '.join(missing)} (expected exactly {', '.join(COLUMNS)})")
    if extra:
        problems.append(f"{p}: unexpected column(s) {', '.join(n if n else repr(n) for n in extra)} "
                        f"(expected exactly {', '.join(COLUMNS)})")
    return None if missing else [c for c in names if c in COLUMNS or c == FOLD]


# ---------------------------------------------------------------- CSV: bounded before pandas parses
class _Refused(Exception):
    """A bound a CSV file exceeds (the problem line)."""


def _bounded_lines(f: Any, p: Path, count: list[int]) -> Any:
    """The file's lines, each refused past ``line_chars`` before it is held whole (``readline``
    reads at most the bound and a little more), all together past ``predictions_bytes``."""
    limit, total = LIMITS["line_chars"], 0
    while True:
        line = f.readline(limit + 3)  # the longest line allowed, its terminator (\r\n), one more
        if not line:
            return
        count[0] += 1
        total += len(line)
        if len(line.rstrip("\r\n")) > limit:
            raise _Refused(f"{p}: line {count[0]}: more than {limit} characters {_at_most('line_chars')}; not read")
        if total > LIMITS["predictions_bytes"]:  # (the size was checked; a file that grows while read)
            raise _Refused(f"{p}: more than {LIMITS['predictions_bytes']} characters {_at_most('predictions_bytes')}; not read")
        yield line


def _csv_precheck(p: Path, problems: list[str]) -> list[str] | None:
    """One streaming pass over a CSV file with the csv module, before pandas parses it: line
    lengths, the header's columns, every row's field count and cell lengths, the number of rows.
    Returns the header's column names, or None (a problem says which bound, on which line)."""
    import csv

    cols, cells, rows_max = LIMITS["predictions_columns"], LIMITS["cell_chars"], LIMITS["predictions_rows"]
    count = [0]
    header: list[str] | None = None
    rows = end = 0  # end: the line the last record read ends on (a quoted cell may span lines)
    try:
        with open(p, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(_bounded_lines(f, p, count))
            for rec in reader:
                n, end = end + 1, reader.line_num  # n: the record's first line
                if not rec:  # a blank line (pandas skips them too)
                    continue
                if len(rec) > cols and header is None:
                    raise _Refused(f"{p}: line {n}: {len(rec)} columns {_at_most('predictions_columns')}; "
                                   f"expected exactly {', '.join(COLUMNS)}; not read")
                longest = max(map(len, rec))
                if longest > cells:
                    raise _Refused(f"{p}: line {n}: a cell of {longest} characters {_at_most('cell_chars')}; not read")
                if header is None:
                    header = rec
                    continue
                if len(rec) > len(header):
                    raise _Refused(f"{p}: line {n}: {len(rec)} fields, the header has {len(header)}; not read")
                rows += 1
                if rows > rows_max:
                    raise _Refused(f"{p}: line {n}: more than {rows_max} rows {_at_most('predictions_rows')}; not read")
    except _Refused as e:
        problems.append(str(e))
        return None
    except csv.Error as e:  # e.g. a quoted cell longer than the csv module's own field limit
        msg = str(e)
        if "field larger than field limit" in msg:  # a quoted cell over many lines: it starts after the last record
            problems.append(f"{p}: line {end + 1}: a cell of more than {cells} characters {_at_most('cell_chars')}; not read")
        else:
            problems.append(f"{p}: line {count[0]}: unreadable CSV ({msg}); not read")
        return None
    except (OSError, UnicodeError) as e:
        problems.append(_unreadable(p, e))
        return None
    if header is None:
        problems.append(f"{p}: empty (expected a header line: {', '.join(COLUMNS)})")
        return None
    return header


def _read_csv(p: Path, problems: list[str]) -> pd.DataFrame | None:
    names = _csv_precheck(p, problems)
    if names is None:
        return None
    use = _columns(p, names, "line 1: ", problems)
    if use is None:
        return None
    return pd.read_csv(p, usecols=use, dtype={c: "string" for c in ("track", "scenario_id", "model_id") if c in use},
                       keep_default_na=True, nrows=LIMITS["predictions_rows"] + 1, encoding="utf-8-sig")


# ---------------------------------------------------------------- parquet: the footer, then the used columns
def _parquet_precheck(p: Path, problems: list[str]) -> tuple[Any, list[str]] | None:
    """Refuse a parquet file by its footer alone: too many rows (a 1 MB file of dictionary-encoded
    rows can decode to gigabytes), too many columns, or used columns that unpack to more than
    ``predictions_bytes`` (compressed pages inflate). Returns the file and the columns to read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
        md = pf.metadata
        index = {c for c in (pf.schema_arrow.pandas_metadata or {}).get("index_columns", []) if isinstance(c, str)}
        names = [n for n in pf.schema_arrow.names if n not in index]  # (pandas' stored index: not a column)
    except (OSError, ValueError, TypeError, pa.ArrowException) as e:  # an unreadable file is one reported problem
        problems.append(_unreadable(p, e))
        return None
    if md.num_rows > LIMITS["predictions_rows"]:
        problems.append(f"{p}: {md.num_rows} rows {_at_most('predictions_rows')}; not read")
        return None
    if md.num_columns > LIMITS["predictions_columns"]:
        problems.append(f"{p}: {md.num_columns} columns {_at_most('predictions_columns')}; "
                        f"expected exactly {', '.join(COLUMNS)}; not read")
        return None
    use = _columns(p, names, "", problems)
    if use is None:
        return None
    nested = [c for c in use if pa.types.is_nested(pf.schema_arrow.field(c).type)]
    if nested:  # lists of values: rows that each unpack to any number of cells
        problems.append(f"{p}: {', '.join(nested)}: nested values ({pf.schema_arrow.field(nested[0]).type}), "
                        "expected one number or text per cell; not read")
        return None
    unpacked = sum(md.row_group(g).column(c).total_uncompressed_size for g in range(md.num_row_groups)
                   for c in range(md.num_columns) if md.row_group(g).column(c).path_in_schema.split(".")[0] in use)
    if unpacked > LIMITS["predictions_bytes"]:
        problems.append(f"{p}: its columns unpack to {unpacked} bytes {_at_most('predictions_bytes')}; not read")
        return None
    return pf, use


def _read_parquet(p: Path, problems: list[str]) -> pd.DataFrame | None:
    """Only the used columns, text read as dictionaries (each distinct value once): every cell's
    length and the text's decoded size are checked before anything is expanded."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pre = _parquet_precheck(p, problems)
    if pre is None:
        return None
    pf, use = pre
    text = [c.path for c in map(pf.schema.column, range(len(pf.schema))) if c.path in use and c.physical_type == "BYTE_ARRAY"]
    table = pq.read_table(p, columns=use, read_dictionary=text)
    cells, decoded = LIMITS["cell_chars"], 0
    for name in use:
        col = table.column(name)
        typ = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        if not (pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_binary(typ)
                or pa.types.is_large_binary(typ)):
            continue
        length = pc.utf8_length if (pa.types.is_string(typ) or pa.types.is_large_string(typ)) else pc.binary_length
        offset = 0
        for chunk in col.chunks:
            lens = pc.take(length(chunk.dictionary), chunk.indices) if pa.types.is_dictionary(chunk.type) else length(chunk)
            longest = pc.max(lens).as_py() or 0
            if longest > cells:
                i = offset + pc.index(pc.greater(lens, cells), True).as_py()
                problems.append(f"{p}: {_row_label(p, i)}: {name}: a cell of {longest} characters "
                                f"{_at_most('cell_chars')}; not read")
                return None
            decoded += pc.sum(lens).as_py() or 0
            offset += len(chunk)
        if decoded > LIMITS["predictions_bytes"]:
            problems.append(f"{p}: its text decodes to more than {LIMITS['predictions_bytes']} characters "
                            f"{_at_most('predictions_bytes')}; not read")
            return None
    for name in text:  # checked: back to what the file stores (a categorical column stays one)
        if not pa.types.is_dictionary(pf.schema_arrow.field(name).type) and pa.types.is_dictionary(table.column(name).type):
            i = table.schema.get_field_index(name)
            table = table.set_column(i, name, pa.chunked_array([c.dictionary_decode() for c in table.column(name).chunks],
                                                               type=table.column(name).type.value_type))
    return table.to_pandas()


def read_predictions(path: str | Path, problems: list[str]) -> pd.DataFrame | None:
    """Read a predictions file within :data:`LIMITS` (problems appended, one line each; None if
    it was not read) and check its values row by row."""
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
        problems.append(f"{p}: {size} bytes {_at_most('predictions_bytes')}; not read")
        return None
    try:
        df = _read_parquet(p, problems) if suffix == ".parquet" else _read_csv(p, problems)
    except Exception as e:  # noqa: BLE001 - any unreadable file (MemoryError included) is one reported problem
        problems.append(_unreadable(p, e))
        return None
    if df is None:
        return None
    if len(df) > LIMITS["predictions_rows"]:
        problems.append(f"{p}: more than {LIMITS['predictions_rows']} rows {_at_most('predictions_rows')}; not read")
        return None
    try:
        return _check_predictions(p, df, problems)
    except MemoryError:
        problems.append(f"{p}: too large to check in memory")
    except (TypeError, ValueError) as e:  # e.g. nested values in a parquet column
        problems.append(f"{p}: unreadable values ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    return None


def _check_predictions(p: Path, df: pd.DataFrame, problems: list[str]) -> pd.DataFrame | None:
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
    from foundation.safeload import LoadError, load_json_text, load_yaml_text, read_text

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
    unavailable: dict[str, str] = field(default_factory=dict)  # track -> why it has no data here (not checked)


def check_against_tracks(df: pd.DataFrame, source: str, roots: Mapping[str, Any] | None,
                         splits_dir: Path | None, problems: list[str],
                         unavailable: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """The predictions joined with each track's measured test latencies; every fault appended to
    ``problems``. A track with no data on this machine is a problem too, unless ``unavailable`` is
    given: then the track is left out and its reason recorded there (the board's evaluation on a
    checkout without, say, the public data: the entry is not wrong, it cannot be checked here)."""
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
            if unavailable is not None:
                unavailable[track_name] = data.reason
            else:
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
             splits_dir: Path | None = None, kind: str | None = None, skip_unavailable: bool = False) -> Checked:
    """Read and check a submission; raise SubmissionError listing every problem. ``kind=
    "submission"``: a submitter's files (``kind: baseline`` refused). ``skip_unavailable``: a
    track without data here is left out (``Checked.unavailable``) instead of refused."""
    problems: list[str] = []
    meta = read_metadata(metadata, problems, kind=kind)
    df = read_predictions(predictions, problems)
    tracks = {}
    unavailable: dict[str, str] | None = {} if skip_unavailable else None
    if df is not None and not problems:
        tracks = check_against_tracks(df, str(predictions), roots, splits_dir, problems, unavailable)
    elif df is not None:
        # the file itself is broken: still report what the track checks would say
        clean = df.dropna(subset=["track", "scenario_id", "model_id"])
        check_against_tracks(clean, str(predictions), roots, splits_dir, problems, unavailable)
    if problems:
        raise SubmissionError(problems)
    return Checked(meta=meta or {}, tracks=tracks, unavailable=unavailable or {})


__all__ = ["COLUMNS", "LIMITS", "META_REQUIRED", "Checked", "SubmissionError", "check_entry_name", "read_predictions",
           "read_metadata", "reserved_names", "check_against_tracks", "validate"]
