"""``leaderboard``: the command line of the board.

    leaderboard tracks                               # every track, with data or why not
    leaderboard splits [--track T ...] [--check]     # freeze missing split files / verify them
    leaderboard train --predictor NAME [--track T ...] [--param k=v ...]   # a baseline -> an entry
    leaderboard validate PREDICTIONS METADATA [--name ENTRY]   # what submit would refuse, every problem
    leaderboard evaluate PREDICTIONS METADATA        # score a submission (prints the metrics)
    leaderboard evaluate --entries DIR ...           # score every entry folder -> results/
    leaderboard submit PREDICTIONS METADATA --name ENTRY   # validate, file it, score it
    leaderboard render                               # results/ -> README.md + site/index.html

Data roots: ``--public`` (default data/public) and ``--host`` (default the committed release
datasets/host-v1; e.g. ``--host data/dataset`` scores your own assembled dataset), or the
environment variables LATBENCH_PUBLIC_DATA / LATBENCH_HOST_DATA (``leaderboard.tracks.data_roots``,
defaults in ``leaderboard.tracks.DATA_ROOTS``). Errors are one line,
``leaderboard: error: ...``, exit status 2 (invalid submission: 1).

Entry names follow one policy (:func:`leaderboard.submission.check_entry_name`): a submission
never takes a registered predictor's name, never says ``kind: baseline``, and never replaces or
rescores a baseline's results; entries filed under ``leaderboard/submissions/`` are held to the
same rules when the board is scored. ``validate``, ``evaluate`` and ``submit`` check a submission
through one function (:func:`submit_checks`), so ``validate`` refuses what ``submit`` would, with the
same line (``validate --name`` adds the name, folder and results checks ``submit`` makes).

Everything printed that a submitter controls (ids, names, file names, problem lines) goes through
:func:`foundation.printable.printable`: no terminal escape or bidi character reaches the reviewer.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

from foundation.printable import printable

HERE = Path(__file__).resolve().parent


class CliError(ValueError):
    """A refused command (one line; exit status 2)."""

RESULTS = HERE / "results"
SUBMISSIONS = HERE / "submissions"


def say(text: Any = "", file: Any = None) -> None:
    """Print text that may hold a submitter's words: each line through printable() (control,
    escape and bidi characters shown as ``\\x1b``, ``\\u202e``)."""
    print("\n".join(printable(line) for line in str(text).split("\n")), file=file or sys.stdout)


def _roots(args: argparse.Namespace) -> dict[str, str]:
    from .tracks import data_roots

    return data_roots(args.public, args.host)


def _value(text: str) -> Any:
    from foundation.safeload import LoadError, load_yaml_text

    try:
        return load_yaml_text(text, "--param", max_nodes=10_000)
    except LoadError as e:
        raise CliError(f"{e}") from None


def cmd_tracks(args: argparse.Namespace) -> int:
    from .run import available
    from .tracks import TRACKS

    ok, skipped = available(TRACKS.names(), _roots(args), write_splits=False)
    for name in TRACKS.names():
        t = TRACKS.get(name)
        if name in ok:
            data, split = ok[name]
            print(f"{name:22s} v{t.version}  {len(data.scenario_ids):4d} scenarios {len(data.networks):6d} networks  {t.title}")
        else:
            print(f"{name:22s} v{t.version}  skipped: {skipped[name]}")
    return 0


def cmd_splits(args: argparse.Namespace) -> int:
    from .run import available
    from .tracks import TRACKS, compute_split, read_split

    names = args.track or TRACKS.names()
    ok, skipped = available(names, _roots(args), write_splits=not args.check)
    bad = 0
    for name in names:
        if name in skipped:
            print(f"{name}: skipped ({skipped[name]})")
            continue
        data, split = ok[name]
        if args.check:
            again = compute_split(data)
            same = again.folds == split.folds
            bad += not same
            print(f"{name}: {'matches' if same else 'DIFFERS from'} {TRACKS.get(name).split_file.name}")
        else:
            print(f"{name}: {TRACKS.get(name).split_file.name} ({len(split.folds)} fold(s))")
    return 1 if bad else 0


def cmd_train(args: argparse.Namespace) -> int:
    from .run import train_entry
    from .tracks import TRACKS

    params = {}
    for kv in args.param or []:
        k, sep, v = kv.partition("=")
        if not sep:
            raise CliError(f"--param {kv!r}: expected key=value")
        params[k] = _value(v)
    from .train import predictor_params

    params = predictor_params(args.predictor, params)  # conf/predictor/<name>.yaml, then --param
    out = train_entry(args.predictor, params, args.track or TRACKS.names(), _roots(args), args.out, entry=args.entry)
    print(out)
    return 0


def submit_checks(args: argparse.Namespace, name: str | None) -> tuple[Path | None, Any]:
    """Every check ``submit`` makes before it writes, in its order; ``validate`` and ``evaluate``
    call it too, so they refuse exactly what ``submit`` would, with the same line. The entry name
    (``--name``: the name policy, :func:`~leaderboard.submission.check_entry_name`: reserved
    names, path-like names), the files as a submission (``kind: baseline`` refused), then where it
    would be filed: an existing entry folder (unless ``--replace``) and results of a baseline under
    that name. Raises CliError (the name, the folder: exit 2) or SubmissionError (the files: exit
    1); returns the entry folder (None without a name: the name checks are skipped) and the
    checked submission."""
    from .submission import check_entry_name, validate

    if name is not None:
        why = check_entry_name(name, kind="submission")
        if why:
            raise CliError(f"--name: {why}")
    checked = validate(args.predictions, args.metadata, _roots(args), kind="submission")
    if name is None:
        return None, checked
    root = Path(args.submissions)
    entry = root / name
    if entry.resolve().parent != root.resolve():  # the name policy makes this impossible; never write outside
        raise CliError(f"--name: {name!r} is not a folder inside {root}")
    if (entry.exists() or entry.is_symlink()) and not args.replace:
        raise CliError(f"{entry} exists (choose another --name, or --replace)")
    if entry.is_symlink() or (entry.exists() and not entry.is_dir()):
        raise CliError(f"{entry} is not an entry folder; not replaced")
    owned = [t for t in checked.tracks if _baseline_result(Path(args.results), t, name)]
    if owned:
        raise CliError(f"--name: {name!r} has results of a baseline (or of an unreadable "
                       f"entry) on {', '.join(owned)}; they are not replaced; choose another name")
    return entry, checked


def _entry_name(args: argparse.Namespace) -> str | None:
    """``--name`` as submit takes it: stripped and lower-cased, nothing else (no silent renaming)."""
    return args.name.strip().lower() if getattr(args, "name", None) is not None else None


def cmd_validate(args: argparse.Namespace) -> int:
    entry, checked = submit_checks(args, _entry_name(args))
    for name, df in checked.tracks.items():
        say(f"{name}: {len(df)} predictions in {df['scenario_id'].nunique()} scenario(s): valid")
    if entry is None:
        say("entry name not checked: give --name NAME to check it as submit does")
    else:
        say(f"submit would file it as {entry}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .run import evaluate_entry, write_status

    if args.entries:
        results = Path(args.results)
        if args.clean and results.is_dir():
            for p in results.glob("*/*.json"):
                if _is_result_file(p):  # only result files: --results may point at any folder
                    p.unlink()
        from .submission import SubmissionError

        write_status(_roots(args), results)
        from .noise import write_noise_floor

        write_noise_floor(_roots(args), results)  # the board's reference row: measurement against measurement
        rejected: dict[str, list[dict[str, str | None]]] = {}  # entry -> [{"track": name or None, "problem": ...}]
        scored: dict[str, tuple[Path, bool]] = {}  # entry name -> (its folder, submitted): the first keeps the name
        for folder in args.entries:
            if not Path(folder).is_dir():
                continue
            submitted = _is_submissions_folder(Path(folder), args)
            for entry in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
                refused = _entry_refusal(entry, submitted, scored)
                if refused:
                    key = entry.name if entry.name not in rejected else f"{entry.name} ({entry.parent})"
                    rejected[key] = [{"track": None, "problem": refused}]
                    say(f"{entry.name[:24]:24s} REJECTED: {refused}")
                    continue
                scored.setdefault(entry.name, (entry, submitted))
                if not submitted and _no_predictions(entry):  # every track failed or was skipped:
                    say(f"{entry.name:24s} no predictions (the board lists why per track)")
                    continue  # its run.json says why, shown per track (note_absent_predictors)
                try:
                    docs = evaluate_entry(entry, _roots(args), results)
                except SubmissionError as e:  # invalid tracks are reported and left off; the rest counts
                    rejected[entry.name] = e.records()
                    say(f"{entry.name:24s} REJECTED: {e.problems[0]}" + (f" (+{len(e.problems) - 1} more)" if len(e.problems) > 1 else ""))
                    partial = getattr(e, "partial", None)
                    if partial is None or not partial.tracks:
                        continue
                    docs = evaluate_entry(entry, _roots(args), results, checked=partial)
                for name, doc in docs.items():
                    agg = doc["result"]["aggregate"]
                    say(f"{entry.name:24s} {name:22s} " + " ".join(f"{k}={v:.4g}" for k, v in agg.items() if v is not None))
        (results / "rejected.json").write_text(json.dumps(rejected, indent=1) + "\n")
        from .run import note_absent_predictors

        # the reasons come from the project's own training runs, never from a submitter's folder
        note_absent_predictors(results, [f for f in args.entries
                                         if Path(f).is_dir() and not _is_submissions_folder(Path(f), args)])
        return 0
    if not (args.predictions and args.metadata):
        raise CliError("evaluate: give PREDICTIONS METADATA, or --entries DIR")
    import tempfile

    from .run import _clean

    _, checked = submit_checks(args, None)  # what validate says: the same files refused, the same lines
    with tempfile.TemporaryDirectory() as tmp:
        entry = Path(tmp) / "submission"
        entry.mkdir()
        _copy_submission(args.predictions, args.metadata, entry)
        docs = evaluate_entry(entry, _roots(args), Path(tmp) / "results", checked=checked)
    # strict JSON: a metric that overflowed is null, never Infinity/NaN
    print(json.dumps(_clean({k: v["result"] for k, v in docs.items()}), indent=1, allow_nan=False))
    return 0


def _no_predictions(entry: Path) -> bool:
    """A baseline entry folder whose training produced no prediction (or no file at all)."""
    import pyarrow.parquet as pq

    path = entry / "predictions.parquet"
    return not path.is_file() or pq.ParquetFile(path).metadata.num_rows == 0


def _is_result_file(p: Path) -> bool:
    """``<results>/<track>/<entry>.json`` written by evaluate_entry (entry, track, result inside)."""
    from foundation.safeload import LoadError, load_json

    if p.is_symlink() or not p.is_file():
        return False
    try:
        doc = load_json(p)
    except LoadError:
        return False
    return isinstance(doc, dict) and doc.get("track") == p.parent.name and doc.get("entry") == p.stem \
        and isinstance(doc.get("result"), dict)


def _is_submissions_folder(folder: Path, args: argparse.Namespace) -> bool:
    """Entries in this folder were filed by submitters (leaderboard/submissions/, or --submitted)."""
    marked = [SUBMISSIONS, *(Path(p) for p in (getattr(args, "submitted", None) or []))]
    return any(folder.resolve() == m.resolve() for m in marked)


def _entry_refusal(entry: Path, submitted: bool, scored: dict[str, tuple[Path, bool]]) -> str | None:
    """Why an entry folder may not be scored under its name (one inert line), or None: the name
    policy, and a filed submission's metadata read as ``submit`` reads it (``kind: baseline``)."""
    from .submission import check_entry_name, one_line, read_metadata

    if entry.name in scored and (submitted or scored[entry.name][1]):
        return one_line(f"entry name {entry.name!r} already taken by {scored[entry.name][0]}")
    # a baseline may come in several of the project's folders (the public tracks' committed
    # entries, the host tracks' committed ones): one entry, each folder with its own tracks
    why = check_entry_name(entry.name, kind="submission" if submitted else "baseline")
    if why or not submitted:
        return one_line(why) if why else None
    meta = next((p for p in (entry / "metadata.yaml", entry / "metadata.yml", entry / "metadata.json") if p.is_file()), None)
    problems: list[str] = []
    if meta is not None and read_metadata(meta, problems, kind="submission") is None:
        return one_line(problems[0] if problems else f"{meta}: invalid")
    return None


