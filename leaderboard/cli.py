"""``leaderboard``: the command line of the board.

    leaderboard tracks                               # every track, with data or why not
    leaderboard track list                           # every track: packaged or user, its file and split file
    leaderboard track new --template T --target DEVICE|GLOB --name N --out DIR   # a track for a new device
    leaderboard splits [--track T ...] [--check]     # freeze missing split files / verify them
    leaderboard train --predictor NAME [--track T ...] [--param k=v ...] [--scenarios GLOB ...]   # an entry
    leaderboard validate PREDICTIONS METADATA [--name ENTRY]   # what submit would refuse, every problem
    leaderboard evaluate PREDICTIONS METADATA        # score a submission (prints the metrics)
    leaderboard evaluate --entries DIR ...           # score entry folders -> data/leaderboard/results/
    leaderboard evaluate --board --entries DIR ...   # ... -> the committed board's leaderboard/results/
    leaderboard submit PREDICTIONS METADATA --name ENTRY   # validate, file it on the board, score it
    leaderboard render                               # data/leaderboard/results/ -> README.md + site/ beside it
    leaderboard render --board                       # leaderboard/results/ -> leaderboard/README.md + site/

Data roots: ``--public`` (default data/public) and ``--host`` (default the committed release
datasets/host-v1; e.g. ``--host data/dataset`` scores your own assembled dataset), or the
environment variables LATBENCH_PUBLIC_DATA / LATBENCH_HOST_DATA (``leaderboard.tracks.data_roots``,
defaults in ``leaderboard.tracks.DATA_ROOTS``). User tracks: ``--tracks DIR`` (repeat) and
``--splits DIR``, before or after the subcommand, or LATBENCH_TRACKS / LATBENCH_SPLITS
(``leaderboard.tracks.use_track_folders``). Results: ``evaluate`` and ``render`` read and write
the user's ``data/leaderboard/`` unless given ``--results`` or ``--board`` (the committed board,
what leaderboard/dvc.yaml runs); ``submit`` files on the board. Errors are one line,
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
# the committed board (--board) and the user's own (the default of evaluate --entries and render;
# relative to the working directory, beside leaderboard-train's data/leaderboard/entries)
BOARD = {"results": RESULTS, "readme": HERE / "README.md", "site": HERE / "site"}
USER_BOARD = {"results": Path("data/leaderboard/results"), "readme": Path("data/leaderboard/README.md"),
              "site": Path("data/leaderboard/site")}


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


def _split_name(t: Any) -> str:
    """A split file as the listings show it: its name for a packaged track, its path for a user's."""
    return t.split_file.name if t.packaged else str(t.split_file)


def cmd_splits(args: argparse.Namespace) -> int:
    from .run import available
    from .tracks import TRACKS, compute_split

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
            print(f"{name}: {'matches' if same else 'DIFFERS from'} {_split_name(TRACKS.get(name))}")
        else:
            print(f"{name}: {_split_name(TRACKS.get(name))} ({len(split.folds)} fold(s))")
    return 1 if bad else 0


def cmd_track_list(args: argparse.Namespace) -> int:
    """Every registered track: packaged or user, its file and its split file (no data read)."""
    from .tracks import TRACKS

    for name in TRACKS.names():
        t = TRACKS.get(name)
        split = t.split_file.relative_to(HERE.parent) if t.packaged else t.split_file
        print(f"{name:32s} v{t.version}  {t.data:6s}  {'packaged' if t.packaged else 'user':8s}  {t.path}  split: {split}")
    return 0


