"""Model files from strangers (``latbench profile``, ``latbench predict``, the importers, the torch
runner): each is held to the bounds of foundation/limits.py before it is parsed, inflated or run.

- a ``.pt`` zip bomb (a TorchScript zip with a member of deflated zeros), a zip whose members
  overlap (one stored member named by thousands of directory entries: gigabytes declared) and a
  zip of ARCHIVE_MEMBERS + 1 members are refused from their central directory;
- an ONNX graph of GRAPH_NODES + 1 nodes is refused before it is parsed, an ONNX or TFLite tensor
  of more than TENSOR_ELEMENTS elements before anything is imported or allocated, a TFLite file of
  GRAPH_NODES + 1 operators likewise.

Every refusal is one line naming the file and the bound (``limits.<NAME>``), exit status 2 (the
runner's own: 4, model_invalid), within WALL_SECONDS and MEMORY: each command runs in a child
process (tests/support/bounded.py) under RLIMIT_AS (MEMORY plus the address space the command's
imports take, measured once per module) and its peak resident memory is asserted below MEMORY:
the child's own high-water mark (VmHWM, which starts afresh at exec), or a descendant's when
larger. Not ``ru_maxrss``: that keeps the resident size the child was forked with, the test
process's, from before exec. The Hypothesis properties throw malformed and oversized ONNX,
TFLite and zip files at the importers (``latbench predict``'s loader) and at ``latbench
profile``'s loader, a batch of files per child process, and ask the same of every answer.
"""
from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from foundation import limits
from support.bounded import run_jobs

GiB = 1024**3
MEMORY = 2 * GiB  # peak resident memory a refusal may take, with everything the command imports
WALL_SECONDS = 30  # a refusal takes well under a second; the rest is imports on a loaded machine
BATCH_WALL_SECONDS = 120
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
BATCHES = settings(max_examples=2, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                   suppress_health_check=_HEALTH)
HOSTILE_DIMS = st.sampled_from([0, -1, -(2**31), 2**15, 2**16 + 1, 2**31 - 1, 2**40, 2**62])

# ---------------------------------------------------------------- the bounded child process
def run_child(jobs: list[dict], work: Path, address_space: int | None, wall: float = WALL_SECONDS) -> dict:
    """Run the jobs in one child process (support/bounded.py: RLIMIT_AS ``address_space``,
    RLIMIT_FSIZE, RLIMIT_CPU); returns its results with ``vm_peak``, ``wall`` seconds and
    ``peak_bytes`` (the child's own peak resident memory, or its descendants'), or fails the test
    on a crash or timeout."""
    return run_jobs(jobs, work, address_space=address_space, file_size=256 * 1024**2, cpu_seconds=240, wall=wall)


