"""Loading and validating the composed parameters (params.yaml) against structured configs.

``conf/`` is the single source of configuration; DVC composes it into ``params.yaml`` on
``dvc exp run`` (``latbench compose`` does the same by hand). Stages read the composed
file, never ``conf/`` directly, so ``-S`` overrides take effect. Validation happens here
because DVC composes without our schema: a wrong key, type or value becomes one
``ConfigError`` line naming the file and the dotted key. Keys and types are checked by the
structured schema through ``foundation.configs.coerce``, the one path every config section
built in Python takes too; values by each section's ``validate_*``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from omegaconf import OmegaConf

from foundation import limits
from foundation.configs import coerce

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"
PARAMS = ROOT / "params.yaml"


class ConfigError(ValueError):
    """A one-line configuration error: ``<file>: <dotted.key>: <what is wrong>``."""


# ---------------------------------------------------------------- bounds
# params.yaml may be edited by hand or come with someone else's experiment: reading it goes
# through the bounded loader (foundation.safeload: size, depth, aliases), and counts that make a
# stage write files or run for a while are bounded here, so no value can fill the disk.
MAX_PARAMS_BYTES = limits.PARAMS_BYTES
MAX_PARAMS_VALUES = limits.PARAMS_VALUES
MAX_PARAMS_ALIASES = limits.PARAMS_ALIASES
MAX_NETWORKS = limits.NETWORKS
MAX_LIST = limits.PARAMS_LIST
MAX_INT = limits.PARAMS_INT
COUNT_LIMITS = {  # dotted key -> largest value
    "generator.synthetic.n": MAX_NETWORKS,
    "generator.synthetic.num_blocks": 1_000,
    "generator.synthetic.input_size": 4_096,
    "generator.zoo.variants": MAX_NETWORKS,
}


def check_bounds(raw: Any, where: str, key: str = "") -> None:
    """Walk the raw configuration: every integer within +-MAX_INT, every list within MAX_LIST
    items, the counts of :data:`COUNT_LIMITS` within theirs. ConfigError names the dotted key."""
    if isinstance(raw, dict):
        for k, v in raw.items():
            check_bounds(v, where, f"{key}.{k}" if key else str(k))
        return
    if isinstance(raw, list):
        if len(raw) > MAX_LIST:
            raise ConfigError(f"{where}: {key}: {len(raw)} items (at most {MAX_LIST})")
        for i, v in enumerate(raw):
            check_bounds(v, where, f"{key}[{i}]")
        return
    if isinstance(raw, int) and not isinstance(raw, bool):
        limit = COUNT_LIMITS.get(key, MAX_INT)
        if not -MAX_INT <= raw <= limit:
            raise ConfigError(f"{where}: {key}: {raw} is out of range (at most {limit})")


def check_data_dir(value: Any, where: str) -> None:
    """``data_dir``: a non-empty folder path given as text (``''`` would write to ./models, a
    number to ./123)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: data_dir: expected a folder path (non-empty text), got {value!r}")
    if "\0" in value:
        raise ConfigError(f"{where}: data_dir: a NUL character in the path")


@dataclass
class DeviceConfig:
    """Where scenarios run (pipelines/devices/). Fields past ``gpu`` are read by kinds that
    need them (adb) and ignored by the host."""

    name: str = "host"  # short device name, the first part of every scenario id
    kind: str = "host"  # a registered device kind: host, adb
    gpu: Optional[str] = None  # GPU name; `auto` (host only): probe this machine; None: no GPU scenarios
    serial: Optional[str] = None  # adb: the phone's serial (`adb devices`); never hard-coded
    adb_server: str = "127.0.0.1:5037"  # adb: the adb server to talk to
    work_dir: str = "/data/local/tmp/latbench"  # adb: where the runtime and models go on the phone


def validate_device(cfg: DeviceConfig) -> None:
    from .devices import DEVICE_KINDS

    if cfg.kind not in DEVICE_KINDS:
        raise ValueError(f"kind: unknown device kind {cfg.kind!r} (known: {', '.join(DEVICE_KINDS.names())})")
    if not cfg.name or not cfg.name.replace("_", "").isalnum() or cfg.name != cfg.name.lower():
        raise ValueError(f"name: expected a short lower-case name such as host or pixel4, got {cfg.name!r}")
    if cfg.gpu == "auto" and cfg.kind != "host":  # the probe looks at this machine, not at a phone
        raise ValueError(f"gpu: auto probes the host only; name the {cfg.kind} device's GPU or leave it null")


