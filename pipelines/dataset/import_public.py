"""The ``import-public`` entry: the public importers (:data:`IMPORTERS`) into one folder.

:func:`run_import` writes the five parquet tables, ``import_problems.csv`` and the dataset card
(DATASET.md + plots). It sits above the importers and their shared machinery
(:mod:`.importers`), which import nothing from here.
"""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from foundation.atomic import atomic_path

from .help import import_help
from .importers import KINDS, ImportProblem, ImportResult, merge_tables
from .qaihub import import_qaihub
from .schema import TABLES, check_tables
from .usc import import_usc

IMPORTERS = {"usc": import_usc, "help": import_help, "qaihub": import_qaihub}  # config section -> importer


def run_import(cfg_usc: Any = None, cfg_help: Any = None, out_dir: str | Path = "data/public",
               progress: bool = True, card: bool = True, cfg_qaihub: Any = None, catalog: Any = None) -> dict[str, Any]:
    """Import the public datasets whose config is given (``cfg_<name>`` of :data:`IMPORTERS`;
    ``None`` skips one) into ``out_dir``; a network several datasets hold is kept as the first has it.
    ``catalog``: the device catalog every importer describes devices from (as theirs, :mod:`.importers`).

    Writes ``{models,scenarios,e2e,ops,kernels}.parquet`` (checked against the schema),
    ``import_problems.csv`` (file, row, column, message, kind; header only when clean) and, with
    ``card``, DATASET.md and its plots. Deterministic: the same inputs give the same files. With
    ``progress``, progress bars and every problem line are printed (else nothing:
    :func:`problem_summary` is the short form). Returns ``{"counts": {table: rows}, "problems":
    [ImportProblem], "notes": [str]}``.
    """
    from .load import save_tables

    configs = {"usc": cfg_usc, "help": cfg_help, "qaihub": cfg_qaihub}
    if all(c is None for c in configs.values()):
        raise ValueError(f"run_import: give at least one of {', '.join(f'cfg_{n}' for n in IMPORTERS)}")
    results: list[ImportResult] = [IMPORTERS[n](c, progress=progress, catalog=catalog)
                                   for n, c in configs.items() if c is not None]
    tables = merge_tables(*results)
    check_tables(tables)
    out = Path(out_dir)
    save_tables(tables, out)
    problems = [p for r in results for p in r.problems]
    notes = [n for r in results for n in r.notes]
    _write_problems(out / "import_problems.csv", problems)
    if card:
        from .card import write_card
        from .load import Dataset

        write_card(Dataset(tables, path=out, check=False), out, notes=notes)
    if progress:
        for r in results:
            print(r.summary())
        for p in problems:
            print(f"  problem ({p.kind}): {p}")
    return {"counts": {n: len(tables[n]) for n in TABLES}, "problems": problems, "notes": notes}


PROBLEMS_HEADER = ("file", "row", "column", "message", "kind")  # import_problems.csv


def _write_problems(path: Path, problems: list[ImportProblem]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(PROBLEMS_HEADER)
        for p in problems:
            w.writerow([p.file, "" if p.row is None else p.row, p.column or "", p.message, p.kind])


def problem_summary(problems: list[ImportProblem], path: str | Path, first: int = 5) -> list[str]:
    """The problems in a few lines (what ``import-public -q`` prints): the count of each kind, the
    first ``first`` problem lines and the file that lists them all; no line when there is none."""
    if not problems:
        return []
    counts = Counter(p.kind for p in problems)
    kinds = ", ".join(f"{counts[k]} {k}" for k in (*KINDS, *sorted(set(counts) - set(KINDS))) if counts[k])
    shown = problems[:first]
    lines = [f"{len(problems)} problem(s): {kinds}; all in {path}" + (f"; the first {len(shown)}:"
                                                                      if len(shown) < len(problems) else ":")]
    lines += [f"  problem ({p.kind}): {p}" for p in shown]
    return lines
