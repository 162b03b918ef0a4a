"""One bounded loader for every YAML and JSON file the suite reads from outside.

IR files, params.yaml, submission metadata, saved predictors (``predictor.json``) and result
files may come from strangers or from the web. Whatever is in them, reading one must not
exhaust memory or time, nor end in a traceback: :func:`load_json` / :func:`load_yaml` (and
their ``*_text`` forms) refuse

- files larger than ``max_bytes`` (read at most that many bytes, never the whole of a huge file);
- text that is not UTF-8;
- nesting deeper than ``max_depth`` (JSON: before parsing, so 100k ``[`` never reach a
  recursive parser; YAML: the composer's recursion is caught);
- more than ``max_nodes`` values, counted *after* expanding YAML aliases (a 400-byte "billion
  laughs" file expands to billions), and YAML with more than ``max_aliases`` aliases at all;
- integers outside the signed 64-bit range (and integer literals of more than 20 digits), and,
  unless ``allow_nan``, the non-standard JSON constants ``NaN``/``Infinity``;
- YAML tags that build objects (safe loading only: plain data).

Every refusal is a :class:`LoadError`, a ``ValueError`` with one line naming the file (the
``where`` argument) and, where known, the key path (``nodes[3].attrs``) or line.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from . import limits

MAX_BYTES = limits.TEXT_FILE_BYTES
MAX_DEPTH = limits.TEXT_DEPTH
MAX_NODES = limits.TEXT_VALUES  # values (scalars + containers) after alias expansion
MAX_ALIASES = limits.YAML_ALIASES
INT64 = limits.INT64
MAX_INT_DIGITS = limits.INT_DIGITS


class LoadError(ValueError):
    """A file that the bounded loader refuses; the message is one line naming the file."""


def _one_line(s: Any) -> str:
    text = str(s).strip().splitlines()
    return text[0] if text else type(s).__name__


def read_text(path: str | Path, max_bytes: int = MAX_BYTES, where: str | None = None) -> str:
    """The UTF-8 text of ``path``, refusing files larger than ``max_bytes`` without reading them whole."""
    p = Path(path)
    where = where or str(p)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise LoadError(f"{where}: cannot read: no such file") from None
    except IsADirectoryError:
        raise LoadError(f"{where}: cannot read: a folder, not a file") from None
    except OSError as e:
        raise LoadError(f"{where}: cannot read: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise LoadError(f"{where}: larger than {max_bytes} bytes (the limit for this kind of file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None


# ---------------------------------------------------------------- the tree check
def _path(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def check_tree(obj: Any, where: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
               allow_nan: bool = False) -> Any:
    """Walk a loaded value (iteratively, counting shared values once per reference, as a
    consumer would see them); raise LoadError past the bounds. Returns ``obj``."""
    count = 0
    stack: list[tuple[Any, list[Any]]] = [(obj, [])]
    while stack:
        x, at = stack.pop()
        count += 1
        if count > max_nodes:
            raise LoadError(f"{where}: more than {max_nodes} values (after expanding aliases); refused")
        if len(at) > max_depth:
            raise LoadError(f"{where}: {_path(at[:8])}...: nested deeper than {max_depth} levels")
        if isinstance(x, bool) or x is None or isinstance(x, str):
            continue
        if isinstance(x, int):
            if not INT64[0] <= x <= INT64[1]:
                raise LoadError(f"{where}: {_path(at)}: integer outside the 64-bit range")
            continue
        if isinstance(x, float):
            if not allow_nan and not math.isfinite(x):
                raise LoadError(f"{where}: {_path(at)}: {x!r} is not a finite number")
            continue
        if isinstance(x, dict):
            if len(x) > max_nodes:
                raise LoadError(f"{where}: {_path(at)}: more than {max_nodes} keys")
            for k, v in x.items():
                if not isinstance(k, (str, int, float, bool)) and k is not None:
                    raise LoadError(f"{where}: {_path(at)}: a key of type {type(k).__name__} (keys are names)")
                stack.append((v, at + [str(k)]))
            continue
        if isinstance(x, list):
            if len(x) > max_nodes:
                raise LoadError(f"{where}: {_path(at)}: more than {max_nodes} items")
            for i, v in enumerate(x):
                stack.append((v, at + [i]))
            continue
        # YAML's safe loader also builds dates, timestamps, bytes and sets: plain data, no code
        if isinstance(x, (bytes, set, tuple)) or type(x).__module__ == "datetime":
            continue
        raise LoadError(f"{where}: {_path(at)}: unexpected value of type {type(x).__name__}")
    return obj


# ---------------------------------------------------------------- JSON
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_YAML_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]')


def _depth_exceeded(text: str, tokens: re.Pattern, max_depth: int) -> int | None:
    """The offset where bracket nesting first passes ``max_depth`` (strings and comments
    skipped by one linear regex scan), or None. Runs before any parser recurses."""
    depth = 0
    for m in tokens.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        elif c in "]}":
            depth = max(0, depth - 1)
    return None


def _json_depth(text: str, max_depth: int, where: str) -> None:
    at = _depth_exceeded(text, _JSON_TOKENS, max_depth)
    if at is not None:
        raise LoadError(f"{where}: line {text.count(chr(10), 0, at) + 1}: nested deeper than {max_depth} levels")


def _parse_int(s: str) -> int:
    if len(s.lstrip("-")) > MAX_INT_DIGITS:
        raise LoadError(f"an integer of {len(s.lstrip('-'))} digits")
    return int(s)


def load_json_text(text: str, where: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
                   allow_nan: bool = False) -> Any:
    """Parse JSON text within the bounds (see the module doc)."""
    _json_depth(text, max_depth, where)

    def constant(name: str) -> float:
        if not allow_nan:
            raise LoadError(f"{name} is not a JSON number")
        return float(name)

    try:
        obj = json.loads(text, parse_int=_parse_int, parse_constant=constant)
    except LoadError as e:
        raise LoadError(f"{where}: {e}") from None
    except json.JSONDecodeError as e:
        raise LoadError(f"{where}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError) as e:
        raise LoadError(f"{where}: unreadable JSON ({type(e).__name__}: {_one_line(e)})") from None
    return check_tree(obj, where, max_depth=max_depth, max_nodes=max_nodes, allow_nan=allow_nan)


def load_json(path: str | Path, max_bytes: int = MAX_BYTES, where: str | None = None, **bounds: Any) -> Any:
    where = where or str(path)
    return load_json_text(read_text(path, max_bytes, where), where, **bounds)


# ---------------------------------------------------------------- YAML
_Base = yaml.SafeLoader  # the pure-Python one: the C parser composes without the alias hook


def _loader(max_aliases: int) -> type:
    class BoundedLoader(_Base):  # type: ignore[misc, valid-type]
        """Safe loading (plain data only) that counts aliases while composing."""

        _aliases = 0

        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            if self.check_event(yaml.events.AliasEvent):
                self._aliases += 1
                if self._aliases > max_aliases:
                    mark = self.peek_event().start_mark
                    raise LoadError(f"line {mark.line + 1}: more than {max_aliases} YAML aliases")
            return super().compose_node(parent, index)

    return BoundedLoader


def _key_lines(node: Any, lines: dict[tuple, int], max_nodes: int) -> None:
    """``lines[(key, key, ...)] = line`` (1-based) of every mapping key and sequence item under
    ``node`` (iterative; a node reached through aliases is walked once)."""
    seen: set[int] = set()
    stack: list[tuple[Any, tuple]] = [(node, ())]
    while stack:
        n, at = stack.pop()
        if id(n) in seen or len(seen) > max_nodes:
            continue
        seen.add(id(n))
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    lines[at + (k.value,)] = k.start_mark.line + 1
                    stack.append((v, at + (k.value,)))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                lines[at + (i,)] = v.start_mark.line + 1
                stack.append((v, at + (i,)))


def load_yaml_text(text: str, where: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
                   max_aliases: int = MAX_ALIASES, allow_nan: bool = False,
                   lines: dict[tuple, int] | None = None) -> Any:
    """Parse YAML (safe: plain data, no object tags) within the bounds (see the module doc).
    ``lines``, when given, receives the line (1-based) of every mapping key and sequence item,
    keyed by its path (``("precisions", "float")``; keys as written in the file)."""
    at = _depth_exceeded(text, _YAML_TOKENS, max_depth)
    if at is not None:  # flow collections ([[[[...) nest without indentation
        raise LoadError(f"{where}: line {text.count(chr(10), 0, at) + 1}: nested deeper than {max_depth} levels")
    loader = _loader(max_aliases)(text)
    node = None
    try:
        if lines is None:
            obj = loader.get_single_data()
        else:
            node = loader.get_single_node()
            obj = None if node is None else loader.construct_document(node)
    except LoadError as e:
        raise LoadError(f"{where}: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        raise LoadError(f"{where}: malformed YAML: {at}{getattr(e, 'problem', None) or _one_line(e)}") from None
    except (ValueError, TypeError, RecursionError, MemoryError, OverflowError) as e:
        raise LoadError(f"{where}: unreadable YAML ({type(e).__name__}: {_one_line(e)})") from None
    finally:
        loader.dispose()
    check_tree(obj, where, max_depth=max_depth, max_nodes=max_nodes, allow_nan=allow_nan)
    if node is not None and lines is not None:  # after the bounds: the walk sees at most max_nodes nodes
        _key_lines(node, lines, max_nodes)
    return obj


def load_yaml(path: str | Path, max_bytes: int = MAX_BYTES, where: str | None = None, **bounds: Any) -> Any:
    where = where or str(path)
    return load_yaml_text(read_text(path, max_bytes, where), where, **bounds)


__all__ = ["LoadError", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "check_tree", "load_json", "load_json_text",
           "load_yaml", "load_yaml_text", "read_text"]
