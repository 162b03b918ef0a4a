"""``latbench``: the command line of the suite (DVC stages call these subcommands).

Every expected failure (bad configuration, malformed IR, unknown name) prints one line
``latbench: error: ...`` and exits with status 2; no traceback.

Packages above this one add their own subcommands through the entry-point group
``latbench.commands`` (:data:`COMMANDS`): the predictor shelf adds ``predict`` and ``shelf build``
(shelf/cli.py), so nothing here imports them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from generators.ir import Graph, IRError
from foundation.registry import Registry, RegistryError, UnknownName

from .config import PARAMS, ConfigError, compose, load_params, validate, write_params


def _cmd_compose(args: argparse.Namespace) -> None:
    """Compose conf/ with optional Hydra overrides (e.g. generator.synthetic.n=50
    'generator=[synthetic,zoo]') and write the validated result to params.yaml."""
    raw = compose(args.overrides)
    validate(raw, where="conf/")
    path = write_params(raw, args.output)
    print(f"wrote {path}")


def _cmd_generate(args: argparse.Namespace) -> None:
    """Read the composed parameters, generate the networks of every source under `generator` and
    write <data_dir>/models/<source>/<model_id>.json plus index.csv."""
    from .generate import run_generate

    cfg = load_params(args.params)
    counts = run_generate(cfg, out_dir=args.out, progress=not args.quiet)
    print(f"generated {sum(counts.values())} networks: " + ", ".join(f"{k} {v}" for k, v in counts.items()))


def _cmd_export(args: argparse.Namespace) -> None:
    """Export every generated network to the formats in `export.formats`, in parallel, skipping what
    is already exported; failures are recorded as <format>.error.json and the stage goes on. Writes
    <data_dir>/artifacts/<model_id>/ and manifest.csv."""
    from .export import DiskFull, run_export

    cfg = load_params(args.params)
    try:
        counts = run_export(cfg, progress=not args.quiet)
    except DiskFull as e:
        raise ConfigError(f"export: {e}; what finished is kept: free space (`latbench prune` deletes the artifacts "
                          "whose pairs are released) and run export again") from None
    print(f"export: {counts['ok']} written, {counts['failed']} failed, {counts['skipped']} already done "
          f"(see {cfg.data_dir}/artifacts/manifest.csv)")


def _cmd_prune(args: argparse.Namespace) -> None:
    """Delete the artifact files no stage of the sweep reads again: those whose pairs at every grid
    point that measures them are in the committed release (release.folder). Each leaves
    <format>.dropped.json; export does not write it again, assemble takes its pairs from the
    release, the control set's networks are kept. --restore deletes the sidecars of the files a
    grid point still needs (a point added later; the next export writes them again)."""
    from .control import ControlError
    from .devices import make_device
    from .prune import PruneError, plan, prune, restorable, restore

    cfg = load_params(args.params)
    artifacts = Path(cfg.data_dir) / "artifacts"
    if args.restore:
        n = restore(restorable(cfg, make_device(cfg.device), Path(cfg.data_dir) / "models", artifacts))
        print(f"prune: {n} dropped sidecars removed (files a grid point still needs); run export to write "
              "those files again")
        return
    try:
        p = plan(cfg, make_device(cfg.device), Path(cfg.data_dir) / "models", artifacts)
    except (ControlError, PruneError) as e:
        raise ConfigError(str(e)) from None
    kept = "; ".join(f"{n} {why}" for why, n in p.kept.items()) or "none"
    verb = "would delete" if args.dry_run else "deleted"
    unwritten = p.unwritten
    n = len(p.prunable) if args.dry_run else prune(p, cfg.release.folder)
    print(f"prune: {verb} {n - unwritten} files ({p.bytes / 1e9:.2f} GB) whose pairs {cfg.release.folder} holds "
          f"(and {unwritten} never exported here, which export now skips); kept: {kept}")


def _cmd_measure(args: argparse.Namespace) -> None:
    """Measure the exported networks in one scenario (framework x precision x core set, or framework
    x precision on the GPU: --accelerator gpu, no core set) of the configured device: fresh pinned
    processes, interleaved across models, adaptive or fixed stopping, op and kernel records, traces.
    Resumable: a rerun skips finished pairs and reuses finished processes; failures are recorded and
    the sweep goes on. Writes <data_dir>/measurements/<device>/<scenario_id>/."""
    from .devices import DeviceBusy
    from .measure import run_measure
    from .runners.records import NativeRunError

    cfg = load_params(args.params)
    if args.models:
        cfg.measure.models = list(args.models)
    if args.retry_failed:
        cfg.measure.retry_failed = True
    try:
        if args.farm:  # the phones of a Ray device farm instead of the configured device (docs/farm.md)
            from .farm.cli import farm_measure

            r = farm_measure(cfg, args)
        else:
            r = run_measure(cfg, args.framework, args.precision, args.cores, threads=args.threads,
                            accelerator=args.accelerator, progress=not args.quiet)
    except (DeviceBusy, NativeRunError) as e:  # e.g. an unknown serial, a phone without taskset
        raise ConfigError(str(e)) from None
    except ValueError as e:
        raise ConfigError(f"measure: {e}") from None
    if r["status"] == "not_offered":
        print(f"measure {r['scenario_id']}: not offered on this device: {r['reason']} (recorded in {r['out']})")
    else:
        print(f"measure {r['scenario_id']}: {r['ok']} measured, {r['failed']} failed "
              f"({r.get('refused', 0)} refused as taken under load), {r['skipped']} already done, "
              f"{r.get('remeasured', 0)} processes measured again under load, "
              f"{r.get('speed_wait_s', 0):.0f} s waited for a slow episode to pass (see {r['out']})")


def _cmd_scenarios(args: argparse.Namespace) -> None:
    """Expand the `scenario` grid on the configured device: scenario ids, CPU sets, taskset masks,
    threads; and the grid points not offered, with the reason."""
    from .devices import make_device
    from .runners import RUNNERS
    from .scenarios import explain_grid

    cfg = load_params(args.params)
    device = make_device(cfg.device)
    grid = cfg.scenario
    if args.cores_all:
        grid.cores = "all"
    scenarios, dropped = explain_grid(device.clusters(), grid, device=device.name, gpu=device.gpu,
                                      no_gpu_reason=getattr(device, "gpu_unavailable", None), runners=RUNNERS)
    print(f"device {device.name}: " + ", ".join(f"{c.size}x {c.name} (cpus {','.join(map(str, c.cpus))})"
                                               for c in device.clusters()))
    if device.gpu:
        print(f"gpu: {device.gpu}")
    for s in scenarios:
        if s.accelerator == "gpu":  # no core set: the runtime's host threads are not pinned
            print(f"  {s.scenario_id:<40} gpu {device.gpu}, {s.precision} compute")
            continue
        print(f"  {s.scenario_id:<40} cpus {','.join(map(str, s.cpus)) or '-':<8} mask {s.mask or '-':<6} "
              f"threads {s.threads}")
    for d in dropped:
        print(f"  not offered: {d.what}: {d.reason}")


def _cmd_import_public(args: argparse.Namespace) -> None:
    """Read the public datasets selected in `public.datasets` from their folders (brought by
    `python -m pipelines.dataset.pull`, see docs/dataset.md; or folders of your own, listed in
    `public.<dataset>.path`), rebuild their networks as IR, and write the five dataset tables,
    import_problems.csv and DATASET.md to <data_dir>/public; a dataset whose files are not there is
    skipped, saying why (SKIPPED.json). Devices are described from the device catalog, with yours
    (--catalog, public.catalog or $LATBENCH_CATALOG) merged over it."""
    from .dataset.import_public import problem_summary
    from .public import run_public_import

    cfg = load_params(args.params)
    if args.catalog is not None:
        cfg.public.catalog = args.catalog
    try:
        r = run_public_import(cfg, progress=not args.quiet)
    except (FileNotFoundError, ValueError) as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    for name, reason in r["skipped"].items():
        print(f"import-public: skipped {name}: {reason}")
    problems_file = f"{cfg.data_dir}/{cfg.public.out}/import_problems.csv"
    if args.quiet:  # no progress bars nor every problem line, but the problems are never hidden
        for line in problem_summary(r["problems"], problems_file):
            print(f"import-public: {line}" if not line.startswith(" ") else line)
    if not r["skipped"] or len(r["skipped"]) < len(cfg.public.datasets):
        print("import-public: " + ", ".join(f"{t} {n}" for t, n in r["counts"].items())
              + f"; {len(r['problems'])} problems (see {problems_file})")


def _cmd_assemble(args: argparse.Namespace) -> None:
    """Read <data_dir>/measurements (every device and scenario), the IR files of the networks they
    name and the measured .tflite files, and write the five dataset tables (parquet), failures.csv
    and DATASET.md with its figures to <data_dir>/dataset."""
    from .assemble import AssembleError, run_assemble

    cfg = load_params(args.params)
    try:
        r = run_assemble(cfg, progress=not args.quiet)
    except AssembleError as e:
        raise ConfigError(f"assemble: {e}") from None
    print("assemble: " + ", ".join(f"{t} {r[t]}" for t in ("models", "scenarios", "e2e", "ops", "kernels"))
          + f"; {r['failures']} failed pairs (see {r['out']}/failures.csv), {r['not_offered']} grid points not offered")


def parse_shape(text: str | None) -> list[int] | None:
    """``--shape 1x3x224x224`` (or ``1,3,224,224``) as sizes; a bad one is a ConfigError."""
    if text is None:
        return None
    try:
        shape = [int(v) for v in text.lower().replace(",", "x").split("x") if v.strip()]
    except ValueError:
        shape = []
    if not shape or min(shape) <= 0:
        raise ConfigError(f"--shape: expected positive sizes such as 1x3x224x224, got {text!r}")
    return shape


def _cmd_profile(args: argparse.Namespace) -> None:
    """Run one model file of yours through the measure stage's instrumented runtime (fresh pinned
    processes, the configured stopping rule, op and kernel processes) on the host CPU, the host GPU
    or an adb phone, and print the e2e median with its interval (across processes; with too few of
    them a t-interval, with one a bootstrap over its runs), the load and the speed probe's reading
    (on the host CPU, against the release's machine), the top ops and kernels with their share, the
    time outside any op (nnPerf's data preparation) and where the Perfetto traces and the JSON
    record are. A process taken under load or in a slow episode is measured again, then the
    profile is refused, as the measure stage does (--allow-load keeps it with a warning). The same
    file profiled again into the same folder reuses its stored record and says so (--fresh
    measures anew). Free dimensions (Keras' batch None) resolve to 1 unless --shape says otherwise.
    With --framework all the model goes through the IR to every runtime's format and each is
    profiled: one table of e2e, top ops and kernels side by side (pipelines/profile_compare.py)."""
    from pathlib import Path

    from tqdm import tqdm

    from .devices import DeviceBusy
    from .profile import ProfileError, ProfileRequest, run_profile, summary_lines
    from .runners.records import NativeRunError

    cfg = load_params(args.params) if Path(args.params).is_file() else validate(compose([]))
    req = ProfileRequest(Path(args.model), device=args.device, cores=args.cores, precision=args.precision,
                         threads=args.threads, shape=parse_shape(args.shape),
                         out=Path(args.out) if args.out else None, processes=args.processes,
                         adb_server=args.adb_server, allow_load=args.allow_load, fresh=args.fresh)

    def live(scenario_id: str, k: int, proc: dict) -> None:  # one line per finished e2e process
        ms = sorted(s / 1e6 for s in proc["samples_ns"])
        tqdm.write(f"  process {k + 1}: median {ms[len(ms) // 2]:.3f} ms, min {ms[0]:.3f}, max {ms[-1]:.3f} "
                   f"({len(ms)} runs)")

    if args.framework:  # the model through the IR to every asked runtime, side by side
        from .profile_compare import compare_runtimes, comparison_lines, parse_frameworks

        for option, asked in (("--allow-load", args.allow_load), ("--fresh", args.fresh)):
            if asked:
                raise ConfigError(f"{option}: not taken with --framework (each runtime's profile holds to the "
                                  "load check and reuses its stored record)")

        try:
            cmp = compare_runtimes(cfg, req, parse_frameworks(args.framework), progress=not args.quiet,
                                   say=(lambda line: None) if args.quiet else tqdm.write)
        except (ProfileError, DeviceBusy, NativeRunError) as e:
            raise ConfigError(str(e)) from None
        print("\n".join(comparison_lines(cmp, top=min(args.top, 3))))
        return
    try:
        prof = run_profile(cfg, req, progress=not args.quiet, on_process=None if args.quiet else live)
    except (ProfileError, DeviceBusy, NativeRunError) as e:
        raise ConfigError(str(e)) from None
    print("\n".join(summary_lines(prof, top=args.top)))


_FIELD_OPTIONS = ("model", "maker", "soc", "cluster", "os", "note", "origin", "source")  # devices add --no-adb


def _cmd_devices_add(args: argparse.Namespace) -> None:
    """Write a device's entry into a device catalog: the phone on adb describes itself (getprop,
    sysfs: `devices add SERIAL NAME`), or, with --no-adb, the entry is the fields given
    (`devices add --no-adb NAME --model ... --soc ... --cluster large:1:2.84 ...`): a phone you do not
    have at hand, e.g. one whose measurements you import. The catalog written is --catalog, else
    $LATBENCH_CATALOG, else the suite's pipelines/devices/catalog.yaml; a file of yours is merged over
    the suite's by the importers (import-public --catalog, public.catalog) and the adb device kind."""
    from .devices.android import PhoneError
    from .devices.catalog import CATALOG_PATH, CatalogError, display_path, user_catalog_path

    path = user_catalog_path(args.catalog) or CATALOG_PATH
    given = [o for o in _FIELD_OPTIONS if getattr(args, o) not in (None, [])]
    try:
        if args.no_adb:
            entry = _fields_entry(args, path)
        else:
            if given:
                raise ConfigError(f"--{given[0]}: only with --no-adb (over adb the phone describes itself)")
            if args.serial is None:
                raise ConfigError("devices add: give the phone's adb serial and the device name (SERIAL NAME), or "
                                  "--no-adb NAME with the entry's fields")
            from .devices.adb import add_phone

            entry = add_phone(args.serial, args.name, adb_server=args.adb_server, gpu=args.gpu, path=path,
                              overwrite=args.overwrite)
    except (PhoneError, CatalogError, ValueError) as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    print(f"device catalog {display_path(path)}: {entry.name}: {entry.model}"
          + "".join(f", {c.cores}x {c.tag}" + (f" {c.ghz} GHz" if c.ghz else "") for c in entry.clusters))


def _fields_entry(args: argparse.Namespace, path: Path):
    """``devices add --no-adb``: the entry of the fields given, written into ``path``."""
    from .devices.catalog import add_device, display_path, entry_from_fields

    if args.serial is not None:
        raise ConfigError("devices add --no-adb: give the device name only (no adb serial), e.g. "
                          "`latbench devices add --no-adb myphone --model 'My Phone' --soc ...`")
    if args.model is None:
        raise ConfigError("--model: required with --no-adb (the device's marketing name, e.g. 'Google Pixel 7')")
    entry = entry_from_fields(args.name, model=args.model, file=f"{display_path(path)} (new entry)",
                              maker=args.maker, soc=args.soc, clusters=args.cluster or (), gpu=args.gpu,
                              os_name=args.os, note=args.note,
                              origin=args.origin or "given by hand (latbench devices add --no-adb)",
                              sources=args.source or ())
    add_device(entry, path, overwrite=args.overwrite)
    return entry


def _cmd_show(args: argparse.Namespace) -> None:
    g = Graph.load(args.model)
    s = g.summary()
    print(json.dumps({"model_id": g.model_id, "name": g.name, "source": g.source, **s, "ops": g.op_counts(), "meta": g.meta}, indent=2))


def _cmd_validate(args: argparse.Namespace) -> None:
    bad = 0
    for path in args.models:
        try:
            g = Graph.load(path)
            print(f"ok {path} {g.model_id}")
        except IRError as e:
            bad += 1
            print(f"invalid {e}")
    if bad:
        raise SystemExit(1)


# ---------------------------------------------------------------- the parser
#: Subcommands that installed packages add to ``latbench`` (entry-point group ``latbench.commands``,
#: e.g. the predictor shelf's ``predict`` and ``shelf build``): each entry is a function
#: ``add(subparsers) -> None`` that adds its subcommand to the parser's subparsers and sets the
#: ``func(args)`` it runs, as :func:`_command` does. A ConfigError it raises is one error line.
COMMANDS: Registry[Callable[[argparse._SubParsersAction], None]] = Registry(
    "latbench command", entry_points="latbench.commands")


def _command(sub: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], None],
             help: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name``, which runs ``func(args)``. What ``latbench <name> --help``
    says of the command is ``func``'s docstring (argparse refills its lines)."""
    p = sub.add_parser(name, help=help, description=func.__doc__)
    p.set_defaults(func=func)
    return p


# options several subcommands take, defined once (a subcommand may say more in its own help)
def _params(p: argparse.ArgumentParser, help: str = "composed parameters (default: %(default)s)") -> None:
    p.add_argument("--params", default=str(PARAMS), help=help)


def _quiet(p: argparse.ArgumentParser, help: str = "no progress bar") -> None:
    p.add_argument("-q", "--quiet", action="store_true", help=help)


def _threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=int, default=None, help="inference threads (default: = cores)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latbench",
        description="On-device DNN latency benchmark suite. The pipeline runs with `dvc repro` "
        "(or `dvc exp run -S key=value`); these subcommands are its stages and tools.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = _command(sub, "compose", _cmd_compose, help="compose conf/ (Hydra) into params.yaml, as `dvc exp run` does")
    c.add_argument("overrides", nargs="*", help="Hydra overrides, key=value")
    c.add_argument("-o", "--output", default=str(PARAMS), help="where to write (default: %(default)s)")

    g = _command(sub, "generate", _cmd_generate, help="stage: write IR files for every selected generator source")
    _params(g)
    g.add_argument("--out", default=None, help="output folder (default: <data_dir>/models)")
    _quiet(g, "no progress bars")

    e = _command(sub, "export", _cmd_export,
                 help="stage: framework artifacts (export.formats; default: what the scenario grid's runners read)")
    _params(e)
    _quiet(e)

    m = _command(sub, "measure", _cmd_measure, help="stage: measure every exported network in one scenario")
    from .runners import frameworks

    m.add_argument("--framework", required=True, help=" | ".join(frameworks()))
    m.add_argument("--precision", required=True, help="fp32 | fp16 | int8 (on the GPU: the compute precision, "
                   "fp16 | fp32)")
    m.add_argument("--cores", default=None, help="core-set label: 1large, 2large, 1large2med, ... "
                   "(required on the CPU; not used on the GPU)")
    _threads(m)
    m.add_argument("--accelerator", default="cpu", help="cpu | gpu (default: %(default)s)")
    m.add_argument("--models", nargs="*", default=None, help="only these model ids")
    m.add_argument("--retry-failed", action="store_true", help="measure again pairs whose failure is on record")
    m.add_argument("--farm", default=None, metavar="ADDRESS", help="measure on every phone named device.name in "
                   "the Ray device farm at ADDRESS (HOST:PORT; docs/farm.md)")
    m.add_argument("--farm-token-file", default=None, metavar="FILE",
                   help="--farm: the farm's token file (default: $LATBENCH_FARM_TOKEN_FILE, else "
                        "~/.latbench/farm_token; docs/farm.md)")
    m.add_argument("--farm-serials", nargs="*", default=None, help="--farm: only these phones")
    m.add_argument("--farm-no-reassign", action="store_true", help="--farm: leave the pairs of a vanished phone "
                   "to the next run instead of giving them to the other phones")
    _params(m)
    _quiet(m)

    pn = _command(sub, "prune", _cmd_prune, help="delete artifacts whose pairs the release holds (frees the disk)")
    pn.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")
    pn.add_argument("--restore", action="store_true",
                    help="forget the pruning of files a grid point still needs (its pair not released): "
                         "the next export writes them again")
    _params(pn)

    sc = _command(sub, "scenarios", _cmd_scenarios, help="list the scenarios the configured grid gives on this device")
    sc.add_argument("--cores-all", action="store_true", help="every core combination of the device (USC-style)")
    _params(sc)

    ip = _command(sub, "import-public", _cmd_import_public,
                  help="stage: import public real-device measurements (USC phones, HELP)")
    _params(ip)
    ip.add_argument("--catalog", default=None, metavar="FILE",
                    help="a device catalog file of yours, merged over the suite's (default: public.catalog, "
                         "else $LATBENCH_CATALOG)")
    _quiet(ip, "no progress bars nor every problem line: a summary of the problems (count per kind, the first "
               "lines, the file listing them all)")

    a = _command(sub, "assemble", _cmd_assemble,
                 help="stage: IR files + measurement records -> the dataset tables and card")
    _params(a)
    _quiet(a)

    pr = _command(sub, "profile", _cmd_profile,
                  help="profile a model file: e2e, top ops and kernels, traces; --framework all: every runtime")
    pr.add_argument("model", help="a .tflite, .onnx, .pte (ExecuTorch), .pt (TorchScript) or .ptl file; with "
                    "--framework, a file an importer reads (.onnx, .tflite, an IR .json)")
    pr.add_argument("--framework", default=None, help="all, or a comma-separated list of frameworks: import the "
                    "model into the IR, export it for each runtime and profile each, one table side by side "
                    "(default: the file's own runtime only)")
    pr.add_argument("--device", default="host", help="host (CPU), gpu (the host's GPU via LiteRT's GPU accelerator) "
                    "or an adb serial (default: %(default)s)")
    pr.add_argument("--cores", default="1large", help="core-set label as in `latbench scenarios` (default: %(default)s)")
    _threads(pr)
    pr.add_argument("--precision", default="auto", help="auto (read from the file) | fp32 | fp16 | int8; on the GPU "
                    "the compute precision (default: %(default)s)")
    pr.add_argument("--shape", default=None, help="input shape, e.g. 1x3x224x224 (required for TorchScript)")
    pr.add_argument("--processes", type=int, default=None, help="e2e processes (default: the measure config's)")
    pr.add_argument("--adb-server", default="127.0.0.1:5037", help="adb server for an adb serial (default: %(default)s)")
    pr.add_argument("--out", default=None, help="output folder (default: profiles/<file stem>)")
    pr.add_argument("--allow-load", action="store_true", help="keep processes taken under load or in a slow "
                    "episode of the machine, with a warning, instead of measuring them again and refusing "
                    "(measure.load)")
    pr.add_argument("--fresh", action="store_true", help="remove this model's stored record of the scenario "
                    "in the output folder and measure anew (default: a stored record is reused, and said so)")
    pr.add_argument("--top", type=int, default=8, help="op and kernel types listed (default: %(default)s)")
    pr.add_argument("--params", default=str(PARAMS), help="composed parameters for the measure protocol "
                    "(default: %(default)s; the defaults of conf/ if absent)")
    _quiet(pr, "no progress bar or live lines")

    for name in COMMANDS:  # the commands of packages above this one (the shelf's predict, shelf build)
        COMMANDS.get(name)(sub)

    dv = sub.add_parser("devices", help="the device catalog (pipelines/devices/catalog.yaml)",
                        description="Devices are data: the catalog describes phones (SoC, clusters, clocks, GPU) for "
                        "the importers, the adb device kind and the predictor shelf.")
    dsub = dv.add_subparsers(dest="devices_command", required=True, metavar="ACTION")
    da = _command(dsub, "add", _cmd_devices_add,
                  help="write a device into a catalog: an adb phone from its getprop and sysfs, or (--no-adb) "
                       "from the fields given")
    da.add_argument("serial", nargs="?", default=None, help="the phone's adb serial (`adb devices`); not stored; "
                    "none with --no-adb")
    da.add_argument("name", help="short lower-case device name, the first part of its scenario ids (e.g. pixel7)")
    da.add_argument("--no-adb", action="store_true", help="no phone at hand: the entry is the fields given "
                    "(--model required)")
    da.add_argument("--model", default=None, help="--no-adb: marketing name ('Google Pixel 7')")
    da.add_argument("--maker", default=None, help="--no-adb: manufacturer")
    da.add_argument("--soc", default=None, help="--no-adb: system on chip ('Google Tensor G2')")
    da.add_argument("--cluster", action="append", default=None, metavar="TAG:CORES[:GHZ]",
                    help="--no-adb: a CPU cluster, fastest first, as USC core sets name them (large:2:2.85); "
                         "repeat for each")
    da.add_argument("--os", default=None, help="--no-adb: android | ios | linux")
    da.add_argument("--note", default=None, help="--no-adb: a remark every scenario description of it carries")
    da.add_argument("--origin", default=None, help="--no-adb: where the values come from (default: given by hand)")
    da.add_argument("--source", action="append", default=None, metavar="DATASET=NAME[,NAME...]",
                    help="--no-adb: what a public dataset's files call the device (usc=MyPhone); repeat for each")
    da.add_argument("--gpu", default=None, help="the phone's GPU name, if you want it recorded")
    da.add_argument("--adb-server", default="127.0.0.1:5037", help="adb server (default: %(default)s)")
    da.add_argument("--catalog", default=None, metavar="FILE",
                    help="the catalog file to write, e.g. one of yours (default: $LATBENCH_CATALOG, else the "
                         "suite's pipelines/devices/catalog.yaml)")
    da.add_argument("--overwrite", action="store_true", help="replace a different entry of that name")

    from .farm.cli import add_farm_parser

    add_farm_parser(sub)

    s = _command(sub, "show", _cmd_show, help="print a network's summary: costs, operator counts, metadata")
    s.add_argument("model", help="an IR JSON file")

    v = _command(sub, "validate", _cmd_validate, help="validate IR JSON files (exit 1 if any is invalid)")
    v.add_argument("models", nargs="+", help="IR JSON files")
    return p


STAGES = ("generate", "export", "measure", "import-public", "assemble")  # dvc.yaml's stage commands


def main(argv: list[str] | None = None) -> int:
    import time

    try:
        parser = build_parser()
    except RegistryError as e:  # a package's command that cannot be loaded
        print(f"latbench: error: {e}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    try:
        args.func(args)
    except (ConfigError, IRError, UnknownName) as e:
        print(f"latbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, or the release sweep's budget (timeout --signal=INT)
        print(f"latbench {args.command}: interrupted after {time.monotonic() - t0:.0f} s; what finished is kept "
              f"(stages resume: a rerun skips finished work)", file=sys.stderr)
        return 130
    if args.command in STAGES:  # `make run` shows what each stage cost
        print(f"latbench {args.command}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
