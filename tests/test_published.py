"""Published rows: quoted as their sources give them, never filled in, each beside real tracks."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from leaderboard.metrics import METRICS
from leaderboard.published import HELP_SCENARIOS, HELP_TABLE3_FLOPS, PUBLISHED, published_for
from leaderboard.tracks import TRACKS

ROOT = Path(__file__).resolve().parents[1]
USC_PAPER = Path("/work/shared/seeds/li-paolieri-golubchik-latency-prediction-mobile.txt")


def rows():
    return [PUBLISHED.get(n) for n in PUBLISHED.names()]


def test_every_row_names_its_source_protocol_metric_and_tracks():
    for r in rows():
        assert r.metric in METRICS, r.name
        assert r.tracks and all(t in TRACKS for t in r.tracks), r.name
        assert r.source and r.protocol and "\n" not in r.protocol, r.name
        for v in r.values.values():
            assert v is None or isinstance(v, float), r.name
        if any(v is None for v in r.values.values()):
            assert r.note, f"{r.name}: a missing figure must be explained in the note"


def test_help_rows():
    flops = PUBLISHED.get("help-flops")
    assert flops.values == {HELP_SCENARIOS[d]: v for d, v in HELP_TABLE3_FLOPS.items()}
    lw = PUBLISHED.get("help-layerwise")
    assert [k for k, v in lw.values.items() if v is not None] == ["help-gold6226-cpu"]  # Table 3: '-' elsewhere
    assert {r.name for r in published_for("help-nb201-n10")} >= {"help-flops", "help-help-10", "nasflat-10"}
    assert "help-help-10" not in {r.name for r in published_for("help-nb201-n900")}  # a 10-sample method: N=10 only
    # the goal is "above the better of HELP and NASFLAT" per device; those bars come from these rows
    best = {d: max(PUBLISHED.get("help-help-10").values[s], PUBLISHED.get("nasflat-10").values[s])
            for d, s in HELP_SCENARIOS.items()}
    assert {d: round(v, 3) for d, v in best.items()} == {"gold_6226": 0.989, "pixel2": 0.951, "raspi4": 0.89,
                                                          "eyeriss": 0.957}


def test_help_and_nasflat_beside_their_own_setting():
    """help-transfer-n10/-n20 are HELP's and NASFLAT's setting (sources' full data + N target
    samples): each shows the rows with that N, the same figures as on help-nb201-n10, and a
    protocol line naming what still differs (the sources; NASFLAT's sampler and test set)."""
    for track, expect in (("help-transfer-n10", {"help-help-10-transfer", "nasflat-10-transfer"}),
                          ("help-transfer-n20", {"nasflat-20"})):
        got = published_for(track)
        assert {r.name for r in got} == expect, track
        n = TRACKS.get(track).params["n_train"]
        for r in got:
            assert r.n_train == n and set(r.values) == set(HELP_SCENARIOS.values()), r.name
            assert "9 source devices" in r.protocol and "track" in r.protocol, r.name
            assert "allows the 10 target samples only" not in r.protocol, r.name  # that is help-nb201-n10's line
    assert PUBLISHED.get("help-help-10-transfer").values == PUBLISHED.get("help-help-10").values
    assert PUBLISHED.get("nasflat-10-transfer").values == PUBLISHED.get("nasflat-10").values
    assert PUBLISHED.get("nasflat-10-transfer").spread == PUBLISHED.get("nasflat-10").spread
    for name in ("nasflat-10-transfer", "nasflat-20"):
        proto = PUBLISHED.get(name).protocol
        assert "CATE" in proto and "at random" in proto and "15,625" in proto, name
    # no 20-sample row beside a 10-sample track any more: the N=20 track has it
    for track in ("help-nb201-n10", "help-transfer-n10"):
        assert all(r.n_train in (None, 10) or r.n_train > 100 for r in published_for(track)), track


@pytest.mark.skipif(not USC_PAPER.is_file(), reason="the USC paper's text is not on this machine")
@pytest.mark.parametrize("table, framework", [("C.5", "TFLite"), ("C.7", "PyTorch Mobile")])
def test_usc_rows_are_the_papers_tables(table, framework):
    """Each USC row equals the paper's table (the text lists each table above its caption)."""
    text = USC_PAPER.read_text()
    body = text.split(f"Table {table}:")[0].rsplit("Approach\tTraining Size", 1)[1]
    method = None
    seen = 0
    for line in body.splitlines():
        cells = line.replace("%", "").split("\t")
        if len(cells) < 14 or not cells[1].strip().isdigit():  # the header's CPU/GPU line
            continue
        method = cells[0] or method
        n, vals = cells[1], cells[2:14]
        row = PUBLISHED.get(f"usc-{table.lower()}-{method.lower()}-{n}")
        assert framework in row.method
        fw = "tflite" if framework == "TFLite" else "pytorch"
        for i, phone in ((0, "pixel4"), (1, "s10"), (3, "a03s"), (4, "iphonexs")):  # Snapdragon 855, Exynos 9820, Helio P35, A12
            for j, sid in ((0, f"usc-{phone}-{fw}-cpu-1large-fp32"), (1, f"usc-{phone}-{fw}-gpu-fp16")):
                cell = vals[2 * i + j].strip()
                assert row.values[sid] == (None if cell in ("—", "-") else float(cell)), (row.name, sid)
        seen += 1
    assert seen == 12


@pytest.mark.skipif(not (ROOT / "data" / "public" / "scenarios.parquet").is_file(),
                    reason="the public data is not imported here (dvc repro import-public)")
def test_keys_are_scenarios_of_the_tracks_or_say_so():
    known = set(pd.read_parquet(ROOT / "data" / "public" / "scenarios.parquet")["scenario_id"])
    for r in rows():
        if all(TRACKS.get(t).data == "public" for t in r.tracks):
            # the source may cover a scenario the public data lacks (USC's Helio P35 PyTorch GPU): shown nowhere
            assert len(set(r.values) & known) >= len(r.values) - 1, r.name
        elif not set(r.values) & known:
            assert "not per scenario" in r.note, r.name  # nn-Meter: its own devices
    assert re.search(r"99\.0", str(PUBLISHED.get("nnmeter-sec722").values)) or \
        PUBLISHED.get("nnmeter-sec722").values["mobile CPU (Pixel4, TFLite)"] == 0.990
