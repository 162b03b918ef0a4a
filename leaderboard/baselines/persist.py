"""Saving and loading fitted predictors in formats that outlive library upgrades.

A saved predictor is a folder::

    predictor.json        format, format version, predictor name, constructor params,
                          library versions at save time, and the fitted state as JSON
    <files>               what a library writes in its own stable format, named in the state:
                          LightGBM model text (*.lightgbm.txt), torch state_dicts (*.pt,
                          tensors only, read back with ``weights_only=True``), numpy arrays
                          (*.npz of .npy files, read back with ``allow_pickle=False``)

No pickled library object is ever written: linear models and random forests are JSON arrays of
their fitted numbers (:mod:`.linear`, :mod:`.trees`), evaluated by our own code, so they load
under any scikit-learn; weights our own numpy code evaluates (``additive_mlp``'s MLP, trained
with torch) are numpy's ``.npy`` format, so they load without torch. Where a file is in a
library's own format, the predictor class lists
that library in ``persist_libraries``; loading a file written under another *major* version of
one of those is refused with a message naming the file, the library and both versions (pass
``allow_version_mismatch=True`` to try anyway).

A saved predictor may have been edited or come from someone else, so loading is bounded and
checked: ``predictor.json`` goes through the bounded loader (:mod:`foundation.safeload`), side
files have size limits, and every predictor's ``_set_state`` reads the state through the
typed accessors below (:func:`array`, :func:`number`, :func:`integer`, ...), which refuse
missing keys, wrong types, NaN/infinite numbers and inconsistent shapes; forests and LightGBM
text are checked structurally (children after their parents, feature indices in range) before
anything evaluates them. Every fault is one :class:`PersistError` line naming the file and key.
"""
from __future__ import annotations

import json
import math
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from foundation import limits
from foundation.atomic import write_text
from foundation.printable import printable

FORMAT = "latbench-predictor"
FORMAT_VERSION = 1
META = "predictor.json"
RECORDED = ("numpy", "scipy", "scikit-learn", "lightgbm", "torch", "latbench")
MAX_META_BYTES = limits.PREDICTOR_META_BYTES
MAX_META_VALUES = limits.PREDICTOR_META_VALUES
MAX_TEXT_BYTES = limits.PREDICTOR_TEXT_BYTES
MAX_TENSOR_BYTES = limits.PREDICTOR_TENSOR_BYTES


class PersistError(ValueError):
    """A saved predictor that cannot be loaded; the message names the file and the reason, on
    one line: what the file itself says (keys, names) is escaped (foundation.printable)."""

    def __init__(self, message: str):
        super().__init__(printable(message))


# ---------------------------------------------------------------- typed access to a saved state
class StateError(ValueError):
    """A fault in a saved state; the message starts with the key path (``models.conv.coef``)."""


def _get(s: Any, key: str, at: str) -> Any:
    if not isinstance(s, Mapping):
        raise StateError(f"{at or 'state'}: expected an object, got {type(s).__name__}")
    if key not in s:
        raise StateError(f"{_join(at, key)}: missing")
    return s[key]


def _join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def mapping(s: Any, key: str, at: str = "") -> dict:
    v = _get(s, key, at)
    if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
        raise StateError(f"{_join(at, key)}: expected an object with text keys, got {type(v).__name__}")
    return dict(v)


def text(s: Any, key: str, at: str = "", choices: tuple[str, ...] | None = None) -> str:
    v = _get(s, key, at)
    if not isinstance(v, str) or (choices is not None and v not in choices):
        want = f"one of {', '.join(choices)}" if choices else "text"
        raise StateError(f"{_join(at, key)}: expected {want}, got {str(v)[:80]!r}")
    return v


def number(s: Any, key: str, at: str = "", positive: bool = False) -> float:
    v = _get(s, key, at)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
        raise StateError(f"{_join(at, key)}: expected a finite number{' > 0' if positive else ''}, got {str(v)[:80]!r}")
    return float(v)


def integer(s: Any, key: str, at: str = "", lo: int = 0, hi: int = 2**31 - 1) -> int:
    v = _get(s, key, at)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise StateError(f"{_join(at, key)}: expected an int in [{lo}, {hi}], got {str(v)[:80]!r}")
    return v