def one_line(r: dict, prefix: str, *needles: str) -> str:
    """A refusal: stderr is one line starting with ``prefix`` and holding every needle."""
    lines = r["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix), r["err"][-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def address_space(tmp_path_factory) -> int:
    """RLIMIT_AS for the children: MEMORY plus the address space the commands' imports reserve
    (measured: `latbench predict --list` and a `latbench profile` that stops at the file, in one
    process), not bounded themselves."""
    work = tmp_path_factory.mktemp("baseline")
    junk = work / "junk.tflite"
    junk.write_bytes(b"not a flatbuffer")
    out = run_child([{"kind": "latbench", "argv": ["predict", "--list"]},
                     {"kind": "latbench", "argv": ["profile", str(junk), "--out", str(work / "p"), "-q"]}],
                    work / "child", None)
    assert out["results"][0]["rc"] == 0 and out["results"][1]["rc"] == 2
    return MEMORY + out["vm_peak"]


# ---------------------------------------------------------------- the files
def torchscript_bytes(work: Path) -> bytes:
    import torch

    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    p = work / "tiny.pt"
    torch.jit.trace(m, torch.randn(1, 3, 8, 8)).save(str(p))
    return p.read_bytes()


def deflated_bomb(base: bytes, zeros: int) -> bytes:
    """``base`` (a TorchScript zip) with its constants.pkl replaced by ``zeros`` zero bytes
    written with ZIP_DEFLATED (zipfile's own compressor, about 1000:1): what torch would inflate
    in full before failing to unpickle it."""
    src = zipfile.ZipFile(io.BytesIO(base))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info in src.infolist():
            if info.filename.endswith("constants.pkl"):
                zi = zipfile.ZipInfo(info.filename)
                zi.compress_type = zipfile.ZIP_DEFLATED
                with z.open(zi, "w", force_zip64=True) as f:
                    chunk = bytes(1 << 22)
                    for _ in range(max(1, zeros >> 22)):
                        f.write(chunk)
            else:
                z.writestr(info, src.read(info.filename))
    return buf.getvalue()


def overlapping(member: bytes, copies: int, prefix: str = "archive/data/") -> bytes:
    """A zip (written by zipfile: one stored member) whose central directory names that member's
    data ``copies`` times under distinct names: the overlapping zip bomb (each entry declares the
    member's full size). Zip64 end records when ``copies`` passes 65535."""
    buf = io.BytesIO()
    name = f"{prefix}{0:06d}"
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo(name), member)
    base = buf.getvalue()
    at = base.rfind(b"PK\x05\x06")
    _, _, _, _, n, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", base, at)
    assert n == 1
    entry = base[cd_offset: cd_offset + cd_size]
    k = entry.index(name.encode())
    head, tail = entry[:k + len(prefix)], entry[k + len(name):]
    cd = b"".join(head + b"%06d" % i + tail for i in range(copies))
    out = base[:cd_offset] + cd
    end64 = len(out)
    if copies > 0xFFFF:
        out += struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, copies, copies, len(cd), cd_offset)
        out += struct.pack("<4sLQL", b"PK\x06\x07", 0, end64, 1)
        return out + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(cd), cd_offset, 0)
    return out + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, copies, copies, len(cd), cd_offset, 0)


