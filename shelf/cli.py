"""``latbench predict`` and ``latbench shelf build``: the predictor shelf's subcommands.

The ``latbench`` command line (pipelines/cli.py) takes them from the entry-point group
``latbench.commands`` (pyproject.toml: ``predict = "shelf.cli:add_predict"``,
``shelf = "shelf.cli:add_shelf"``); each ``add_*`` adds its subcommand to latbench's
subparsers. What a command needs is imported when it runs, so ``latbench --help`` stays quick.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from pipelines.config import ConfigError


def _command(sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], None],
             help: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which runs ``func(args)``; ``func``'s docstring is what
    its ``--help`` says of it (as pipelines/cli.py does for its own commands)."""
    p = sub.add_parser(name, help=help, description=func.__doc__)
    p.set_defaults(func=func)
    return p


def _cmd_predict(args: argparse.Namespace) -> None:
    """Predict the latency of a model file (IR JSON, ONNX or TFLite) in one or more scenarios from
    the predictor shelf (shelf/data/: one fitted predictor per scenario of the USC phones, the HELP
    devices and the host, where nn-Meter ships one per device), with the accuracy that predictor
    reached on held-out networks and the per-op breakdown. A host scenario's prediction is the time
    on the machine of the release it was fitted on: one line states that machine beside this one
    (its processor and what the speed probe reads now), and --scale-to-this-machine multiplies the
    host figures by the probe's ratio (an estimate). Python API for NAS loops:
    shelf.Shelf().predict(graphs, scenario_id)."""
    from pipelines.cli import parse_shape
    from pipelines.predict import load_model

    from . import ShelfError
    from .report import list_line, report_lines
    from .store import Shelf

    try:
        shelf = Shelf.open(args.shelf)
        if args.list:
            for sid in shelf.scenarios():
                print(list_line(shelf, sid))
            return
        if not args.model or not args.scenario:
            raise ConfigError("predict: give a model file and at least one --scenario (or --list)")
        if args.scale_to_this_machine and not any(s.startswith("host-") for s in args.scenario):
            raise ConfigError("--scale-to-this-machine: scales host scenarios (host-...) by this machine's speed "
                              "probe; none is asked")
        graph = load_model(args.model, parse_shape(args.shape))
        lines, errors = report_lines(shelf, graph, args.scenario, top=args.top,
                                     scale_to_this_machine=args.scale_to_this_machine)
    except (ShelfError, ValueError) as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    if len(errors) < len(args.scenario):
        print("\n".join(lines))
    for err in errors:
        print(f"latbench: error: {err}", file=sys.stderr)
    if errors:
        raise SystemExit(2)


def _cmd_shelf_build(args: argparse.Namespace) -> None:
    """Fit the predictor of every scenario on the board's shelf tracks (shelf/build.py SOURCES, or
    the --track ones), or of the --scenario ones: the candidate with the lowest
    MAPE there on the board, refitted with the board entry's parameters on the training networks of
    the track's first fold in that scenario; its accuracy is stated on that fold's test networks,
    which it never saw. Writes <out>/<scenario>/ (the saved predictor and held_out.json) and
    <out>/INDEX.json; a scenario the board no longer has results for leaves the shelf."""
    from pathlib import Path

    from . import ShelfError
    from .build import build
    from .readers import CANDIDATES
    from .store import SHELF_DIR

    from leaderboard.tracks import TrackError, data_roots, use_track_folders

    from .build import RESULTS_DIR

    out = Path(args.out) if args.out else SHELF_DIR
    try:
        if args.tracks:
            use_track_folders(args.tracks, args.splits)
        index = build(out=out, scenarios=args.scenario or None, progress=None if args.quiet else print,
                      candidates=args.candidate or CANDIDATES, tracks=args.track or None,
                      results_dir=Path(args.results) if args.results else RESULTS_DIR,
                      roots=data_roots(public=args.public, host=args.host))
    except (ShelfError, TrackError) as e:
        raise ConfigError(str(e)) from None
    print(f"shelf: {len(index['scenarios'])} scenarios in {out}")


def _cmd_shelf_describe(args: argparse.Namespace) -> None:
    """Record again, from the data and without fitting, what each shelf entry was trained on: the
    IR operator types of its training networks (`latbench predict` names the op types of a model
    that an entry never saw), how many of them each generator source gave (synthetic, zoo,
    nasbench201, pytorch, ...: `predict --list` shows them) and the release they were measured in
    (the host's: `predict` names its machine). An entry whose training networks the data's split no
    longer gives is refused: rebuild it."""
    from pathlib import Path

    from . import ShelfError
    from .build import describe
    from .store import SHELF_DIR

    out = Path(args.out) if args.out else SHELF_DIR
    try:
        index = describe(out=out, progress=None if args.quiet else print)
    except ShelfError as e:
        raise ConfigError(str(e)) from None
    print(f"shelf: {len(index['scenarios'])} scenarios described in {out}")


