"""The generate stage: deterministic, valid, unique, indexed."""
import csv
import hashlib

import pytest

from generators.ir import Graph
from pipelines.config import compose, validate
from pipelines.generate import run_generate

SMALL = [
    "generator.synthetic.n=6",
    "generator.zoo.variants=1",
    "generator.zoo.families=[resnet,mobilenetv2,shufflenetv2]",
    "generator.nasbench201.n=4",
    "generator.pytorch.models=[squeezenet_v1_1]",
    "generator.transformer.n=3",
]


def digest(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    cfg = validate(compose(SMALL))
    out = tmp_path_factory.mktemp("models")
    counts = run_generate(cfg, out_dir=out, progress=False)
    return cfg, out, counts


def test_every_source_writes_valid_networks_with_unique_ids(generated):
    cfg, out, counts = generated
    assert counts == {"nasbench201": 4, "pytorch": 1, "synthetic": 6, "transformer": 3, "zoo": 6}
    ids = set()
    for path in out.glob("*/*.json"):
        g = Graph.load(path)
        assert path.stem == g.model_id and path.parent.name == g.source
        ids.add(g.model_id)
    assert len(ids) == sum(counts.values())


def test_index_lists_every_network_with_its_costs(generated):
    _, out, counts = generated
    rows = list(csv.DictReader((out / "index.csv").open()))
    assert len(rows) == sum(counts.values())
    for r in rows:
        g = Graph.load(out / r["source"] / f"{r['model_id']}.json")
        assert int(r["flops"]) == g.flops and int(r["params"]) == g.params and r["name"] == g.name


def test_same_config_gives_byte_identical_files(generated, tmp_path):
    cfg, out, _ = generated
    run_generate(cfg, out_dir=tmp_path, progress=False)
    assert digest(tmp_path) == digest(out)


def test_a_smaller_config_removes_stale_files(generated, tmp_path):
    cfg, out, _ = generated
    run_generate(cfg, out_dir=tmp_path, progress=False)
    small = validate(compose(["generator=[synthetic]", "generator.synthetic.n=2"]))
    run_generate(small, out_dir=tmp_path, progress=False)
    assert len(list(tmp_path.glob("*/*.json"))) == 2
    first_two = sorted(p.name for p in (out / "synthetic").glob("*.json"))
    assert all(p.name in first_two for p in (tmp_path / "synthetic").glob("*.json"))