def onnx_conv() -> "object":
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], [w])
    g.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, ["N", 4, 8, 8]))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def onnx_chain(n: int) -> "object":
    """A real graph of ``n`` Relu nodes in a chain (onnx.helper)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(n)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def tflite_conv(input_shape: tuple[int, ...] = (1, 16, 16, 3), relus: int = 0) -> bytes:
    """A real TFLite flatbuffer (the schema of the ai-edge-litert wheel, the one the importer
    reads): CONV_2D 3x3 VALID with weights and bias, then ``relus`` RELU operators in place."""
    from ai_edge_litert import schema_py_generated as s
    from ai_edge_litert.tools import flatbuffer_utils

    m = s.ModelT()
    m.version = 3
    codes = []
    for op in (s.BuiltinOperator.CONV_2D, s.BuiltinOperator.RELU):
        c = s.OperatorCodeT()
        c.builtinCode = c.deprecatedBuiltinCode = op
        c.version = 1
        codes.append(c)
    m.operatorCodes = codes

    def buffer(data: np.ndarray | None = None):
        b = s.BufferT()
        if data is not None:
            b.data = np.frombuffer(data.tobytes(), dtype=np.uint8)
        return b

    w = np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32)
    m.buffers = [buffer(), buffer(), buffer(w), buffer(np.zeros(8, np.float32)), buffer()]

    def tensor(name: str, shape, buf: int):
        t = s.TensorT()
        t.name, t.shape, t.type, t.buffer = name, np.array(shape, dtype=np.int32), s.TensorType.FLOAT32, buf
        return t

    n, h, w_, c = input_shape
    sg = s.SubGraphT()
    sg.tensors = [tensor("input", input_shape, 1), tensor("w", [8, 3, 3, 3], 2), tensor("b", [8], 3),
                  tensor("out", [n, h - 2, w_ - 2, 8], 4)]
    conv = s.OperatorT()
    conv.opcodeIndex, conv.inputs, conv.outputs = 0, [0, 1, 2], [3]
    opt = s.Conv2DOptionsT()
    opt.padding, opt.strideW, opt.strideH, opt.dilationWFactor, opt.dilationHFactor = s.Padding.VALID, 1, 1, 1, 1
    conv.builtinOptionsType, conv.builtinOptions = s.BuiltinOptions.Conv2DOptions, opt
    relu = s.OperatorT()
    relu.opcodeIndex, relu.inputs, relu.outputs = 1, [3], [3]
    sg.operators = [conv] + [relu] * relus
    sg.inputs, sg.outputs = [0], [3]
    m.subgraphs = [sg]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def tflite_with(buf: bytes, edit) -> bytes:
    """``buf`` unpacked with the schema's object API, changed by ``edit(model)``, packed again."""
    from ai_edge_litert import schema_py_generated as s
    from ai_edge_litert.tools import flatbuffer_utils

    m = s.ModelT.InitFromPackedBuf(bytearray(buf), 0)
    edit(m)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The reproductions, each a real file, built once per module."""
    work = tmp_path_factory.mktemp("models")
    ts = torchscript_bytes(work)
    out = {"tiny.pt": work / "tiny.pt"}
    blobs = {
        "bomb.pt": deflated_bomb(ts, 64 << 20),  # 64 MiB of zeros in ~64 kB
        "overlap.pt": overlapping(os.urandom(1 << 20), 2049),  # 2049 x 1 MiB declared in a 1 MiB file
        "members.pt": overlapping(b"", limits.ARCHIVE_MEMBERS + 1),
        "nodes.onnx": onnx_chain(limits.GRAPH_NODES + 1).SerializeToString(),
        "ops.tflite": tflite_conv(relus=limits.GRAPH_NODES),
        "huge.tflite": tflite_conv((1, 26755, 26755, 3)),  # 2,147,456,775 input elements (~2**31)
    }
    big_input = onnx_conv()
    big_input.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 2**16
    big_input.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 2**16
    blobs["huge.onnx"] = big_input.SerializeToString()
    for name, blob in blobs.items():
        (work / name).write_bytes(blob)
        out[name] = work / name
    return out


def test_the_reproductions_are_what_they_claim(files):
    """The files are real: zipfile lists the overlapping entries and the declared gigabytes, onnx
    and the TFLite schema read the graphs; the bomb inflates ~1000:1."""
    with zipfile.ZipFile(files["overlap.pt"]) as z:
        infos = z.infolist()
        assert len(infos) == 2049 and sum(i.file_size for i in infos) > limits.ARCHIVE_UNPACKED_BYTES
    with zipfile.ZipFile(files["bomb.pt"]) as z:
        i = next(i for i in z.infolist() if i.filename.endswith("constants.pkl"))
        assert i.compress_type == zipfile.ZIP_DEFLATED and i.file_size >= 1000 * i.compress_size
    assert files["members.pt"].read_bytes().count(b"PK\x01\x02") == limits.ARCHIVE_MEMBERS + 1
    import onnx

    assert len(onnx.load(str(files["nodes.onnx"])).graph.node) == limits.GRAPH_NODES + 1
    from ai_edge_litert import schema_py_generated as s

    m = s.Model.GetRootAs(files["ops.tflite"].read_bytes(), 0)
    assert m.Subgraphs(0).OperatorsLength() == limits.GRAPH_NODES + 1
    m = s.Model.GetRootAs(files["huge.tflite"].read_bytes(), 0)
    assert int(np.prod(m.Subgraphs(0).Tensors(0).ShapeAsNumpy().astype(np.int64))) > 2**30


def _bounded(r: dict, out: dict) -> None:
    assert out["wall"] < WALL_SECONDS, out["wall"]
    assert out["peak_bytes"] < MEMORY, f"peak RSS {out['peak_bytes'] / GiB:.2f} GiB"


# ---------------------------------------------------------------- the reproductions, from the command line
ZIPS = [("bomb.pt", "limits.ARCHIVE_RATIO", "/constants.pkl' inflates"),
        ("overlap.pt", "limits.ARCHIVE_UNPACKED_BYTES", "archive/data/"),
        ("members.pt", "limits.ARCHIVE_MEMBERS", f"{limits.ARCHIVE_MEMBERS + 1} members")]


@pytest.mark.parametrize("name,bound,what", ZIPS, ids=[z[0] for z in ZIPS])
def test_profile_refuses_a_zip_before_torch_inflates_it(files, address_space, tmp_path, name, bound, what):
    out = run_child([{"kind": "latbench", "argv": ["profile", str(files[name]), "--shape", "1x3x8x8",
                                                    "--out", str(tmp_path / "p"), "-q"]}], tmp_path / "c", address_space)
    (r,) = out["results"]
    assert r["rc"] == 2
    one_line(r, "latbench: error: ", str(files[name]), bound, what)
    _bounded(r, out)
    assert not (tmp_path / "p").exists()  # nothing written for a refused file


def test_the_torch_runner_refuses_a_zip_bomb(files, address_space, tmp_path):
    """The measure stage's worker for TorchScript checks the archive before torch.jit.load."""
    from pipelines.runners.torch import ERROR_PREFIX, EXIT_INVALID

    out = run_child([{"kind": "torch_runner", "argv": ["--model", str(files["bomb.pt"]), "--input-shape", "1,3,8,8",
                                                       "--warmup", "0", "--runs", "1",
                                                       "--records", str(tmp_path / "r.jsonl")]}],
                    tmp_path / "c", address_space)
    (r,) = out["results"]
    assert r["rc"] == EXIT_INVALID
    one_line(r, ERROR_PREFIX, str(files["bomb.pt"]), "limits.ARCHIVE_RATIO")
    _bounded(r, out)