def _copy_submission(pred: str, meta: str, entry: Path) -> None:
    shutil.copyfile(pred, entry / ("predictions" + Path(pred).suffix.lower()))
    shutil.copyfile(meta, entry / ("metadata" + Path(meta).suffix.lower()))


def _baseline_result(results: Path, track: str, name: str) -> bool:
    """Whether ``results/<track>/<name>.json`` is a baseline's (its metadata says kind baseline)."""
    from foundation.safeload import LoadError, load_json

    p = results / track / f"{name}.json"
    if not p.exists():
        return False
    try:
        doc = load_json(p)
    except LoadError:
        return True  # unreadable: not provably a submission's, so not replaced
    return not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict) or doc["meta"].get("kind") != "submission"


def cmd_submit(args: argparse.Namespace) -> int:
    from .run import evaluate_entry

    entry, checked = submit_checks(args, _entry_name(args))
    assert entry is not None  # (--name is required)
    entry.mkdir(parents=True, exist_ok=True)
    for old in entry.iterdir():  # --replace: the new files only (predictions.csv must not shadow a new .parquet)
        if old.is_file() and old.name.startswith(("predictions.", "metadata.")):
            old.unlink()
    _copy_submission(args.predictions, args.metadata, entry)
    for track in evaluate_entry(entry, _roots(args), args.results, checked=checked):
        say(f"{entry.name}: entered on {track}")
    say("run `leaderboard render` to update the board")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from .render import load_results, render
    from .summary import write_summary

    readme, site = render(args.results, args.readme, args.site)
    print(readme)
    print(site)
    for path in write_summary(*load_results(args.results), Path(args.site)):  # DVC's metrics and plots
        print(path)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, its one-line errors (which quote the arguments: file names) shown inertly."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="leaderboard", description="The latbench leaderboard: tracks, submissions, the board.")
    p.add_argument("--public", help="public data folder (default data/public; env LATBENCH_PUBLIC_DATA)")
    p.add_argument("--host", help="host dataset folder (default the committed release datasets/host-v1; "
                                  "env LATBENCH_HOST_DATA; e.g. data/dataset, the main job's own)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("tracks", help="list tracks and whether their data is here")
    s.set_defaults(fn=cmd_tracks)
    s = sub.add_parser("splits", help="freeze missing split files (or --check them)")
    s.add_argument("--track", action="append")
    s.add_argument("--check", action="store_true", help="recompute and compare with the files; write nothing")
    s.set_defaults(fn=cmd_splits)
    s = sub.add_parser("train", help="fit a registered predictor on tracks and write its entry",
                       description="Fit a registered predictor on every fold and scenario of the given tracks "
                                   "(the frozen splits) and write its entry: predictions and metadata per track, "
                                   "scored by `leaderboard evaluate`. The board's committed entries are under "
                                   "leaderboard/entries/<data root>.")
    s.add_argument("--predictor", required=True,
                   help="a registered predictor (leaderboard/baselines, e.g. typed_nnls, nnmeter, gnn_ensemble)")
    s.add_argument("--track", action="append", help="a track (repeat; default: all with data)")
    s.add_argument("--param", action="append", help="predictor parameter key=value (YAML value)")
    s.add_argument("--entry", help="entry name (default: the predictor's)")
    s.add_argument("--out", default="data/leaderboard/entries",
                   help="folder of entry folders (default: %(default)s; the board's: leaderboard/entries/host)")
    s.set_defaults(fn=cmd_train)
    for name, fn, hlp in (("validate", cmd_validate, "check a submission"), ("evaluate", cmd_evaluate, "score a submission or entry folders")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("predictions", nargs="?" if name == "evaluate" else None)
        s.add_argument("metadata", nargs="?" if name == "evaluate" else None)
        if name == "validate":  # submit's own options: validate --name checks what submit would
            s.add_argument("--name", help="also check this entry name, its folder and results as submit does")
            s.add_argument("--replace", action="store_true", help="as submit --replace: an existing folder is no refusal")
            s.add_argument("--submissions", default=str(SUBMISSIONS))
            s.add_argument("--results", default=str(RESULTS))
        if name == "evaluate":
            s.add_argument("--entries", action="append", help="a folder of entry folders (repeat)")
            s.add_argument("--results", default=str(RESULTS))
            s.add_argument("--clean", action="store_true", help="remove old result files first")
            s.add_argument("--submitted", action="append",
                           help="an --entries folder whose entries submitters filed (default: leaderboard/submissions)")
        s.set_defaults(fn=fn)
    s = sub.add_parser("submit", help="validate a submission, file it under submissions/ and score it")
    s.add_argument("predictions")
    s.add_argument("metadata")
    s.add_argument("--name", required=True,
                   help="entry name: 1-64 of a-z 0-9 - _, not a registered predictor's (docs/leaderboard.md)")
    s.add_argument("--replace", action="store_true")
    s.add_argument("--submissions", default=str(SUBMISSIONS))
    s.add_argument("--results", default=str(RESULTS))
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("render", help="write README.md and site/index.html from the results")
    s.add_argument("--results", default=str(RESULTS))
    s.add_argument("--readme", default=str(HERE / "README.md"))
    s.add_argument("--site", default=str(HERE / "site"))
    s.set_defaults(fn=cmd_render)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from foundation.registry import UnknownName

    from .evaluator import EvaluationError
    from .submission import SubmissionError
    from .tracks import TrackError

    try:
        return args.fn(args)
    except SubmissionError as e:  # one problem: one line; more: a count, then one line each
        say("leaderboard: invalid submission: " + (e.problems[0] if len(e.problems) == 1 else str(e)), file=sys.stderr)
        return 1
    except (TrackError, EvaluationError, UnknownName, FileNotFoundError, CliError) as e:
        say(f"leaderboard: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
