"""Worker functions for the export pool's tests: importable in a spawned worker (tests/ is on its
sys.path), so a test can make one task kill its worker the way the OOM killer does."""
import os
import signal
import time
from pathlib import Path


def crash_on_victim(model_path, formats, out_dir, options, version):
    """SIGKILL the worker for the model named ``victim``; otherwise note the run and succeed."""
    name = Path(model_path).stem
    if name == "victim":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(options.get("seconds", 0))
    with open(Path(out_dir) / "ran.txt", "a") as f:
        f.write(f"{name}\n")
    return [{"format": fmt, "status": "ok"} for fmt in formats]