PREDICTS = [("nodes.onnx", "help-raspi4-cpu", "limits.GRAPH_NODES", f"more than {limits.GRAPH_NODES} nodes"),
            ("huge.onnx", "help-raspi4-cpu", "limits.TENSOR_ELEMENTS", "input 'x' of shape [-1, 3, 65536, 65536]"),
            ("huge.tflite", "host-tflite-cpu-1large-fp32", "limits.TENSOR_ELEMENTS",
             "tensor 'input' (subgraph 0, index 0) of shape [1, 26755, 26755, 3]"),
            ("ops.tflite", "host-tflite-cpu-1large-fp32", "limits.GRAPH_NODES", f"more than {limits.GRAPH_NODES} operators")]


@pytest.mark.parametrize("name,scenario,bound,what", PREDICTS, ids=[p[0] for p in PREDICTS])
def test_predict_refuses_an_oversized_graph_before_importing(files, address_space, tmp_path, name, scenario, bound, what):
    out = run_child([{"kind": "latbench", "argv": ["predict", str(files[name]), "--scenario", scenario]}],
                    tmp_path / "c", address_space)
    (r,) = out["results"]
    assert r["rc"] == 2 and not r["out"].strip()  # no prediction printed
    one_line(r, "latbench: error: ", str(files[name]), bound, what)
    _bounded(r, out)


def test_profile_refuses_a_huge_tflite_tensor_before_running(files, address_space, tmp_path):
    """LiteRT would allocate the 8 GiB input (and the output) in the runner: refused first."""
    out = run_child([{"kind": "latbench", "argv": ["profile", str(files["huge.tflite"]), "--out", str(tmp_path / "p"),
                                                    "-q"]},
                     {"kind": "latbench", "argv": ["profile", str(files["ops.tflite"]), "--out", str(tmp_path / "q"),
                                                    "-q"]}], tmp_path / "c", address_space)
    huge, ops = out["results"]
    assert huge["rc"] == 2 and ops["rc"] == 2
    one_line(huge, "latbench: error: ", str(files["huge.tflite"]), "limits.TENSOR_ELEMENTS", "[1, 26755, 26755, 3]")
    one_line(ops, "latbench: error: ", str(files["ops.tflite"]), "limits.GRAPH_NODES")
    _bounded(huge, out)
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()