def add_predict(sub: argparse._SubParsersAction) -> None:
    """``latbench predict``: the entry point ``predict`` of the group ``latbench.commands``."""
    p = _command(sub, "predict", _cmd_predict,
                 help="predict a model's latency in known scenarios (the predictor shelf)")
    p.add_argument("model", nargs="?", help="an IR JSON, .onnx or .tflite file")
    p.add_argument("--scenario", action="append", default=[], help="scenario id, e.g. usc-pixel4-tflite-cpu-1large-fp32 "
                   "(repeat for several; --list shows them)")
    p.add_argument("--list", action="store_true", help="list the shelf's scenarios with their held-out MAPE and "
                   "what each predictor was trained on")
    p.add_argument("--scale-to-this-machine", action="store_true",
                   help="multiply host scenarios' predictions (priced on the release's machine) by this machine's "
                   "speed-probe time over the release's reference: an estimate (docs/predict.md)")
    p.add_argument("--shape", default=None, help="input shape for ONNX/TFLite files with free dimensions, e.g. 1x3x224x224")
    p.add_argument("--top", type=int, default=8, help="op types in the breakdown (0: none; default: %(default)s)")
    p.add_argument("--shelf", default=None, metavar="DIR",
                   help="another shelf folder, e.g. one `latbench shelf build --out DIR` wrote (default: the "
                   "committed shelf, shelf/data/); your own shelf ($LATBENCH_SHELF, else data/shelf: `latbench "
                   "calibrate` writes it) is read over it")


def add_shelf(sub: argparse._SubParsersAction) -> None:
    """``latbench shelf build``: the entry point ``shelf`` of the group ``latbench.commands``."""
    from . import SHELF_TRACKS

    s = sub.add_parser("shelf", help="rebuild the predictor shelf from the board and the data",
                       description="The predictor shelf holds one fitted predictor per scenario the suite has data "
                       "for (`latbench predict` reads it). `build` takes, for every scenario on the board's shelf "
                       f"tracks ({', '.join(SHELF_TRACKS)}), the candidate (shelf/readers.py: "
                       "the USC op-wise models, additive_mlp) with the lowest held-out MAPE there, refits it on the "
                       "track's training networks in that scenario and writes shelf/data/<scenario>/ and "
                       "shelf/data/INDEX.json.")
    ssub = s.add_subparsers(dest="shelf_command", required=True, metavar="ACTION")
    b = _command(ssub, "build", _cmd_shelf_build, help="fit and write the shelf's predictors")
    b.add_argument("--scenario", action="append", default=[], help="only these scenario ids (repeatable)")
    b.add_argument("--out", default=None, metavar="DIR", help="shelf folder (default: the committed shelf, shelf/data/)")
    b.add_argument("--candidate", action="append", default=[],
                   help="choose only among these predictors (repeatable; default: all of shelf/readers.py's "
                   "CANDIDATES). The op-wise ones alone (usc_lasso, lookup, usc_rf) make a shelf for NAS loops that "
                   "predicts thousands of graphs a second; additive_mlp is more accurate and far slower "
                   "(benchmarks/bench_shelf.py prints both)")
    b.add_argument("--track", action="append", default=[],
                   help="choose from and fit on these board tracks instead of the shelf's own (repeatable), e.g. "
                   "host-transformer-random for a shelf of transformer specialists")
    b.add_argument("--results", default=None, metavar="DIR",
                   help="board results to choose from (default: the committed board's leaderboard/results/; "
                   "yours: data/leaderboard/results, what `leaderboard evaluate --entries` writes)")
    b.add_argument("--tracks", action="append", default=[], metavar="DIR",
                   help="a folder of your own track files (repeat; as `leaderboard --tracks`)")
    b.add_argument("--splits", default=None, metavar="DIR", help="your tracks' splits folder (default: "
                   "$LATBENCH_SPLITS, else data/leaderboard/splits)")
    b.add_argument("--public", default=None, metavar="DIR", help="the public data root (default: $LATBENCH_PUBLIC_DATA, "
                   "else data/public)")
    b.add_argument("--host", default=None, metavar="DIR", help="the host data root (default: $LATBENCH_HOST_DATA, "
                   "else datasets/host-v1)")
    b.add_argument("-q", "--quiet", action="store_true", help="no line per scenario")
    d = _command(ssub, "describe", _cmd_shelf_describe,
                 help="record what each entry was trained on (op types, generator sources, release) again from "
                 "the data, without fitting")
    d.add_argument("--out", default=None, metavar="DIR", help="shelf folder (default: the committed shelf, shelf/data/)")
    d.add_argument("-q", "--quiet", action="store_true", help="no line per scenario")


__all__ = ["add_predict", "add_shelf"]
