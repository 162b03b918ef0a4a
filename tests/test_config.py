"""Configuration: conf/ composes to the committed params.yaml, and bad values are one line."""
import dataclasses
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from generators.catalog import SOURCES
from pipelines.config import ConfigError, compose, load_params, validate


@pytest.fixture(scope="module")
def composed():
    return compose()


def test_committed_params_yaml_matches_conf(root, composed):
    committed = yaml.safe_load((root / "params.yaml").read_text())
    assert committed == composed, "params.yaml drifted from conf/: run `latbench compose` and commit it"


def _sections():
    from pipelines.export import ExportConfig

    out = [(f"generator/{s}.yaml", s, SOURCES.get(s).Config) for s in SOURCES.names()]
    return out + [("export/default.yaml", None, ExportConfig)]


@pytest.mark.parametrize("path,key,schema", _sections(), ids=[p for p, _, _ in _sections()])
def test_conf_lists_every_schema_field(root, path, key, schema):
    """So every field can be overridden with `dvc exp run -S <section>.<field>=...`. The values
    may differ: the schema holds the papers' definitions, conf/ the main job's small default."""
    section = yaml.safe_load((root / "conf" / path).read_text())
    section = section[key] if key else section
    assert set(section) == {f.name for f in dataclasses.fields(schema)}, f"conf/{path} and {schema.__name__} differ in keys"


def test_params_validate_into_typed_sections(composed):
    cfg = validate(composed)
    assert cfg.generator.seed == 0
    for name in SOURCES.names():
        assert isinstance(getattr(cfg.generator, name), SOURCES.get(name).Config)


def _with(composed, path, value):
    raw = yaml.safe_load(yaml.safe_dump(composed))
    node = raw
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    node[last] = value
    return raw


@pytest.mark.parametrize(
    "path,value,message",
    [
        ("generator.synthetic.nn", 3, r"generator\.synthetic\.nn: unknown key"),
        ("generator.synthetic.n", "many", r"generator\.synthetic\.n: expected an int, got 'many'"),
        ("generator.zoo.families", ["alexnet", "transformer"], r"generator\.zoo\.families.*'transformer'"),
        ("generator.nasbench201.indices", [15625], r"generator\.nasbench201\.indices"),
        ("generator.synthetic.n", -1, r"generator\.synthetic\.n"),
        ("colour", "blue", r"colour: unknown key"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(composed, path, value, message):
    with pytest.raises(ConfigError, match=message) as exc:
        validate(_with(composed, path, value), where="params.yaml")
    assert "\n" not in str(exc.value)


def test_sections_built_in_python_meet_the_schema_types(composed):
    """A section built in Python (a dataclass or a mapping) is type-checked by the same schema, with
    the same one-line message, as the section read from params.yaml (foundation.configs)."""
    from foundation.configs import coerce
    from generators.synthetic import SyntheticConfig, validate_config
    from pipelines.dataset.usc import UscConfig, validate_config as validate_usc
    from pipelines.scenarios import ScenarioGridConfig
    from pipelines.stats import FixedRuns, make_stopper

    line = "n: expected an int, got 'many'"
    with pytest.raises(ConfigError, match=f"^params.yaml: generator.synthetic.{line}$"):
        validate(_with(composed, "generator.synthetic.n", "many"), where="params.yaml")
    for build in (lambda: validate_config(SyntheticConfig(n="many")), lambda: validate_config({"n": "many"}),
                  lambda: coerce(SyntheticConfig, {"n": "many"})):
        with pytest.raises(ValueError, match=f"^{line}$"):
            build()
    cases = [
        (lambda: validate_config(SyntheticConfig(channel_ranges=[8, 80])), "channel_ranges[0]: expected a list of ints, got 8"),
        (lambda: validate_usc(UscConfig(strict="maybe")), "strict: expected true or false, got 'maybe'"),
        (lambda: ScenarioGridConfig(max_cores="two").validate(), "max_cores: expected an int or null, got 'two'"),
        (lambda: FixedRuns(runs=2.5), "runs: expected an int, got 2.5"),
        (lambda: make_stopper({"policy": "adaptive", "level": "high"}), "level: expected a number, got 'high'"),
    ]
    for build, message in cases:
        with pytest.raises(ValueError) as exc:
            build()
        assert str(exc.value) == message
    # what YAML converts, Python converts the same way
    cfg = validate_config({"n": "3", "split_equal": "no"})
    assert cfg.n == 3 and cfg.split_equal is False
    assert ScenarioGridConfig(cores=("1large",), max_cores="2").validate().max_cores == 2


def test_no_source_selected_is_an_error():
    with pytest.raises(ConfigError, match="generator: no source selected"):
        validate({"generator": {"seed": 0}})


def test_compose_takes_hydra_overrides_and_group_selection():
    raw = compose(["generator.synthetic.n=3", "generator=[synthetic]"])
    assert raw["generator"]["synthetic"]["n"] == 3
    assert set(raw["generator"]) == {"seed", "synthetic"}
    with pytest.raises(ConfigError, match="generator/bogus"):
        compose(["generator=[bogus]"])


def test_missing_and_malformed_params_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "params.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("generator: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml: malformed YAML"):
        load_params(bad)


def test_cli_prints_one_line_and_exits_2(tmp_path, composed):
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(_with(composed, "generator.zoo.families", ["nope"])))
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "generate", "--params", str(bad), "-q"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "latbench: error: params.yaml: generator.zoo.families" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_dvc_exp_run_overrides_reach_the_generate_stage(root, tmp_path):
    """The real DVC + Hydra path: `dvc exp run -S` recomposes conf/ and the stage obeys it."""
    work = tmp_path / "repo"
    # Copy what git sees (tracked and not ignored): no venvs, builds or data.
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True, text=True, check=True)
    for rel in listed.stdout.splitlines():
        if (root / rel).is_file() and not rel.startswith("data/"):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, work / rel)
    dvc = [sys.executable, "-m", "dvc"]
    ident = {k: "latbench-test" for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")}
    ident |= {k: "test@localhost" for k in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")}
    # The stage runs `python`: make it this interpreter, whatever PATH the caller has.
    env = {**os.environ, **ident, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}

    def run(*cmd):
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=env)
        assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
        return r

    run("git", "init", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "init")
    run(*dvc, "exp", "run", "generate", "-S", "generator=[synthetic]", "-S", "generator.synthetic.n=3")
    params = yaml.safe_load((work / "params.yaml").read_text())
    assert params["generator"]["synthetic"]["n"] == 3 and "zoo" not in params["generator"]
    files = sorted((work / "data" / "models" / "synthetic").glob("*.json"))
    assert len(files) == 3
    assert not (work / "data" / "models" / "zoo").exists()
