"""The machine a host prediction is priced on: the processor description read from /proc/cpuinfo,
what a release records of it, and what `latbench predict` says of this machine beside the
release's (shelf/machine.py), with the speed probe's readings given (no native probe needed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.devices.host import HostDevice, parse_cpuinfo
from pipelines.release import ReleaseError, processor_differences
from pipelines.release_writer import machines

FLAGS = ("fpu vme sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt aes avx f16c avx2 bmi2 avx512f avx512dq "
         "avx512bw avx512vl avx512_bf16 avx512_vnni vaes")


def epyc(stepping: int = 1, model: int = 17, flags: str = FLAGS) -> str:
    block = (f"processor\t: {{cpu}}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: {model}\n"
             f"model name\t: AMD EPYC\nstepping\t: {stepping}\nmicrocode\t: 0x1000065\nflags\t\t: {flags}\n")
    return "\n".join(block.format(cpu=c) for c in (0, 1))


ARM = """processor\t: 0
BogoMIPS\t: 38.40
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd0b
CPU revision\t: 0

Hardware\t: Qualcomm Technologies, Inc SM8150
"""


def test_parse_cpuinfo_x86_and_arm():
    d = parse_cpuinfo(epyc())
    assert {k: d[k] for k in ("vendor", "model_name", "family", "model", "stepping")} == \
        {"vendor": "AuthenticAMD", "model_name": "AMD EPYC", "family": "25", "model": "17", "stepping": "1"}
    assert d["isa"] == ["avx", "avx2", "avx512_bf16", "avx512_vnni", "avx512bw", "avx512dq", "avx512f", "avx512vl",
                        "f16c", "fma", "sse4_1", "sse4_2"]
    assert d["flags"] == len(FLAGS.split()) and len(d["flags_sha256"]) == 16
    # the hash is of the set of flags, not of their order on the line
    assert parse_cpuinfo(epyc(flags=" ".join(reversed(FLAGS.split()))))["flags_sha256"] == d["flags_sha256"]
    assert parse_cpuinfo(epyc(flags=FLAGS + " amx_tile"))["flags_sha256"] != d["flags_sha256"]
    a = parse_cpuinfo(ARM)
    assert (a["vendor"], a["family"], a["model"], a["stepping"]) == ("0x41", "8", "0xd0b", "0")
    assert a["model_name"] == "Qualcomm Technologies, Inc SM8150" and a["isa"] == ["asimd", "asimddp", "asimdhp", "fphp"]
    assert parse_cpuinfo("") is None


def test_the_host_description_carries_the_processor(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(epyc())
    d = HostDevice("vm", root=str(tmp_path)).describe()
    assert d["cpu_model"] == "AMD EPYC" and d["processor"] == parse_cpuinfo(epyc())


def test_processor_differences():
    a, b = parse_cpuinfo(epyc()), parse_cpuinfo(epyc(stepping=2, flags=FLAGS.replace(" avx512_bf16", "")))
    assert processor_differences(a, b) == ["stepping 2 vs 1", "isa: lacks avx512_bf16"]
    assert processor_differences(a, parse_cpuinfo(epyc())) == [] and processor_differences(None, a) == []


def _status(root: Path, device: str, sid: str, proc: dict | None) -> None:
    f = root / device / sid / "SCENARIO.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps({"status": "measured", "device": {"name": device, "cpu_model": "AMD EPYC",
                                                              **({"processor": proc} if proc else {})}}))


def test_a_release_records_the_machine_of_its_records(tmp_path):
    base = parse_cpuinfo(epyc())
    _status(tmp_path, "host", "host-tflite-cpu-1large-fp32", base)
    _status(tmp_path, "host", "host-tflite-cpu-2large-fp32", parse_cpuinfo(epyc(flags=FLAGS + " amx_tile")))
    _status(tmp_path, "old", "old-tflite-cpu-1large-fp32", None)  # a record from before descriptions had it
    m = machines(tmp_path)
    assert list(m) == ["host"]
    assert {k: m["host"][k] for k in ("family", "model", "stepping")} == {"family": "25", "model": "17", "stepping": "1"}
    assert m["host"]["isa"] == base["isa"] and isinstance(m["host"]["flags_sha256"], list)  # two flags lines
    _status(tmp_path, "host", "host-pytorch-cpu-1large-fp32", parse_cpuinfo(epyc(model=1)))
    # the records in path order: the first (host-pytorch-...) is the one the others are held against
    with pytest.raises(ReleaseError, match=r"host-tflite-cpu-1large-fp32/SCENARIO.json: device 'host' ran on another "
                                           r"processor than in .*host-pytorch-cpu-1large-fp32/SCENARIO.json "
                                           r"\(model 17 vs 1\); a release holds one machine's measurements$"):
        machines(tmp_path)


# ---------------------------------------------------------------- latbench predict's machine line
def _release(tmp_path: Path, machine: dict | None) -> str:
    folder = tmp_path / "datasets" / "host-v9"
    folder.mkdir(parents=True)
    manifest = {"processors": {"host": ["AMD EPYC"]}, "probe_reference_s": {"host": {"0": 0.0005, "1": 0.0005}}}
    if machine:
        manifest["machine"] = {"host": machine}
    (folder / "RELEASE.json").write_text(json.dumps(manifest))
    return str(folder)


def _root(tmp_path: Path, cpuinfo: str) -> str:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "cpuinfo").write_text(cpuinfo)
    cpus = root / "sys/devices/system/cpu"
    for c in (0, 1):
        (cpus / f"cpu{c}").mkdir(parents=True)
    (cpus / "online").write_text("0-1\n")
    return str(root)


def test_predict_states_both_machines_and_the_probe_ratio(tmp_path, monkeypatch):
    import shelf.machine as sm

    monkeypatch.setattr(sm, "_probe", lambda cpus, probes=sm.PROBES: {c: 0.00081 for c in cpus})
    release = _release(tmp_path, None)
    entries = {sid: {"training": {"release": release}}
               for sid in ("host-tflite-cpu-1large-fp32", "host-tflite-cpu-2large-fp32", "host-tflite-gpu-fp32")}
    entries["usc-pixel4-tflite-cpu-1large-fp32"] = {"training": {}}  # a phone: no machine, no probe
    (c,) = sm.compare(entries, root=_root(tmp_path, epyc()))
    assert c.cpus == {"host-tflite-cpu-1large-fp32": (0,), "host-tflite-cpu-2large-fp32": (0, 1),
                      "host-tflite-gpu-fp32": ()}
    assert c.ratio("host-tflite-cpu-1large-fp32") == pytest.approx(1.62) and c.ratio("host-tflite-gpu-fp32") is None
    first, note = c.lines(scaled=False)
    assert first.startswith(f"machine: priced on {entries['host-tflite-gpu-fp32']['training']['release']} (host: "
                            "AMD EPYC (family/model/stepping not recorded); probe reference CPU 0 0.500 ms, CPU 1 "
                            "0.500 ms); this machine: AMD EPYC (AuthenticAMD family 25 model 17 stepping 1); probe "
                            "now CPU 0 0.810 ms, CPU 1 0.810 ms (median of 7)")
    assert "its probe reads x1.62 the release's time (slower)" in note and "--scale-to-this-machine" in note
    assert "scaled by the probe ratio (an estimate)" in c.lines(scaled=True)[1]
    # the same speed and processor: one line, nothing to note
    monkeypatch.setattr(sm, "_probe", lambda cpus, probes=sm.PROBES: {c: 0.00052 for c in cpus})
    assert len(sm.compare(entries, root=_root(tmp_path / "b", epyc()))[0].lines(scaled=False)) == 1


def test_predict_names_a_processor_that_differs(tmp_path, monkeypatch):
    import shelf.machine as sm

    monkeypatch.setattr(sm, "_probe", lambda cpus, probes=sm.PROBES: {c: 0.0005 for c in cpus})
    entries = {"host-tflite-cpu-1large-fp32": {"training": {"release": _release(tmp_path, parse_cpuinfo(epyc()))}}}
    (c,) = sm.compare(entries, root=_root(tmp_path, epyc(stepping=2).replace("AMD EPYC", "AMD EPYC 9R14")))
    first, note = c.lines(scaled=False)
    assert "(host: AMD EPYC (AuthenticAMD family 25 model 17 stepping 1)" in first
    assert note.startswith("note: this machine differs: its processor differs from the release's (model name "
                           "'AMD EPYC 9R14' vs 'AMD EPYC'; stepping 2 vs 1)")


def test_without_the_native_probe_the_line_says_so(tmp_path, monkeypatch):
    import pipelines.speed_probe as sp
    import shelf.machine as sm

    def absent(path=sp.PROBE_LIB):
        raise FileNotFoundError(f"{path}: the speed probe is not built (run native/build.sh)")

    monkeypatch.setattr(sp, "_probe_lib", absent)
    entries = {"host-tflite-cpu-1large-fp32": {"training": {"release": _release(tmp_path, None)}}}
    (c,) = sm.compare(entries, root=_root(tmp_path, epyc()))
    assert c.ratio("host-tflite-cpu-1large-fp32") is None
    assert c.lines(scaled=False)[0].endswith(f"no probe reading ({sp.PROBE_LIB} absent: native/build.sh builds the "
                                             "speed probe)")
    with pytest.raises(ValueError, match=r"^host-x-cpu-1large-fp32: the shelf entry records no release"):
        sm.compare({"host-x-cpu-1large-fp32": {"training": {}}})


def test_scaled_host_predictions_are_labelled_estimates(monkeypatch, tmp_path, capsys):
    """`latbench predict --scale-to-this-machine` on the committed shelf: the host figure is the
    unscaled one times the probe ratio, labelled an estimate, and so is its breakdown."""
    import shelf.machine as sm
    from generators.nasbench201 import build as build_cell
    from pipelines.cli import main

    sid = "host-tflite-cpu-1large-fp32"
    ref = json.loads((Path(sm.__file__).parents[1] / "datasets/host-v1/RELEASE.json").read_text())
    monkeypatch.setattr(sm, "_probe", lambda cpus, probes=sm.PROBES:
                        {c: 2 * ref["probe_reference_s"]["host"][str(c)] for c in cpus})
    path = build_cell(123).save(tmp_path / "cell.json")
    assert main(["predict", str(path), "--scenario", sid, "--top", "2"]) == 0
    plain = capsys.readouterr().out
    assert main(["predict", str(path), "--scenario", sid, "--top", "2", "--scale-to-this-machine"]) == 0
    scaled = capsys.readouterr().out
    ms = float(next(line for line in plain.splitlines() if line.startswith(f"  {sid}")).split()[1])
    line = next(line for line in scaled.splitlines() if line.startswith(f"  {sid}"))
    assert float(line.split()[1]) == pytest.approx(2 * ms, abs=2e-3)
    assert f"estimate for this machine: x2.00 (speed probe) of {ms:.3f} ms on the release's machine" in line
    assert "its probe reads x2.00 the release's time (slower)" in plain and "scaled x2.00 to this machine" in scaled
    assert main(["predict", str(path), "--scenario", "usc-pixel4-tflite-cpu-1large-fp32",
                 "--scale-to-this-machine"]) == 2
    assert "--scale-to-this-machine: scales host scenarios" in capsys.readouterr().err


def test_list_and_caveats_say_what_an_entry_was_trained_on(capsys):
    """The committed INDEX.json records each entry's generator sources (`latbench shelf describe`):
    `predict --list` shows them, and a graph of a kind an entry never saw gets a caveat."""
    from generators.ir import Graph
    from pipelines.cli import main
    from shelf.report import unseen_kind
    from shelf.store import Shelf

    shelf = Shelf()
    for sid in shelf.scenarios():
        t = shelf.entry(sid)["training"]
        assert sum(t["generator_sources"].values()) == t["networks"], sid
        assert (t.get("release") == "datasets/host-v1") == sid.startswith("host-"), sid
    assert main(["predict", "--list"]) == 0
    out = capsys.readouterr().out
    assert "trained on 915 networks: synthetic 915 (board track host-per-scenario)" in \
        next(line for line in out.splitlines() if line.startswith("host-pytorch-cpu-1large-fp32 "))
    onnx, synthetic = Graph("resnet", source="onnx"), Graph("s", source="synthetic")
    assert unseen_kind(shelf.entry("host-pytorch-cpu-1large-fp32"), onnx) == \
        "was trained on synthetic networks only (915), never a hand-designed one like this graph (onnx)"
    assert unseen_kind(shelf.entry("host-pytorch-cpu-1large-fp32"), synthetic) is None
    assert unseen_kind(shelf.entry("usc-pixel4-tflite-cpu-1large-fp32"), onnx) is None  # USC's real CNNs
    assert unseen_kind(shelf.entry("usc-pixel4-tflite-cpu-1large-fp32"), synthetic).startswith(
        "was trained on pytorch networks only (81), never a synthetic one")