def cmd_track_new(args: argparse.Namespace) -> int:
    """A track file for a new target from a template track (:func:`leaderboard.tracks.derive_track`),
    checked as a track file and against the data, written to ``--out`` and never over a file."""
    import dataclasses

    import yaml

    from .protocols import ProtocolError
    from .tracks import (PACKAGED, TRACKS, TrackError, Unavailable, compute_split, derive_track, inside_package,
                         parse_track, resolve, track_folders, user_splits)

    folders = track_folders(args.tracks)
    out = Path(args.out) if args.out else (folders[0] if folders else None)
    if out is None:
        raise CliError("track new: --out: give the folder of your tracks (or --tracks DIR / LATBENCH_TRACKS)")
    if inside_package(out):
        raise CliError(f"track new: --out: {out} is inside the package; give a folder of your own")
    path = out / f"{args.name}.yaml"
    if args.name in PACKAGED:
        raise CliError(f"track new: --name: {args.name!r} is the packaged track {PACKAGED[args.name].path}")
    if args.name in TRACKS:
        raise CliError(f"track new: --name: {args.name!r} is the track {TRACKS.get(args.name).path}")
    if path.exists() or path.is_symlink():
        raise CliError(f"track new: {path} exists; not overwritten (choose another --name, or remove it)")
    roots = _roots(args)
    spec = derive_track(TRACKS.get(args.template), args.target, args.name, args.data, roots)
    track = dataclasses.replace(parse_track(spec, str(path)), splits=str(user_splits(args.splits)))
    data = resolve(track, roots)
    if isinstance(data, Unavailable):
        raise TrackError(f"{path}: not written: {data.reason}")
    try:
        split = compute_split(data)
    except ProtocolError as e:  # InsufficientData too
        raise TrackError(f"{path}: not written: protocol {track.protocol}: {e}") from None
    out.mkdir(parents=True, exist_ok=True)
    with open(path, "x") as f:  # never over a file, even one made meanwhile
        f.write(yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, allow_unicode=True, width=100))
    print(path)
    print(f"{len(data.scenario_ids)} scenario(s), {len(data.networks)} networks, {len(split.folds)} fold(s); "
          f"freeze its split: leaderboard splits --tracks {out}"
          + (f" --splits {args.splits}" if getattr(args, "splits", None) else "") + f" --track {args.name}")
    return 0


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
    try:
        out = train_entry(args.predictor, params, args.track or TRACKS.names(), _roots(args), args.out,
                          entry=args.entry, scenarios=args.scenarios)
    except ValueError as e:  # a refused run (scenarios matching nothing, an entry of another predictor)
        raise CliError(str(e)) from None
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
    from .tracks import TRACKS

    user = [t for t in checked.tracks if not TRACKS.get(t).packaged]
    if user:
        raise CliError(f"{user[0]} is a user track ({TRACKS.get(user[0]).path}); the board takes the packaged tracks "
                       "(score it with `leaderboard evaluate PREDICTIONS METADATA` or `--entries`)")
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


def _results(args: argparse.Namespace) -> Path:
    """Where ``evaluate --entries`` writes: ``--results``, the committed board's folder with
    ``--board`` (the packaged tracks only), else the user's ``data/leaderboard/results``."""
    if args.board and args.results:
        raise CliError("--board is the committed board's leaderboard/results: give --board or --results, not both")
    if args.board:
        from .tracks import user_tracks

        user = user_tracks()
        if user:
            raise CliError(f"--board scores the packaged tracks only; user tracks are loaded ({user[0].path}: "
                           "--tracks / LATBENCH_TRACKS)")
        return BOARD["results"]
    return Path(args.results) if args.results else USER_BOARD["results"]


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .run import evaluate_entry, write_status

    if not args.entries and (args.board or args.results):
        raise CliError("evaluate PREDICTIONS METADATA files nothing: --results and --board go with --entries")
    if args.entries:
        results = _results(args)
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
        say(f"results in {results}; the board from them: leaderboard render"
            + (" --board" if args.board else f" --results {results}" if args.results else ""), file=sys.stderr)
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
    board = Path(args.results).resolve() == BOARD["results"].resolve()
    say("run `leaderboard render " + ("--board" if board else f"--results {args.results}") + "` to update the board")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    """README.md and site/ from a results folder: the user's (``data/leaderboard/``) by default,
    the committed board's with ``--board``."""
    from .render import load_results, render
    from .summary import write_summary

    given = {k: getattr(args, k) for k in BOARD if getattr(args, k) is not None}
    if args.board and given:
        raise CliError(f"--board names the committed board's folders: give it without --{', --'.join(given)}")
    where = BOARD if args.board else {**USER_BOARD, **{k: Path(v) for k, v in given.items()}}
    results = Path(where["results"])
    if not results.is_dir():
        raise CliError(f"{results}: no results folder (score entries into it: `leaderboard evaluate --entries DIR"
                       + ("" if "results" not in given else f" --results {results}") + "`; the committed board: "
                       "`leaderboard render --board`)")
    Path(where["readme"]).parent.mkdir(parents=True, exist_ok=True)
    readme, site = render(results, where["readme"], where["site"])
    print(readme)
    print(site)
    for path in write_summary(*load_results(results), Path(where["site"])):  # DVC's metrics and plots
        print(path)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, its one-line errors (which quote the arguments: file names) shown inertly."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


