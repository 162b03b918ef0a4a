"""The ``import-public`` stage through its command line (issue 5).

A temporary params.yaml composed from conf/ with overrides selects a small subset of the
public data (two USC networks on the Pixel 4, three NAS-Bench-201 cells on two HELP devices)
read from ../shared/external; `python -m pipelines.cli import-public` writes the tables, the
problems file and the card to <data_dir>/public. A selected dataset whose folder is missing is
a one-line error naming the key and the folder; one whose folder holds only the pull's
MISSING.txt is skipped with that reason (tests/test_public_pull.py).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipelines.cli import main
from pipelines.config import compose, write_params
from pipelines.dataset import TABLES, load_dataset

ROOT = Path(__file__).resolve().parents[1]
USC_MODELS = ["mobilenetv2_wd4", "squeezenet_v1_1"]
HELP_INDICES = [0, 1, 2]
HELP_DEVICES = ["pixel3", "raspi4"]


def _params(tmp: Path, shared: Path, *extra: str) -> Path:
    raw = compose([
        f"data_dir={tmp / 'data'}",
        f"public.usc.path={shared / 'external' / 'usc-mobile-ml-benchmark'}",
        f"public.help.path={shared / 'external' / 'help-nasbench201'}",
        f"public.usc.models=[{','.join(USC_MODELS)}]", "public.usc.devices=[pixel4]",
        f"public.help.indices=[{','.join(map(str, HELP_INDICES))}]", f"public.help.devices=[{','.join(HELP_DEVICES)}]",
        "public.help.workers=1", "public.datasets=[usc,help]", *extra])
    p = tmp / "params.yaml"
    write_params(raw, p)
    return p


def test_import_public_cli_writes_the_subset(tmp_path, shared_dir):
    p = _params(tmp_path, shared_dir)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "import-public", "--params", str(p), "-q"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "data" / "public"
    assert proc.stdout.splitlines()[-1].startswith("import-public: models 5, scenarios ")
    assert f"0 problems (see {tmp_path / 'data'}/public/import_problems.csv)" in proc.stdout
    ds = load_dataset(out)
    assert sorted(ds.models["name"]) == sorted(USC_MODELS + [f"nb201-{i:05d}" for i in HELP_INDICES])
    # rebuilt IRs: ids are IR hashes, costs from the IR
    assert ds.models["model_id"].str.fullmatch(r"[0-9a-f]{16}").all() and ds.models["flops"].gt(0).all()
    assert set(ds.scenarios["device"]) == {"pixel4", *HELP_DEVICES}
    assert set(ds.scenarios.loc[ds.scenarios["dataset"] == "help-nasbench201", "scenario_id"]) == \
        {"help-pixel3-tflite-cpu", "help-raspi4-cpu"}
    usc = ds.subset("usc-mobile-ml-benchmark")
    assert len(usc.e2e) and set(usc.e2e["model_id"]) == set(usc.models["model_id"])
    assert len(ds.e2e_for("help-pixel3-tflite-cpu")) == len(HELP_INDICES)
    assert len(ds.ops) > 0 and len(ds.kernels) > 0  # the Pixel 4 GPU op records of the two networks
    assert (out / "import_problems.csv").read_text() == "file,row,column,message,kind\n"
    text = (out / "DATASET.md").read_text()
    assert all(f"| `{t}` |" in text for t in TABLES) and (out / "latency_distribution.png").is_file()


def test_missing_folder_is_a_one_line_error(tmp_path, shared_dir, capsys):
    missing = tmp_path / "nowhere"
    p = _params(tmp_path, shared_dir, f"public.usc.path={missing}")
    assert main(["import-public", "--params", str(p), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"latbench: error: public.usc.path: {missing}: no such folder (bring the files with "
                          "`python -m pipelines.dataset.pull usc`")
    assert not (tmp_path / "data" / "public").exists()