def test_bounds_in_process(files, tmp_path):
    """The checks themselves: a real TorchScript file and the small models pass; --shape and
    input_shape are tensors too; zip64 directories are read."""
    from generators.importers import UnsupportedModelError, import_onnx, import_tflite
    from generators.importers.common import check_zip
    from generators.importers.onnx import count_nodes
    from pipelines.profile import ProfileError, check_model_file

    check_zip(files["tiny.pt"])
    check_model_file(files["tiny.pt"], "pytorch", [1, 3, 8, 8])
    with pytest.raises(ProfileError, match=r"--shape \[1, 3, 65536, 65536\] has more than 268435456 elements"):
        check_model_file(files["tiny.pt"], "pytorch", [1, 3, 2**16, 2**16])
    assert import_onnx(onnx_conv()).input_nodes[0].shape == [1, 3, 8, 8]
    with pytest.raises(UnsupportedModelError, match=r"^m: input_shape \[1, 3, 65536, 65536\] has more than"):
        import_onnx(onnx_conv(), input_shape=[1, 3, 2**16, 2**16], name="m")
    blob = tflite_conv()
    assert import_tflite(blob).input_nodes[0].shape == [1, 3, 16, 16]
    with pytest.raises(UnsupportedModelError, match=r"^t: input_shape \[1, 3, 65536, 65536\] has more than"):
        import_tflite(blob, input_shape=[1, 3, 2**16, 2**16], name="t")
    # a declared initializer: refused from its dims, no data read
    m = onnx_conv()
    m.graph.initializer[0].dims[:] = [2**20, 2**20]
    with pytest.raises(UnsupportedModelError, match=r"^m: initializer 'w' of shape \[1048576, 1048576\] has more"):
        import_onnx(m, name="m")
    # nodes in subgraphs count: an If whose branch is a long chain
    from onnx import TensorProto, helper

    chain = onnx_chain(limits.GRAPH_NODES).graph
    g = helper.make_graph([helper.make_node("If", ["c"], ["t100000"], then_branch=chain, else_branch=chain)], "if",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info(f"t{limits.GRAPH_NODES}", TensorProto.FLOAT, [1, 8])])
    nested = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    assert count_nodes(onnx_conv().SerializeToString(), "m") == 2
    assert count_nodes(nested.SerializeToString(), "m") == limits.GRAPH_NODES + 1
    with pytest.raises(UnsupportedModelError, match=r"^nested: more than 100000 nodes \(limits.GRAPH_NODES\)"):
        import_onnx(nested, name="nested")
    # a zip with a zip64 directory (ARCHIVE_MEMBERS + 1 entries) is read to its end record
    with pytest.raises(UnsupportedModelError, match=r"100001 members, more than 100000 \(limits.ARCHIVE_MEMBERS\)"):
        check_zip(files["members.pt"])
    small = tmp_path / "small.pt"
    small.write_bytes(overlapping(b"x" * 100, 70_000))  # zip64 end records, within every bound
    check_zip(small)