def array(s: Any, key: str, at: str = "", dtype: str = "float64", ndim: int = 1, length: int | None = None,
          positive: bool = False, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """A numeric array from nested lists: refuses booleans, text, ragged rows, NaN/infinite values
    and values outside [lo, hi] (or <= 0 with ``positive``)."""
    where = _join(at, key)
    raw = _get(s, key, at)
    if not isinstance(raw, list):
        raise StateError(f"{where}: expected a {ndim}-D list of numbers, got {type(raw).__name__}")
    flat: list = raw
    for _ in range(ndim - 1):
        if not all(isinstance(r, list) for r in flat) or len({len(r) for r in flat}) > 1:
            raise StateError(f"{where}: expected a {ndim}-D list of numbers with rows of one length")
        flat = [x for r in flat for x in r]
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in flat):
        raise StateError(f"{where}: expected a {ndim}-D list of numbers")
    a = np.asarray(raw, dtype="float64")
    if a.ndim != ndim and not (a.size == 0 and ndim > 1):
        raise StateError(f"{where}: expected a {ndim}-D list of numbers")
    if not np.all(np.isfinite(a)):
        raise StateError(f"{where}: NaN or infinite value(s)")
    if positive and np.any(a <= 0):
        raise StateError(f"{where}: values must be > 0")
    if lo is not None and np.any(a < lo):
        raise StateError(f"{where}: values below {lo}")
    if hi is not None and np.any(a > hi):
        raise StateError(f"{where}: values above {hi}")
    if length is not None and len(a) != length:
        raise StateError(f"{where}: {len(a)} values, expected {length}")
    if dtype == "int64":
        if np.any(a != np.round(a)) or np.any(np.abs(a) > 2**53):
            raise StateError(f"{where}: expected integers")
        return a.astype(np.int64)
    return a.astype(dtype)


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for lib in RECORDED:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            pass
    return out


def _major(v: str) -> str:
    return v.split(".")[0]


class Store:
    """The folder of one saved predictor: named side files in their libraries' own formats."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, name: str) -> Path:
        if "/" in name or "\\" in name or name.startswith("."):
            raise PersistError(f"{self.root}: bad side file name {name!r}")
        return self.root / name

    def put_text(self, name: str, text: str) -> str:
        self._path(name).write_text(text)
        return name

    def get_text(self, name: str) -> str:
        from foundation.safeload import LoadError, read_text

        p = self._checked(name)
        try:
            return read_text(p, MAX_TEXT_BYTES)
        except LoadError as e:
            raise PersistError(str(e)) from None

    def _checked(self, name: Any) -> Path:
        if not isinstance(name, str) or not name:
            raise PersistError(f"{self.root / META}: a side file name must be text, got {str(name)[:80]!r}")
        p = self._path(name)
        if p.is_symlink() or not p.is_file():
            raise PersistError(f"{p}: missing (named in {self.root / META})")
        return p

    def put_tensors(self, name: str, tensors: dict) -> str:
        import torch

        torch.save({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, self._path(name))
        return name

    def get_tensors(self, name: str) -> dict:
        """A state_dict of finite float tensors (``weights_only``: no pickled objects run)."""
        import pickle

        import torch

        p = self._checked(name)
        if p.stat().st_size > MAX_TENSOR_BYTES:
            raise PersistError(f"{p}: larger than {MAX_TENSOR_BYTES} bytes")
        try:
            d = torch.load(p, map_location="cpu", weights_only=True)
        except (RuntimeError, ValueError, EOFError, OSError, pickle.UnpicklingError) as e:
            raise PersistError(f"{p}: unreadable tensors ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"[:300]) from None
        if not isinstance(d, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in d.items()):
            raise PersistError(f"{p}: expected a state_dict (names -> tensors)")
        for k, v in d.items():
            if v.is_floating_point() and not bool(torch.isfinite(v).all()):
                raise PersistError(f"{p}: {k}: NaN or infinite weights")
        return d

    def put_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> str:
        """Write named arrays as an ``.npz`` (uncompressed ``.npy`` files in a zip, fixed
        timestamps: the same arrays give the same bytes)."""
        import io
        import zipfile

        with zipfile.ZipFile(self._path(name), "w", zipfile.ZIP_STORED) as z:
            for key, a in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asarray(a, order="C"), allow_pickle=False)
                z.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())
        return name

    def get_arrays(self, name: str) -> dict[str, np.ndarray]:
        """Named finite float arrays from an ``.npz`` (``allow_pickle=False``: no pickled objects
        run; the unpacked size is bounded before anything is read)."""
        import zipfile

        p = self._checked(name)
        if p.stat().st_size > MAX_TENSOR_BYTES:
            raise PersistError(f"{p}: larger than {MAX_TENSOR_BYTES} bytes")
        try:
            with zipfile.ZipFile(p) as z:
                unpacked = sum(i.file_size for i in z.infolist())
            if unpacked > MAX_TENSOR_BYTES:
                raise PersistError(f"{p}: larger than {MAX_TENSOR_BYTES} bytes unpacked")
            with np.load(p, allow_pickle=False) as f:
                d = {k: f[k] for k in f.files}
        except PersistError:
            raise
        except (zipfile.BadZipFile, ValueError, EOFError, OSError) as e:
            raise PersistError(f"{p}: unreadable arrays ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"[:300]) from None
        for k, v in d.items():
            if v.dtype.kind != "f":
                raise PersistError(f"{p}: {k}: expected floats, got {v.dtype}")
            if not np.all(np.isfinite(v)):
                raise PersistError(f"{p}: {k}: NaN or infinite values")
        return d

    def load_module(self, name: str, module):
        """``module`` (a torch.nn.Module built to the saved shape) with the weights of side file
        ``name``, in eval mode; a file whose names or shapes do not fit it is named in the error."""
        try:
            module.load_state_dict(self.get_tensors(name))
        except RuntimeError as e:  # shapes or names that do not fit the network
            raise PersistError(f"{self.root / name}: does not fit the saved network ({str(e).splitlines()[0]})"[:400]) from None
        return module.eval()


def save_predictor(predictor: Any, path: str | Path) -> Path:
    """Write a fitted predictor into folder ``path`` (created; an existing save is replaced)."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    store = Store(root)
    if not hasattr(predictor, "_get_state"):
        raise PersistError(f"{type(predictor).__name__}: this predictor does not support saving")
    state = predictor._get_state(store)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "predictor": predictor.name,
        "params": predictor.get_params(deep=False),
        "versions": library_versions(),
        "libraries": list(getattr(predictor, "persist_libraries", ())),
        "state": state,
    }
    write_text(root / META, json.dumps(meta, indent=1, sort_keys=True, allow_nan=False))
    return root