def _generator_schema() -> type:
    """``generator``: a seed plus one optional section per registered source."""
    from generators.catalog import SOURCES

    fields: list[tuple[str, Any, Any]] = [("seed", int, field(default=0))]
    for name in SOURCES.names():
        fields.append((name, Optional[SOURCES.get(name).Config], field(default=None)))
    return dataclasses.make_dataclass("GeneratorConfig", fields)


def _stage_sections() -> dict[str, tuple[type, Any]]:
    """Top-level sections owned by one stage each: name -> (schema, validate_config)."""
    from . import export, public, release
    from .measure import protocol
    from .scenarios import ScenarioGridConfig

    return {"export": (export.ExportConfig, export.validate_config),
            "device": (DeviceConfig, validate_device),
            "scenario": (ScenarioGridConfig, protocol.validate_grid),
            "measure": (protocol.MeasureConfig, protocol.validate_config),
            "release": (release.ReleaseConfig, release.validate_config),
            "public": (public.PublicConfig, public.validate_config)}


def _root_schema() -> type:
    generator = _generator_schema()
    stages = [(name, schema, field(default_factory=schema)) for name, (schema, _) in _stage_sections().items()]
    return dataclasses.make_dataclass(
        "Params",
        [
            ("data_dir", str, field(default="data")),
            ("generator", generator, field(default_factory=generator)),
            *stages,
        ],
    )


def validate(raw: dict, where: str = "params") -> Any:
    """Merge ``raw`` onto the schema; return the typed config (dataclass instances)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    check_bounds(raw, where)
    if "data_dir" in raw:
        check_data_dir(raw["data_dir"], where)
    try:
        cfg = coerce(_root_schema(), raw)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    _check_generator(cfg.generator, where)
    for name, (_, check) in _stage_sections().items():
        try:
            check(getattr(cfg, name))
        except (ValueError, KeyError) as e:
            raise ConfigError(f"{where}: {name}.{e.args[0] if e.args else e}") from None
    return cfg


def _check_generator(gen: Any, where: str) -> None:
    from generators.catalog import SOURCES

    if gen is None or not any(getattr(gen, n) is not None for n in SOURCES.names()):
        raise ConfigError(f"{where}: generator: no source selected (known: {', '.join(SOURCES.names())})")
    for name in SOURCES.names():
        section = getattr(gen, name)
        if section is None:
            continue
        try:
            SOURCES.get(name).validate_config(section)
        except (ValueError, KeyError) as e:
            # Sources word their errors as "<field>: <what is wrong>"; add where the section lives.
            msg = e.args[0] if e.args else str(e)
            raise ConfigError(f"{where}: generator.{name}.{msg}") from None


def load_params(path: str | Path = PARAMS) -> Any:
    """Read and validate the composed parameters (default: the project's params.yaml)."""
    from foundation.safeload import LoadError, load_yaml_text, read_text

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: not found (run `latbench compose` or `dvc exp run` to compose conf/)")
    try:
        raw = load_yaml_text(read_text(path, MAX_PARAMS_BYTES), str(path), max_nodes=MAX_PARAMS_VALUES,
                             max_aliases=MAX_PARAMS_ALIASES)
    except LoadError as e:
        raise ConfigError(str(e)) from None
    return validate(raw or {}, where=path.name)


def compose(overrides: list[str] | None = None) -> dict:
    """Compose ``conf/`` with Hydra, exactly as DVC does for params.yaml."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException as OCE

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=list(overrides or []))
    except (HydraException, OCE) as e:
        raise ConfigError(f"conf/: {str(e).splitlines()[0]}") from None
    return OmegaConf.to_container(cfg, resolve=True)


def write_params(raw: dict, path: str | Path = PARAMS) -> Path:
    path = Path(path)
    path.write_text(yaml.safe_dump(raw, sort_keys=False, default_flow_style=False))
    return path
