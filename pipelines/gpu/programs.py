"""Which kernel a GPU dispatch ran: the generated programs of LiteRT's GPU accelerator, matched
to the shaders the timestamp layer saw, and labelled with their kind (docs/gpu.md).

LiteRT's GPU accelerator (ML Drift over WebGPU) generates one WGSL program per kernel; with
the options ``serialization_dir`` / ``model_cache_key`` / ``serialize_program_cache = true`` it
writes them into a program cache file. Dawn compiles each WGSL program to SPIR-V once per
workgroup size, and the timestamp layer (native/vklayer) sees only that SPIR-V, stripped of
names, under its hash. Two steps recover what each dispatch was:

1. **Matching** (:func:`match_programs`): a shader and a program match when their *structural
   signature* agrees: number of resource bindings, texture loads, texture stores, ``fma``
   calls, loops, workgroup barriers and workgroup-memory array lengths. Tint translates each
   of these one to one (``textureLoad`` -> OpImageFetch/OpImageRead, ``textureStore`` ->
   OpImageWrite, ``fma`` -> GLSL.std.450 Fma, ``for``/``loop`` -> OpLoopMerge, ``var<workgroup>
   array<T, N>`` -> a Workgroup OpVariable of an N-array), so the counts survive compilation,
   and the generator's programs differ in them. A shader with no program is one of Dawn's or
   the accelerator's own transfer shaders (tensor layout conversion between the host buffer
   and the GPU texture layout); a shader whose signature fits several programs of different
   kinds is ``ambiguous``.
2. **Kinds** (:data:`KINDS`): the WGSL programs are classified by ordered rules over the names
   and structure the code generator uses (``weights_buffer`` / ``weights_image2d``, the loops
   over kernel taps and source slices, Winograd's 36-point tiles, a workgroup reduction, a
   ``reducer``, ...); fused operations (bias, activation clamp / max, a second input added
   into the result) from the kernel's epilogue (:data:`FUSED`).

The rules are tied to the generator's code; a program no rule recognises is ``other`` (never
guessed), and the kinds are checked on real programs in tests/test_gpu_programs.py.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

#: Every kernel kind a GPU kernel record can carry.
KERNEL_KINDS = ("conv", "depthwise_conv", "winograd_input", "winograd_matmul", "winograd_output",
                "fully_connected", "mean", "pool", "elementwise", "concat", "split", "gather", "layout_in",
                "layout_out", "copy", "ambiguous", "other")


# ---------------------------------------------------------------- the program cache
def read_program_cache(path: str | Path) -> list[str]:
    """The WGSL programs in one program-cache file, in file order.

    The file's container format is the accelerator's own and undocumented; the programs are
    stored as NUL-terminated text, so each is found as the printable run around a
    ``@compute`` entry point."""
    data = Path(path).read_bytes()
    out: list[str] = []
    pos = 0
    while True:
        i = data.find(b"@compute", pos)
        if i < 0:
            return out
        start = i
        while start > 0 and (32 <= data[start - 1] < 127 or data[start - 1] in (9, 10, 13)):
            start -= 1
        end = data.find(b"\0", i)
        end = len(data) if end < 0 else end
        out.append(data[start:end].decode("ascii", errors="replace"))
        pos = end


def find_program_caches(directory: str | Path) -> list[Path]:
    """The program-cache files the accelerator wrote into ``directory`` (``*program_cache*``)."""
    return sorted(p for p in Path(directory).glob("*program_cache*") if p.is_file())


# ---------------------------------------------------------------- structural signatures
@dataclass(frozen=True)
class Signature:
    """Counts that survive WGSL -> SPIR-V compilation (see the module doc)."""

    bindings: int
    loads: int
    stores: int
    fma: int
    loops: int
    barriers: int
    workgroup_arrays: tuple[int, ...]
    # second stage only (see match_programs): float clamp() and max() calls, which tell a
    # kernel with a fused activation from the same kernel without. Tint lowers integer
    # clamps to SMax + SMin, so only the float ones are comparable.
    clamps: int = field(default=0, compare=False)
    maxes: int = field(default=0, compare=False)
    selects: int = field(default=0, compare=False)  # select() -> OpSelect (an average pool's edge test)


_WG_ARRAY = re.compile(r"var<workgroup>\s+\w+\s*:\s*array<.+?,\s*(\d+)\s*>\s*;")
_LOOPS = re.compile(r"\bfor\s*\(|\bloop\s*\{|\bwhile\b")


def wgsl_signature(src: str) -> Signature:
    return Signature(bindings=src.count("@binding("), loads=src.count("textureLoad("),
                     stores=src.count("textureStore("), fma=len(re.findall(r"\bfma\(", src)),
                     loops=len(_LOOPS.findall(src)), barriers=src.count("workgroupBarrier("),
                     workgroup_arrays=tuple(sorted(int(n) for n in _WG_ARRAY.findall(src))),
                     clamps=sum("vec4<f" in args for args in re.findall(r"\bclamp\(([^;]*)", src)),
                     maxes=len(re.findall(r"\bmax\(", src)), selects=len(re.findall(r"\bselect\(", src)))


# SPIR-V opcodes and operands the signature reads (SPIR-V 1.x specification, section 3)
_OP_EXT_INST, _OP_TYPE_ARRAY, _OP_TYPE_POINTER, _OP_CONSTANT, _OP_VARIABLE = 12, 28, 32, 43, 59
_OP_DECORATE, _OP_IMAGE_FETCH, _OP_IMAGE_READ, _OP_IMAGE_WRITE = 71, 95, 98, 99
_OP_CONTROL_BARRIER, _OP_LOOP_MERGE, _OP_SELECT = 224, 246, 169
_DECORATION_BINDING, _STORAGE_WORKGROUP, _GLSL_FMA = 33, 4, 50
_GLSL_CLAMPS = (43, 81)  # FClamp, NClamp (float)
_GLSL_MAXES = (40, 80)  # FMax, NMax (float)
SPIRV_MAGIC = 0x07230203


def spirv_signature(code: bytes) -> Signature:
    """The signature of a SPIR-V module (as the layer dumps it: ``<shader>.spv``)."""
    if len(code) < 20 or len(code) % 4:
        raise ValueError("not a SPIR-V module (size is not a multiple of 4 words)")
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != SPIRV_MAGIC:
        raise ValueError("not a SPIR-V module (bad magic number)")
    bindings = loads = stores = fma = loops = barriers = clamps = maxes = selects = 0
    variables: list[tuple[int, int]] = []  # (pointer type, storage class)
    pointers: dict[int, int] = {}  # pointer type id -> pointee type id
    arrays: dict[int, int] = {}  # array type id -> length constant id
    constants: dict[int, int] = {}
    i = 5
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise ValueError(f"corrupt SPIR-V module (zero-length instruction at word {i})")
        a = words[i + 1:i + count]
        if op == _OP_DECORATE and len(a) >= 2 and a[1] == _DECORATION_BINDING:
            bindings += 1
        elif op == _OP_VARIABLE:
            variables.append((a[0], a[2]))
        elif op == _OP_TYPE_POINTER:
            pointers[a[0]] = a[2]
        elif op == _OP_TYPE_ARRAY:
            arrays[a[0]] = a[2]
        elif op == _OP_CONSTANT and len(a) >= 3:
            constants[a[1]] = a[2]
        elif op == _OP_EXT_INST and len(a) >= 4:
            fma += a[3] == _GLSL_FMA
            clamps += a[3] in _GLSL_CLAMPS
            maxes += a[3] in _GLSL_MAXES
        elif op in (_OP_IMAGE_FETCH, _OP_IMAGE_READ):
            loads += 1
        elif op == _OP_IMAGE_WRITE:
            stores += 1
        elif op == _OP_LOOP_MERGE:
            loops += 1
        elif op == _OP_CONTROL_BARRIER:
            barriers += 1
        elif op == _OP_SELECT:
            selects += 1
        i += count
    wg = []
    for ptr, storage in variables:
        if storage == _STORAGE_WORKGROUP and pointers.get(ptr) in arrays:
            wg.append(constants.get(arrays[pointers[ptr]], 0))
    return Signature(bindings, loads, stores, fma, loops, barriers, tuple(sorted(wg)), clamps, maxes, selects)


# ---------------------------------------------------------------- kinds of programs
def _has(*names: str) -> Callable[[str], bool]:
    return lambda src: all(n in src for n in names)


def _conv_taps(src: str) -> bool:
    """A loop over kernel taps (``ky``/``kx``) -- a spatial window, not a 1x1 kernel."""
    return bool(re.search(r"\bfor\s*\(var k[xy]\b", src)) or bool(re.search(r"\bk[xy]\s*\+=|\bk[xy]=k[xy]\+1", src))


#: (kind, rule) in order: the first rule that holds names the program.
KINDS: list[tuple[str, Callable[[str], bool]]] = [
    # Winograd F(4x4, 3x3): the input transform multiplies 6x6 tiles by the constant matrix
    # B^T, the output transform by A^T (adding bias and any linked operations); in between a
    # batched matrix multiply whose weights depend on the tile point (DST_Y, one of 36)
    ("winograd_input", lambda s: "Bt_buffer" in s or "bt_non_uniform" in s),
    ("winograd_output", lambda s: "At_buffer" in s or "at_non_uniform" in s),
    ("winograd_matmul", lambda s: bool(re.search(r"var weights_offset\s*:\s*i32\s*=[^;]*\bDST_Y\b", s))),
    # a workgroup reduction over source slices of a 1x1 spatial input: fully connected
    ("fully_connected", lambda s: "var<workgroup>" in s and "weights" in s and "workgroupBarrier(" in s),
    # weights in a texture indexed by the output slice, a loop over taps, no loop over source
    # slices: depthwise
    ("depthwise_conv", lambda s: "weights_image2d" in s and _conv_taps(s) and "loop {" not in s),
    ("conv", lambda s: "weights" in s),
    ("mean", _has("reducer")),
    ("pool", lambda s: _conv_taps(s) and "weights" not in s),
    # several source tensors copied into slice ranges of the output, or one source into several
    ("concat", lambda s: "src_tensor_1_image2d" in s and "base_s" in s),
    ("split", lambda s: "dst_tensor_1_image2d" in s),
    # channels picked by an index tensor (GATHER on the channels: CondenseNet)
    ("gather", lambda s: "gather_indexes" in s),
    # one value in, one out, per element (activations, arithmetic with a constant or a tensor)
    ("elementwise", lambda s: s.count("textureStore(") == 1 and not _LOOPS.search(s[s.find("fn main"):])),
]

#: fused part -> rule on the kernel's program. The generator links element-wise operations
#: into a kernel's epilogue (``*_link<N>`` names): a second tensor read as ``second_value``, a
#: constant vector as ``second_val``, activations as ``max``/``clamp`` of the result.
FUSED: list[tuple[str, Callable[[str], bool]]] = [
    ("bias", _has("biases")),
    ("add", lambda s: bool(re.search(r"\+\s*second_value\b", s))),
    ("mul", lambda s: bool(re.search(r"\*\s*second_value\b", s))),
    ("add_const", lambda s: bool(re.search(r"\+\s*second_val\b", s))),
    ("mul_const", lambda s: bool(re.search(r"\*\s*second_val\b", s))),
    # activations bound by uniforms: max(x, lo) is ReLU, clamp(x, lo, hi) ReLU6 / ReLU-N1 ...
    ("relu", lambda s: bool(re.search(r"=\s*max\(\s*\w+\s*,\s*vec4<f(16|32)>\(\s*(f16\()?U\.", s))),
    ("clamp", lambda s: bool(re.search(r"=\s*clamp\(\s*\w+\s*,\s*vec4<f(16|32)>\(\s*(f16\()?U\.", s))),
    # hard-swish x * clamp(x / 6 + 0.5, 0, 1), with literal constants
    ("hard_swish", lambda s: bool(re.search(r"=\s*\w+\s*\*\s*clamp\(\s*\w+\s*\*\s*vec4<f(16|32)>\(\s*0\.1666", s))),
]


def classify(src: str) -> tuple[str, list[str]]:
    """(kind, fused parts) of one WGSL program; kind ``other`` when no rule applies."""
    kind = next((k for k, rule in KINDS if rule(src)), "other")
    fused = [name for name, rule in FUSED if rule(src)] if kind != "other" else []
    return kind, fused


def classify_unmatched(sig: Signature) -> str:
    """A shader no program matches: a transfer between the host's buffer and the GPU layout
    (writes a texture from buffers: ``layout_in``; reads a texture into a buffer:
    ``layout_out``), else ``other``."""
    if sig.stores and not sig.loads:
        return "layout_in"
    if sig.loads and not sig.stores:
        return "layout_out"
    return "other"


# ---------------------------------------------------------------- labelling a run
@dataclass
class Program:
    index: int
    kind: str
    fused: list[str]
    signature: Signature


@dataclass
class Labels:
    """What :func:`label_kernels` found: programs, shader -> program matches, counts."""

    programs: list[Program] = field(default_factory=list)
    shaders: dict[str, dict[str, Any]] = field(default_factory=dict)  # hash -> kind, fused, program

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for s in self.shaders.values():
            kinds[s["kernel_kind"]] = kinds.get(s["kernel_kind"], 0) + 1
        return {"programs": len(self.programs), "shaders": len(self.shaders),
                "matched": sum(1 for s in self.shaders.values() if s["program"] is not None),
                "shader_kinds": dict(sorted(kinds.items()))}


def load_programs(cache_files: Iterable[str | Path]) -> list[Program]:
    out = []
    for f in cache_files:
        for src in read_program_cache(f):
            kind, fused = classify(src)
            out.append(Program(len(out), kind, fused, wgsl_signature(src)))
    return out


def match_programs(sig: Signature, programs: Sequence[Program]) -> dict[str, Any]:
    """kernel_kind, fused and program index of the shader with signature ``sig``."""
    found = [p for p in programs if p.signature == sig]
    if len(found) > 1:  # second stage: the float clamp / max counts, when they single one out
        exact = [p for p in found if (p.signature.clamps, p.signature.maxes) == (sig.clamps, sig.maxes)]
        if len(exact) > 1:
            # then select(): Tint also lowers bool -> float conversions to OpSelect, so the
            # shader has at least the program's select() calls: keep the closest from below
            below = [p for p in exact if p.signature.selects <= sig.selects]
            best = max((p.signature.selects for p in below), default=None)
            exact = [p for p in below if p.signature.selects == best]
        if len(exact) == 1:
            found = exact
    if not found:
        return {"kernel_kind": classify_unmatched(sig), "fused": [], "program": None}
    kinds = {p.kind for p in found}
    if len(kinds) > 1:
        return {"kernel_kind": "ambiguous", "fused": [], "program": None,
                "candidates": sorted(p.index for p in found)}
    if len({tuple(p.fused) for p in found}) > 1:  # same kind, the fused parts differ: keep the common ones
        common = [f for f in found[0].fused if all(f in p.fused for p in found)]
        return {"kernel_kind": kinds.pop(), "fused": common, "program": None,
                "candidates": sorted(p.index for p in found)}
    return {"kernel_kind": kinds.pop(), "fused": list(found[0].fused), "program": found[0].index}


def label_kernels(kernels: Iterable[dict[str, Any]], programs_dir: str | Path, shaders_dir: str | Path) -> Labels:
    """Adds ``kernel_kind``, ``fused`` and ``program`` to every GPU kernel record (in place):
    dispatches from their shader (``<shaders_dir>/<shader>.spv``, dumped by the layer) matched
    to the programs in ``programs_dir``; copies are ``copy``."""
    labels = Labels(programs=load_programs(find_program_caches(programs_dir)))
    for k in kernels:
        if k.get("source") != "gpu":
            continue
        if not str(k.get("kind", "")).startswith("dispatch"):
            k.update(kernel_kind="copy", fused=[], program=None)
            continue
        h = str(k.get("shader") or "")
        if h not in labels.shaders:
            spv = Path(shaders_dir) / f"{h}.spv"
            if not h or not spv.is_file():
                labels.shaders[h] = {"kernel_kind": "other", "fused": [], "program": None,
                                     "why": f"shader {h or '?'} was not dumped"}
            else:
                labels.shaders[h] = match_programs(spirv_signature(spv.read_bytes()), labels.programs)
        k.update({key: v for key, v in labels.shaders[h].items() if key != "why"})
    return labels


__all__ = ["FUSED", "KERNEL_KINDS", "KINDS", "Labels", "Program", "Signature", "classify", "classify_unmatched",
           "find_program_caches", "label_kernels", "load_programs", "match_programs", "read_program_cache",
           "spirv_signature", "wgsl_signature"]
