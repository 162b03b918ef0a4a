"""Convert one pytorchcv model to a .tflite file with litert-torch (the conformance route
``tflite-litert-torch``, generators/importers/conformance.py).

It runs under the interpreter of the separate litert-torch environment
(scripts/setup-litert-torch-env.sh), as a subprocess of the conformance check: that environment
holds torch, pytorchcv and litert-torch, and nothing of the project, so this file imports only
those and the standard library.

    python litert_torch_convert.py NAME --shape 1 3 224 224 --out model.tflite

The model is built as the conformance zoo builds it (``pretrained=False``, seed 0, evaluation
mode); the sample input has the given NCHW shape. A failure is one line on standard error naming
the model and the converter's error, and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build(name: str):
    """The pytorchcv model ``name``, offline and in evaluation mode, its weights from seed 0."""
    import numpy
    import torch
    from pytorchcv.model_provider import get_model

    # pytorchcv 0.0.67's RegNet code still uses ``np.int``, removed in NumPy 1.24: the alias it
    # meant (the builtin int), only where it is missing, as the project's build_pytorchcv does
    if not hasattr(numpy, "int"):
        numpy.int = int
    torch.manual_seed(0)
    return get_model(name, pretrained=False).eval()


def load_state(model, path: str | None) -> None:
    """The state dict saved at ``path`` (the caller's calibrated batch norm statistics) into
    ``model``; nothing without a path."""
    if path:
        import torch

        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def convert(model, shape: list[int], out: str) -> None:
    """``model`` on a zero input of ``shape`` through ``litert_torch.convert``, written to ``out``."""
    import litert_torch
    import torch

    sample = torch.zeros(shape)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        litert_torch.convert(model, (sample,)).export(out)


@contextlib.contextmanager
def _quiet():
    """Standard output to standard error: the converter prints its progress there, and the
    caller reads nothing from this process but its exit status and its last line of errors."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="the pytorchcv model name")
    ap.add_argument("--shape", type=int, nargs="+", required=True, help="the input shape, NCHW")
    ap.add_argument("--out", required=True, help="the .tflite file to write")
    ap.add_argument("--state", help="a state dict (torch.save) to load into the built model")
    args = ap.parse_args(argv)
    try:
        with _quiet():
            model = build(args.name)
            load_state(model, args.state)
            convert(model, args.shape, args.out)
    except Exception as e:  # noqa: BLE001 - any failure is this model's outcome, reported in one line
        text = str(e).strip().splitlines()
        print(f"{args.name}: litert-torch: {type(e).__name__}: {text[0][:300] if text else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
