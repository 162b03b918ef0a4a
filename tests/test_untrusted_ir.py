"""Untrusted IR files (issue 15, defect 8): every malformed file is one IRError line naming the
file (and the node), never a traceback, and `latbench validate` goes on past it."""
from __future__ import annotations

import json

import pytest

from generators.ir import Graph, IRError
from generators.ops import OPS, REQUIRED

X = {"name": "x", "op": "input", "attrs": {"shape": [1, 3, 8, 8]}}


def doc(nodes, outputs, **extra) -> dict:
    return {"format": "latbench-ir", "version": 1, "nodes": nodes, "outputs": outputs, **extra}


def relu(**attrs) -> dict:
    return {"name": "r", "op": "relu", "inputs": ["x"], "attrs": attrs}


def node(op: str, **attrs) -> dict:
    return {"name": "r", "op": op, "inputs": ["x"], "attrs": attrs}


CASES = [
    ("meta a list", doc([X, relu()], ["r"], meta=[1, 2]), "'meta' must be an object, got list"),
    ("meta a string", doc([X, relu()], ["r"], meta="hello"), "'meta' must be an object, got str"),
    ("name a number", doc([X, relu()], ["r"], name=5), "'name' must be a string"),
    ("attribute 'name'", doc([X, relu(name="y")], ["r"]), r"node 'r' \(relu\): unknown attribute\(s\) \['name'\]"),
    ("attribute 'op'", doc([X, relu(op="y")], ["r"]), r"node 'r' \(relu\): unknown attribute\(s\) \['op'\]"),
    ("attribute 'inputs'", doc([X, relu(inputs=["x"])], ["r"]), r"unknown attribute\(s\) \['inputs'\]"),
    ("attribute 'block'", doc([X, relu(block="b")], ["r"]), r"unknown attribute\(s\) \['block'\]"),
    ("outputs [5]", doc([X, relu()], [5]), "output 5: expected a tensor reference"),
    ("block a list", doc([X, {**relu(), "block": [1]}], ["r"]), "node 'r': 'block' must be a string or null"),
    ("prelu negative", doc([X, node("prelu", num_parameters=-3)], ["r"]), r"node 'r' \(prelu\): num_parameters must be an int"),
    ("prelu a string", doc([X, node("prelu", num_parameters="3")], ["r"]), r"node 'r' \(prelu\): num_parameters must be an int"),
    ("prelu not 1 or C", doc([X, node("prelu", num_parameters=5)], ["r"]), "num_parameters must be 1 or the 3 input channels"),
    ("bias 'no'", doc([X, node("conv2d", out_channels=4, kernel=1, bias="no")], ["r"]), "bias must be true or false, got 'no'"),
    ("bool as size", doc([X, node("conv2d", out_channels=True, kernel=1)], ["r"]), "out_channels must be an int"),
    ("bool in shape", doc([{**X, "attrs": {"shape": [1, True, 8, 8]}}, relu()], ["r"]), r"node 'x' \(input\): shape must be a list"),
    ("bool ceil_mode int", doc([X, node("maxpool", kernel=2, ceil_mode=1)], ["r"]), "ceil_mode must be true or false"),
    ("huge size", doc([X, node("fc", out_features=10**30)], ["r"]), "out_features must be an int in"),
    ("huge kernel", doc([X, node("maxpool", kernel=2**40)], ["r"]), "kernel must be at most 2147483647"),
    ("pads of 3", doc([X, node("pad", pads=[1, 1, 1])], ["r"]), r"pads must be four non-negative ints \[top, bottom"),
    ("pad value a string", doc([X, node("pad", pads=[1, 1, 1, 1], value="0")], ["r"]), "value must be a finite number"),
    ("upsample mode", doc([X, node("upsample", scale=2, mode="bicubic")], ["r"]),
     "mode must be 'nearest' or 'bilinear' or 'bilinear_corners', got 'bicubic'"),
]


@pytest.mark.parametrize("what,d,message", CASES, ids=[c[0] for c in CASES])
def test_malformed_ir_is_one_line_naming_the_file(what, d, message):
    with pytest.raises(IRError, match=message) as exc:
        Graph.from_dict(d, "bad.json")
    assert str(exc.value).startswith("bad.json: ") and "\n" not in str(exc.value)


def test_nan_alpha_refused_from_a_file_and_from_code():
    text = json.dumps(doc([X, node("leaky_relu", alpha=float("nan"))], ["r"]))  # json writes NaN
    with pytest.raises(IRError, match="bad.json: NaN is not a JSON number"):
        Graph.from_json(text, "bad.json")
    with pytest.raises(IRError, match=r"node 'r' \(leaky_relu\): alpha must be a finite number, got nan"):
        Graph.from_dict(doc([X, node("leaky_relu", alpha=float("nan"))], ["r"]), "bad.json")


@pytest.mark.parametrize("text,message", [
    ('{"format":"latbench-ir","version":1,"nodes":[{"name":"x","op":"input","attrs":{"shape":[1,' + "9" * 5000 + "]}}]}",
     "an integer of 5000 digits"),
    ('{"format":"latbench-ir","meta":' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64 levels"),
    ('{"format":"latbench-ir","meta":{"a":Infinity}}', "Infinity is not a JSON number"),
])
def test_hostile_json_is_refused_before_parsing_deeply(text, message):
    with pytest.raises(IRError, match=message) as exc:
        Graph.from_json(text, "bad.json")
    assert "\n" not in str(exc.value)


def test_latin1_and_oversized_files(tmp_path):
    p = tmp_path / "latin1.json"
    p.write_bytes('{"format": "latbench-ir", "name": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(IRError, match="latin1.json: not UTF-8 text"):
        Graph.load(p)
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: no disk used, and the loader must not read it whole
        fh.truncate(64 * 1024 * 1024)
    with pytest.raises(IRError, match="big.json: larger than"):
        Graph.load(big)


def test_every_operator_attribute_has_a_kind():
    """The op registry holds an attribute schema: a kind for every attribute, defaults pass it."""
    for name, spec in OPS.items():
        assert set(spec.attrs) <= set(spec.types), name
        for key, default in spec.attrs.items():
            if default is not REQUIRED:
                spec.types[key](default, key)


def test_validate_goes_on_past_bad_files(tmp_path, capsys):
    from generators.ir import Graph as G
    from pipelines.cli import main

    g = G("ok")
    x = g.input([1, 3, 8, 8])
    g.set_outputs(g.add("relu", x))
    good = g.save(tmp_path / "good.json")
    bad = []
    for i, (_, d, _) in enumerate(CASES[:8]):
        p = tmp_path / f"bad{i}.json"
        p.write_text(json.dumps(d))
        bad.append(str(p))
    (tmp_path / "nested.json").write_text("[" * 100_000)
    bad.append(str(tmp_path / "nested.json"))
    with pytest.raises(SystemExit) as exc:
        main(["validate", *bad[:4], str(good), *bad[4:]])
    assert exc.value.code == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(bad) + 1
    assert f"ok {good} {g.model_id}" in out
    assert sum(line.startswith("invalid ") for line in out) == len(bad)
    for p in bad:
        assert any(line.startswith(f"invalid {p}: ") for line in out), p