def load_predictor(path: str | Path, allow_version_mismatch: bool = False) -> Any:
    """Read a predictor written by :func:`save_predictor` (any registered predictor)."""
    from .base import PREDICTORS

    from foundation.safeload import LoadError, load_json

    root = Path(path)
    f = root / META
    if not f.is_file():
        raise PersistError(f"{f}: no saved predictor here")
    try:
        meta = load_json(f, MAX_META_BYTES, max_nodes=MAX_META_VALUES)
    except LoadError as e:
        raise PersistError(str(e)) from None
    if not isinstance(meta, dict):
        raise PersistError(f"{f}: expected a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise PersistError(f"{f}: not a {FORMAT} file (format={meta.get('format')!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise PersistError(f"{f}: format version {meta.get('format_version')!r}; this code reads {FORMAT_VERSION}")
    name = meta.get("predictor")
    if not isinstance(name, str) or name not in PREDICTORS:
        raise PersistError(f"{f}: unknown predictor {str(name)[:80]!r} (known: {', '.join(PREDICTORS.names())})")
    libraries, versions, params = meta.get("libraries", []), meta.get("versions", {}), meta.get("params", {})
    if not isinstance(libraries, list) or not all(isinstance(x, str) for x in libraries):
        raise PersistError(f"{f}: libraries: expected a list of library names")
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise PersistError(f"{f}: versions: expected an object of library -> version text")
    if not isinstance(params, dict):
        raise PersistError(f"{f}: params: expected an object of constructor parameters")
    if not isinstance(meta.get("state"), dict):
        raise PersistError(f"{f}: state: missing or not an object")
    now = library_versions()
    if not allow_version_mismatch:
        for lib in libraries:
            saved, have = versions.get(lib), now.get(lib)
            if saved and have and _major(saved) != _major(have):
                raise PersistError(
                    f"{f}: saved with {lib} {saved}, this environment has {have} (another major version); "
                    f"refit the predictor, or load with allow_version_mismatch=True to try")
    cls = PREDICTORS.get(name)
    import inspect

    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise PersistError(f"{f}: params: unknown parameter(s) {', '.join(unknown)[:200]} of {name}")
    pred = cls(**params)
    try:
        pred._set_state(meta["state"], Store(root))
    except StateError as e:
        raise PersistError(f"{f}: state.{e}"[:500]) from None
    except PersistError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RuntimeError) as e:
        # a fault the predictor's own checks did not name: still one line naming the file
        raise PersistError(f"{f}: state: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:500]) from None
    pred.saved_versions_ = versions
    return pred


__all__ = ["FORMAT", "FORMAT_VERSION", "PersistError", "StateError", "Store", "array", "integer", "library_versions",
           "load_predictor", "mapping", "number", "save_predictor", "text"]
