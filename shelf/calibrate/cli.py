"""``latbench calibrate``: the entry point ``calibrate`` of the group ``latbench.commands``."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipelines.config import ConfigError

MEASURE_CHOICES = ("release", "full", "tour")


def _cmd_calibrate(args: argparse.Namespace) -> None:
    """Build a predictor for a device (the host's CPU, its GPU, or a phone over adb) within a time
    budget, and put it on your shelf. A pool of networks (the synthetic space, the zoo families and
    the transformer space, drawn with a seed of its own: --pool, --seed) is measured in rounds with
    the suite's runtime and the release's protocol: a spread first, then where a bootstrap model of
    op costs is least sure. Every round also measures held-out networks, a uniform draw from the
    pool never chosen or fitted on. When the budget is spent, the candidates (additive_mlp from
    scratch; each zoo entry of the same framework, accelerator and precision rescaled as a*p+b) are
    cross-validated on the calibration networks, the best is fitted, its error on the held-out
    networks is stated, and the entry is written to your shelf (--shelf; `latbench predict
    --scenario` reads it over the committed one). A process taken under load is measured again,
    then refused, as the measure stage does (--allow-load keeps it). Stopped, it resumes: run the
    same command again (a larger --budget adds rounds)."""

    from tqdm import tqdm

    from pipelines.devices import DeviceBusy, make_device
    from pipelines.measure import stage_scenario
    from pipelines.profile import ProfileError, device_config
    from pipelines.runners.records import NativeRunError

    from .. import ShelfError
    from ..store import USER_SHELF, USER_SHELF_ENV, Shelf
    from . import CalibrateError, calibrate
    from .measuring import calibration_config
    from .pool import parse_sizes
    from .session import parse_budget

    say = (lambda line: None) if args.quiet else tqdm.write
    try:
        budget = parse_budget(args.budget)
        sizes = parse_sizes(args.pool)
        cfg = calibration_config(args.measure, args.granularity)
        dev_cfg, accelerator = device_config(args.device, args.adb_server)
        device = make_device(dev_cfg)
        st = stage_scenario(device, args.framework, args.precision, args.cores if accelerator == "cpu" else None,
                            args.threads, accelerator)
        if st.scenario is None:
            raise CalibrateError(f"--device {args.device}: {st.reason}")
        sid = st.scenario.scenario_id
        shelf_dir = Path(args.shelf or os.environ.get(USER_SHELF_ENV) or USER_SHELF)
        work = Path(args.work or Path("data") / "calibration" / sid)
        zoo = None if args.no_transfer else Shelf.open(user=shelf_dir if (shelf_dir / "INDEX.json").is_file() else None)
        say(f"calibrate: {sid} on {device.name}, budget {budget / 60:.0f} min, work folder {work}")
        out = calibrate(cfg, device, st.scenario, work=work, shelf_dir=shelf_dir, budget_s=budget, pool_sizes=sizes,
                        seed=args.seed, holdout=args.holdout, first=args.first, batch=args.batch,
                        allow_load=args.allow_load, zoo=zoo, say=say, progress=not args.quiet)
    except (CalibrateError, ProfileError, ShelfError, DeviceBusy, NativeRunError, ValueError) as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    a = out.entry["accuracy"]
    how = out.entry.get("scale")
    what = (f"{out.entry['predictor']} of {how['source']} rescaled x{how['a']:.3f} + {how['b']:.3f} ms" if how
            else f"{out.entry['predictor']} fitted from scratch")
    sp = "undefined" if a["spearman"] is None else f"{a['spearman']:.3f}"
    print(f"{out.scenario_id}: {what} on {out.calibration} networks ({out.rounds} rounds, "
          f"{out.spent_s / 60:.1f} min measuring)")
    print(f"  held-out accuracy on {out.held_out} networks: MAPE {a['mape']:.1f}%, "
          f"{100 * a['acc10']:.0f}% within 10%, Spearman {sp}")
    print(f"  shelf entry: {shelf_dir / out.entry['folder']} (latbench predict MODEL --scenario {out.scenario_id})")


def add_calibrate(sub: argparse._SubParsersAction) -> None:
    """``latbench calibrate``: the entry point ``calibrate`` of the group ``latbench.commands``."""
    from .pool import DEFAULT_SEED, DEFAULT_SIZES, SIZE_FIELDS

    p = sub.add_parser("calibrate", help="build a predictor for your device within a time budget (your shelf)",
                       description=_cmd_calibrate.__doc__)
    p.set_defaults(func=_cmd_calibrate)
    p.add_argument("--device", default="host", help="host (this CPU), gpu (this machine's GPU through LiteRT) or an "
                   "adb serial (default: %(default)s)")
    p.add_argument("--framework", default="tflite", help="runtime (tflite, onnxruntime, executorch, pytorch; "
                   "default: %(default)s)")
    p.add_argument("--precision", default="fp32", help="fp32, fp16 or int8 (default: %(default)s)")
    p.add_argument("--cores", default="1large", help="core set on the CPU, e.g. 1large, 2large, 1little "
                   "(`latbench scenarios` lists them; default: %(default)s)")
    p.add_argument("--threads", type=int, default=None, help="threads (default: one per core of the set)")
    p.add_argument("--budget", default="30m", help="wall time for measuring and fitting, e.g. 15m, 1h "
                   "(default: %(default)s)")
    p.add_argument("--pool", action="append", default=[], metavar="SOURCE=N",
                   help=f"pool networks per source ({', '.join(SIZE_FIELDS)}; zoo: variants per family; repeat; "
                   f"default: {' '.join(f'{k}={v}' for k, v in DEFAULT_SIZES.items())})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the pool and the held-out draw "
                   "(default: %(default)s; the release's networks are seed 0's)")
    p.add_argument("--holdout", type=float, default=0.2, help="share of the measured networks held out to state "
                   "the accuracy (default: %(default)s)")
    p.add_argument("--first", type=int, default=24, help="networks of the first round (default: %(default)s)")
    p.add_argument("--batch", type=int, default=24, help="networks of every later round (default: %(default)s)")
    p.add_argument("--granularity", action="append", default=[], choices=("op", "kernel"),
                   help="record op or kernel times too (slower; op rows let the op-wise predictors compete)")
    p.add_argument("--measure", default="release", choices=MEASURE_CHOICES,
                   help="the measure protocol (conf/measure/<name>.yaml; default: the release's)")
    p.add_argument("--work", default=None, metavar="DIR", help="work folder: pool, artifacts, records, state "
                   "(default: data/calibration/<scenario>)")
    p.add_argument("--shelf", default=None, metavar="DIR", help="your shelf folder, where the entry goes (default: "
                   "$LATBENCH_SHELF, else data/shelf)")
    p.add_argument("--no-transfer", action="store_true", help="fit from scratch only, no zoo entry rescaled")
    p.add_argument("--allow-load", action="store_true", help="keep processes measured under load (recorded, warned)")
    p.add_argument("--adb-server", default="127.0.0.1:5037", help="adb server (default: %(default)s)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress, the result only")


__all__ = ["add_calibrate"]