# ---------------------------------------------------------------- properties: malformed and oversized files
def _mangle(data: bytes, draw) -> bytes:
    """``data`` cut short, or with a few bytes overwritten, or with a run of 0xff (a varint that
    never ends) put in."""
    how = draw(st.integers(0, 2))
    if how == 0:
        return data[: draw(st.integers(0, len(data)))]
    b = bytearray(data)
    if how == 1:
        for _ in range(draw(st.integers(1, 8))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        return bytes(b)
    at = draw(st.integers(0, len(b)))
    return bytes(b[:at]) + b"\xff" * draw(st.integers(1, 12)) + bytes(b[at:])


def _each_loads_or_refuses(jobs: list[dict], tmp_path_factory, address_space: int, path_first: bool = False) -> None:
    """A batch of malformed files in one bounded child: each is read (rc 0) or refused in one
    line naming its file (rc 2; ``path_first``: the line starts with the file's path), and the
    child stays under MEMORY."""
    out = run_child(jobs, tmp_path_factory.mktemp("child"), address_space, BATCH_WALL_SECONDS)
    for job, r in zip(jobs, out["results"]):
        assert r["rc"] in (0, 2), r
        if r["rc"] == 2:
            one_line(r, job["path"] if path_first else "", Path(job["path"]).stem)
    assert out["peak_bytes"] < MEMORY


@st.composite
def malformed_onnx(draw, chain: bytes) -> tuple[bytes, list[int] | None]:
    m = onnx_conv()
    kind = draw(st.integers(0, 4))
    shape = None
    if kind == 0:
        return _mangle(m.SerializeToString(), draw), None
    if kind == 1:  # a hostile dimension on a declared tensor
        where = draw(st.sampled_from(["input", "output", "value_info", "initializer"]))
        dim = draw(HOSTILE_DIMS)
        if where == "initializer":
            m.graph.initializer[0].dims[draw(st.integers(0, 3))] = dim
        else:
            vi = {"input": m.graph.input, "output": m.graph.output, "value_info": m.graph.value_info}[where][0]
            vi.type.tensor_type.shape.dim[draw(st.integers(0, 3))].dim_value = dim
    elif kind == 2:  # too many nodes, maybe cut
        data = chain
        return (data[: draw(st.integers(len(data) // 2, len(data)))] if draw(st.booleans()) else data), None
    elif kind == 3:  # input_shape given on the command line
        shape = [1, 3, draw(HOSTILE_DIMS), draw(st.sampled_from([1, 8, 2**16]))]
    else:  # a constant the importer would evaluate: ConstantOfShape / Expand of a hostile shape
        from onnx import TensorProto, helper

        op = draw(st.sampled_from(["ConstantOfShape", "Expand"]))
        dims = [draw(HOSTILE_DIMS), draw(HOSTILE_DIMS)]
        shape_t = helper.make_tensor("s", TensorProto.INT64, [2], dims)
        nodes = [helper.make_node("Constant", [], ["s"], value=shape_t)]
        if op == "ConstantOfShape":
            nodes.append(helper.make_node("ConstantOfShape", ["s"], ["k"]))
        else:
            nodes += [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])),
                      helper.make_node("Expand", ["one", "s"], ["k"])]
        nodes.append(helper.make_node("Reshape", ["x", "k"], ["r"]))
        for n in reversed(nodes):
            m.graph.node.insert(0, n)
    return m.SerializeToString(), shape


@given(st.data())
@BATCHES
def test_malformed_onnx_files(files, address_space, tmp_path_factory, data):
    work = tmp_path_factory.mktemp("onnx")
    chain = files["nodes.onnx"].read_bytes()
    jobs = []
    for i in range(10):
        blob, shape = data.draw(malformed_onnx(chain))
        p = work / f"m{i}.onnx"
        p.write_bytes(blob)
        jobs.append({"kind": "predict_load", "path": str(p), "shape": shape})
    _each_loads_or_refuses(jobs, tmp_path_factory, address_space)


@st.composite
def malformed_tflite(draw, many_ops: bytes) -> tuple[bytes, list[int] | None]:
    base = tflite_conv()
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return _mangle(base, draw), None
    if kind == 1:  # a hostile shape or shape signature on a tensor
        t, k, dim = draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(HOSTILE_DIMS)
        sig = draw(st.booleans())

        def edit(m):
            tensor = m.subgraphs[0].tensors[t]
            shape = [int(v) for v in tensor.shape]
            shape[min(k, len(shape) - 1)] = max(min(dim, 2**31 - 1), -(2**31))
            if sig:
                tensor.shapeSignature = np.array(shape, dtype=np.int32)
            else:
                tensor.shape = np.array(shape, dtype=np.int32)

        return tflite_with(base, edit), None
    if kind == 2:
        return (many_ops if draw(st.booleans()) else _mangle(many_ops, draw)), None
    return base, [1, 3, draw(HOSTILE_DIMS), draw(st.sampled_from([1, 16, 2**16]))]


@given(st.data())
@BATCHES
def test_malformed_tflite_files(files, address_space, tmp_path_factory, data):
    work = tmp_path_factory.mktemp("tflite")
    many = files["ops.tflite"].read_bytes()
    jobs = []
    for i in range(8):
        blob, shape = data.draw(malformed_tflite(many))
        p = work / f"t{i}.tflite"
        p.write_bytes(blob)
        nchw = shape
        nhwc = None if shape is None else [shape[0], shape[2], shape[3], shape[1]]
        jobs.append({"kind": "predict_load", "path": str(p), "shape": nchw})
        jobs.append({"kind": "profile_load", "path": str(p), "shape": nhwc})
    _each_loads_or_refuses(jobs, tmp_path_factory, address_space)


def _forge_sizes(data: bytes, draw) -> bytes:
    """One central directory entry of ``data`` declaring other sizes (the local header unchanged)."""
    b = bytearray(data)
    starts = [i for i in range(len(b)) if b[i:i + 4] == b"PK\x01\x02"]
    at = draw(st.sampled_from(starts))
    packed, unpacked = struct.unpack_from("<2L", b, at + 20)
    factor = draw(st.sampled_from([2, 201, 10**4, 2**20]))
    struct.pack_into("<L", b, at + 24, min(0xFFFFFFFE, max(unpacked, 1) * factor))
    if draw(st.booleans()):
        struct.pack_into("<L", b, at + 20, min(0xFFFFFFFE, packed * factor))
    return bytes(b)


@st.composite
def malformed_zip(draw, torchscript: bytes) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return _mangle(torchscript, draw)
    if kind == 1:
        return deflated_bomb(torchscript, draw(st.sampled_from([1 << 20, 1 << 22, 1 << 23])))
    if kind == 2:
        return _forge_sizes(torchscript, draw)
    if kind == 3:
        return overlapping(os.urandom(draw(st.sampled_from([10, 1 << 16]))), draw(st.sampled_from([2, 40_000, 70_000])))
    if kind == 4:  # the end record's counts and offsets
        b = bytearray(torchscript)
        at = b.rfind(b"PK\x05\x06")
        field = draw(st.sampled_from([(8, "<H"), (10, "<H"), (12, "<L"), (16, "<L")]))
        struct.pack_into(field[1], b, at + field[0], draw(st.sampled_from([0, 1, 0xFFFF, 0xFFFFFFFF]))
                         & (0xFFFF if field[1] == "<H" else 0xFFFFFFFF))
        return bytes(b)
    # the same TorchScript members deflated (a valid archive: torch reads it)
    src = zipfile.ZipFile(io.BytesIO(torchscript))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info.filename, src.read(info.filename))
    return buf.getvalue()


@given(st.data())
@BATCHES
def test_malformed_zip_files(files, address_space, tmp_path_factory, data):
    work = tmp_path_factory.mktemp("zip")
    ts = files["tiny.pt"].read_bytes()
    jobs = []
    for i in range(8):
        p = work / f"z{i}.pt"
        p.write_bytes(data.draw(malformed_zip(ts)))
        jobs.append({"kind": "profile_load", "path": str(p), "shape": [1, 3, 8, 8]})
    _each_loads_or_refuses(jobs, tmp_path_factory, address_space, path_first=True)