_TRACKS_HELP = ("a folder of track files of your own (repeat; default: env LATBENCH_TRACKS, folders separated by "
                "os.pathsep); a user track may not take a packaged track's name")
_SPLITS_HELP = "where the user tracks' split files go (default: env LATBENCH_SPLITS, else data/leaderboard/splits)"


def _user_folder_options(p: argparse.ArgumentParser, top: bool) -> None:
    """``--tracks`` and ``--splits``, given before the subcommand (``top``) or after it (there
    unset means: as given before it)."""
    unset = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("--tracks", action="append", metavar="DIR", help=_TRACKS_HELP, **unset)
    p.add_argument("--splits", metavar="DIR", help=_SPLITS_HELP, **unset)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="leaderboard", description="The latbench leaderboard: tracks, submissions, the board.")
    p.add_argument("--public", help="public data folder (default data/public; env LATBENCH_PUBLIC_DATA)")
    p.add_argument("--host", help="host dataset folder (default the committed release datasets/host-v1; "
                                  "env LATBENCH_HOST_DATA; e.g. data/dataset, the main job's own)")
    _user_folder_options(p, top=True)
    folders = _Parser(add_help=False)
    _user_folder_options(folders, top=False)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    s = sub.add_parser("tracks", help="list tracks and whether their data is here", parents=[folders])
    s.set_defaults(fn=cmd_tracks)
    s = sub.add_parser("track", help="list the tracks and their files, or make a track for a new device")
    tsub = s.add_subparsers(dest="track_cmd", required=True, parser_class=_Parser)
    t = tsub.add_parser("list", help="every track: packaged or user, its file and split file", parents=[folders])
    t.set_defaults(fn=cmd_track_list)
    t = tsub.add_parser("new", parents=[folders], help="write a track for a new target from a template track",
                        description="Write <out>/<name>.yaml: the template track's protocol, parameters, models and "
                                    "metrics with a new target (the scenarios the protocol predicts: a device, or a "
                                    "glob over scenario ids), checked as a track file and against the data; an "
                                    "existing file is never overwritten.")
    t.add_argument("--template", required=True, help="a registered track (e.g. help-transfer-n10, qaihub-new-device-n5)")
    t.add_argument("--target", required=True,
                   help="a device of the data (the scenarios' device column) or a glob over scenario ids ('*pixel7*')")
    t.add_argument("--name", required=True, help="the new track's name (= its file name)")
    t.add_argument("--out", help="the folder of your tracks (default: the first --tracks folder)")
    t.add_argument("--data", choices=("public", "host"), help="the data root the track reads (default: the template's)")
    t.set_defaults(fn=cmd_track_new)
    s = sub.add_parser("splits", help="freeze missing split files (or --check them)", parents=[folders])
    s.add_argument("--track", action="append")
    s.add_argument("--check", action="store_true", help="recompute and compare with the files; write nothing")
    s.set_defaults(fn=cmd_splits)
    s = sub.add_parser("train", help="fit a registered predictor on tracks and write its entry", parents=[folders],
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
    s.add_argument("--scenarios", action="append", metavar="GLOB",
                   help="only the scenarios whose id matches (repeat): refit them in an entry that predicts the "
                        "track, the rest kept; on a track the entry does not predict yet, train only those")
    s.set_defaults(fn=cmd_train)
    for name, fn, hlp in (("validate", cmd_validate, "check a submission"), ("evaluate", cmd_evaluate, "score a submission or entry folders")):
        s = sub.add_parser(name, help=hlp, parents=[folders])
        s.add_argument("predictions", nargs="?" if name == "evaluate" else None)
        s.add_argument("metadata", nargs="?" if name == "evaluate" else None)
        if name == "validate":  # submit's own options: validate --name checks what submit would
            s.add_argument("--name", help="also check this entry name, its folder and results as submit does")
            s.add_argument("--replace", action="store_true", help="as submit --replace: an existing folder is no refusal")
            s.add_argument("--submissions", default=str(SUBMISSIONS))
            s.add_argument("--results", default=str(RESULTS))
        if name == "evaluate":
            s.add_argument("--entries", action="append", help="a folder of entry folders (repeat)")
            s.add_argument("--results", metavar="DIR",
                           help=f"where --entries are scored: <DIR>/<track>/<entry>.json, status.json, noise_floor.json, "
                                f"rejected.json (default: {USER_BOARD['results']})")
            s.add_argument("--board", action="store_true",
                           help="score into the committed board's leaderboard/results/ (what leaderboard/dvc.yaml runs; "
                                "packaged tracks only)")
            s.add_argument("--clean", action="store_true", help="remove old result files first")
            s.add_argument("--submitted", action="append",
                           help="an --entries folder whose entries submitters filed (default: leaderboard/submissions)")
        s.set_defaults(fn=fn)
    s = sub.add_parser("submit", help="validate a submission, file it under submissions/ and score it", parents=[folders])
    s.add_argument("predictions")
    s.add_argument("metadata")
    s.add_argument("--name", required=True,
                   help="entry name: 1-64 of a-z 0-9 - _, not a registered predictor's (docs/leaderboard.md)")
    s.add_argument("--replace", action="store_true")
    s.add_argument("--submissions", default=str(SUBMISSIONS))
    s.add_argument("--results", default=str(RESULTS))
    s.set_defaults(fn=cmd_submit)
    s = sub.add_parser("render", help="write README.md and site/index.html from the results", parents=[folders])
    s.add_argument("--results", metavar="DIR", help=f"the results to render (default: {USER_BOARD['results']})")
    s.add_argument("--readme", metavar="FILE", help=f"(default: {USER_BOARD['readme']})")
    s.add_argument("--site", metavar="DIR", help=f"(default: {USER_BOARD['site']})")
    s.add_argument("--board", action="store_true",
                   help="the committed board: leaderboard/results/ -> leaderboard/README.md and leaderboard/site/")
    s.set_defaults(fn=cmd_render)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from foundation.registry import UnknownName

    from .evaluator import EvaluationError
    from .submission import SubmissionError
    from .tracks import TrackError, use_track_folders

    try:
        use_track_folders(args.tracks, args.splits)  # given, else LATBENCH_TRACKS / LATBENCH_SPLITS
        return args.fn(args)
    except SubmissionError as e:  # one problem: one line; more: a count, then one line each
        say("leaderboard: invalid submission: " + (e.problems[0] if len(e.problems) == 1 else str(e)), file=sys.stderr)
        return 1
    except (TrackError, EvaluationError, UnknownName, FileNotFoundError, CliError) as e:
        say(f"leaderboard: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
