"""ETDump of a tiny ExecuTorch program run N times: N executions, each with its XNNPACK
operators' delegate events and its portable kernel, read back by pipelines/runners/etdump.py,
which agrees with ExecuTorch's Inspector on every run, call and event."""
from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("executorch")

from generators.export.executorch import export_executorch  # noqa: E402
from generators.export.torch_module import example_tensors  # noqa: E402
from generators.ir import Graph  # noqa: E402
from pipelines.runners.etdump import EtdumpError, read_etdump, write_etdump  # noqa: E402

RUNS = 5


def tiny_graph() -> Graph:
    """conv+relu | nearest upsampling (portable) | conv, mean, fc: two delegate calls around a kernel."""
    g = Graph(name="etdump-tiny", source="test")
    x = g.input([1, 3, 16, 16])
    x = g.add("relu", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    x = g.add("upsample", x, scale=[2, 2])
    x = g.add("conv2d", x, out_channels=8, kernel=1)
    x = g.add("fc", g.add("flatten", g.add("global_avgpool", x)), out_features=10)
    return g.set_outputs(x).validate()


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from executorch.runtime import Runtime

    graph = tiny_graph()
    path = tmp_path_factory.mktemp("etdump") / "tiny.pte"
    facts = export_executorch(graph, path)
    assert facts["delegate_calls"] == 2 and facts["portable_ops"] == {"aten.upsample_nearest2d.vec": 1}
    prog = Runtime.get().load_program(path, enable_etdump=True)
    method = prog.load_method("forward")
    return prog, method, example_tensors(graph), path.parent


def _execute(program, n: int, name: str):
    prog, method, inputs, folder = program
    for _ in range(n):
        method.execute(inputs)
    return read_etdump(write_etdump(prog, folder / name))


def test_n_executions_with_one_event_per_operator_each(program):
    d = _execute(program, RUNS, "a.etdp")
    ex = d["executions"]
    assert [e["run"] for e in ex] == list(range(RUNS))
    assert all(e["duration_ns"] > 0 for e in ex)
    assert [e["start_ns"] for e in ex] == sorted(e["start_ns"] for e in ex)

    # per run: delegate call, the portable kernel's operator call, delegate call
    for k in range(RUNS):
        calls = [c for c in d["calls"] if c["run"] == k]
        assert [c["kind"] for c in calls] == ["delegate", "operator", "delegate"]
        assert sum(c["duration_ns"] for c in calls) <= ex[k]["duration_ns"]

    by_run = [[e for e in d["events"] if e["run"] == k] for k in range(RUNS)]
    first = [(e["call"], e["name"], e["kind"]) for e in by_run[0]]
    for events in by_run:
        # the same operators in every execution, each once, in order
        assert [(e["call"], e["name"], e["kind"]) for e in events] == first
        assert [e["order"] for e in events] == list(range(len(events)))
    assert len(set((c, n) for c, n, _ in first)) == len(first)
    kinds = Counter(kind for _, _, kind in first)
    assert kinds["portable"] == 1 and kinds["delegated"] >= 4
    assert [n for c, n, kind in first if kind == "portable"] == ["upsample_nearest2d.vec_out"]
    delegated = [n for c, n, kind in first if kind == "delegated"]
    # XNNPACK's own operator names, numbered per delegate call
    assert "Convolution (NHWC, F32) IGEMM #1" in delegated and any(n.startswith("Fully Connected") for n in delegated)
    assert {c for c, _, kind in first if kind == "delegated"} == {0, 2}
    for k, events in enumerate(by_run):
        for call in (0, 2):
            dur = next(c["duration_ns"] for c in d["calls"] if c["run"] == k and c["call"] == call)
            ops = [e["duration_ns"] for e in events if e["call"] == call]
            assert all(t >= 0 and t % 1000 == 0 for t in ops)  # XNNPACK measures whole microseconds
            assert sum(ops) <= dur + 1000 * len(ops)


def _inspector_reading(path) -> dict[str, list[tuple]]:
    """The same file as ExecuTorch's Inspector groups it: per run, Method::execute's span, the
    calls' spans and each operator event's name and span (the reference of read_etdump)."""
    import warnings

    from executorch.devtools import Inspector
    from executorch.devtools.inspector import TimeScale

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Output Buffer not found": no debug buffer, by design
        insp = Inspector(etdump_path=str(path), source_time_scale=TimeScale.NS, target_time_scale=TimeScale.NS)
    runs = []
    for block in insp.event_blocks:
        events = [e for e in block.events if e.perf_data is not None]
        execute = next((e for e in events if e.name == "Method::execute"), None)
        if execute is None:
            continue
        for i, start in enumerate(execute.start_time):
            spans = [(e.name, int(e.start_time[i]), round(e.perf_data.raw[i]), bool(e.is_delegated_op))
                     for e in events]
            runs.append(spans)
    runs.sort(key=lambda r: next(s for n, s, _, _ in r if n == "Method::execute"))
    out: dict[str, list[tuple]] = {"executions": [], "calls": [], "events": []}
    for k, spans in enumerate(runs):
        for name, start, dur, delegated in spans:
            if name == "Method::execute":
                out["executions"].append((k, start, dur))
            elif name in ("DELEGATE_CALL", "OPERATOR_CALL"):
                out["calls"].append((k, start, dur))
            elif delegated or name.startswith("native_call_"):
                out["events"].append((k, name.removeprefix("native_call_"), start, dur))
    return {key: sorted(v) for key, v in out.items()}


def test_the_reading_agrees_with_executorchs_inspector(program):
    prog, method, inputs, folder = program
    for _ in range(3):
        method.execute(inputs)
    path = write_etdump(prog, folder / "ref.etdp")
    d = read_etdump(path)
    mine = {"executions": sorted((e["run"], e["start_ns"], e["duration_ns"]) for e in d["executions"]),
            "calls": sorted((c["run"], c["start_ns"], c["duration_ns"]) for c in d["calls"]),
            "events": sorted((e["run"], e["name"], e["start_ns"], e["duration_ns"]) for e in d["events"])}
    ref = _inspector_reading(path)
    assert len(mine["executions"]) == 3 and len(mine["events"]) >= 15
    assert mine == ref


def test_each_write_holds_the_executions_since_the_last(program):
    _execute(program, 2, "b.etdp")
    assert len(_execute(program, 3, "c.etdp")["executions"]) == 3


def test_errors_name_the_file(tmp_path):
    with pytest.raises(EtdumpError, match="no such ETDump file") as e:
        read_etdump(tmp_path / "missing.etdp")
    assert str(tmp_path / "missing.etdp") in str(e.value)
    bad = tmp_path / "bad.etdp"
    bad.write_bytes(b"not an etdump at all")
    with pytest.raises(EtdumpError, match="not an ETDump") as e:
        read_etdump(bad)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
