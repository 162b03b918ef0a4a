"""Every bound on what the suite reads from outside, in one place.

Files from strangers (IR files, params.yaml, submissions, saved predictors, public measurement
CSVs, model files given to ``profile`` and ``predict``) are checked against these numbers where
they are read, before the expensive part: a file's size before it is read, a zip's unpacked size
before it is inflated, a graph's node count and tensor sizes before it is imported, a table's
columns and line lengths before it is parsed. A refusal is one line naming the file and the
bound, so a user knows what to change. This module is the reference for people too: the docs
name it instead of repeating its numbers.

The values are chosen far above every real input the suite knows (the largest is named beside
each) and far below what would exhaust a 2-core, few-GB machine.
"""
from __future__ import annotations

KiB, MiB, GiB = 1024, 1024**2, 1024**3

# ---------------------------------------------------------------- structured text (JSON, YAML)
TEXT_FILE_BYTES = 16 * MiB  # an IR file of a large network is ~1 MiB
TEXT_DEPTH = 64  # nesting of lists and maps
TEXT_VALUES = 2_000_000  # values after expanding YAML aliases
YAML_ALIASES = 100
INT_DIGITS = 20  # digits of an integer literal (int64 has 19)
INT64 = (-(2**63), 2**63 - 1)

# ---------------------------------------------------------------- the IR
IR_NODES = 200_000  # nodes of one IR file (the largest networks of the suite have a few thousand)
IR_SIZE = 2**31 - 1  # any size, count or index in an attribute (int32, what the runtimes take)
IR_LIST = 1024  # elements of a list attribute (shape, sections, pads)
IR_INDICES = 65_536  # indices of a gather, one per element it picks (CondenseNet's largest has ~2,000)

# ---------------------------------------------------------------- model files (.tflite, .onnx, .pt, .pte)
MODEL_FILE_BYTES = 2 * GiB  # a model file on disk (protobuf's own limit for one ONNX file)
ARCHIVE_UNPACKED_BYTES = 2 * GiB  # a zip archive (.pt), summed over its members, before inflating
ARCHIVE_MEMBERS = 100_000  # files inside one zip archive
ARCHIVE_RATIO = 200  # unpacked / packed size of a compressed member (torch stores members uncompressed)
GRAPH_NODES = 100_000  # operators of an imported ONNX or TFLite graph (a large CNN has ~1,000)
TENSOR_ELEMENTS = 2**28  # elements of any tensor an imported graph declares (1 GiB at fp32)

# ---------------------------------------------------------------- latencies
LATENCY_MS = 3_600_000.0  # one inference at batch 1 on any device takes less than an hour

# ---------------------------------------------------------------- the configuration (params.yaml)
PARAMS_BYTES = 1 * MiB
PARAMS_VALUES = 20_000  # values after expanding YAML aliases (the project's file has ~220)
PARAMS_ALIASES = 20
PARAMS_LIST = 10_000  # items of any list in the configuration
PARAMS_INT = 2**31 - 1  # any integer in the configuration
NETWORKS = 100_000  # networks one generator source may produce in one run

# ---------------------------------------------------------------- public measurement tables
TABLE_DIM = 2**31 - 1  # channels, sizes, kernels, strides, groups in an op's features
TABLE_FLOPS = 2**53
TABLE_EXACT_INT = 2**53  # integer cells: exactly representable as float64, far inside int64
DEVICE_BATCH = 65_536  # a batch size in a device name
PUBLIC_FILES = 100_000  # files of one public dataset an importer reads (AI Hub: one perf.yaml per model, 167)
MEMORY_MB = 1_048_576.0  # a peak memory a public file states, in MB (1 TiB; AI Hub's largest is ~4,000 MB)
LAYERS = 10_000_000  # layers of one compiled network a public file states (AI Hub's largest has ~18,000)

# ---------------------------------------------------------------- leaderboard submissions
SUBMISSION = {
    "predictions_bytes": 64 * MiB,  # the predictions file
    "predictions_rows": 2_000_000,  # rows (parquet: read from the file's footer, before the data)
    "predictions_columns": 16,  # columns (5 are used; CSV: counted on the header line before parsing)
    "line_chars": 4 * KiB,  # characters of one CSV line
    "cell_chars": 256,  # characters of one cell (ids and names are under 100)
    "metadata_bytes": 64 * KiB,  # the metadata file
    "metadata_values": 10_000,  # values in the metadata, after expanding YAML aliases
    "metadata_depth": 16,
    "text_chars": 2_000,  # description, training_data
    "name_chars": 100,  # method, each author, predictor
    "authors": 50,
    "seeds": 100,
    "predicted_ms": LATENCY_MS,  # largest prediction: larger is a unit error
}

# ---------------------------------------------------------------- the device farm
TOKEN_FILE_BYTES = 4 * KiB  # a farm token file holds one line (the head writes 64 hex digits)

# ---------------------------------------------------------------- saved predictors
PREDICTOR_META_BYTES = 128 * MiB  # predictor.json (forests as arrays: a few MB each)
PREDICTOR_META_VALUES = 50_000_000
PREDICTOR_TEXT_BYTES = 64 * MiB  # a LightGBM model text
PREDICTOR_TENSOR_BYTES = 256 * MiB  # a torch state_dict, or numpy arrays (.npz) unpacked
TREES = 100_000
TREE_LEAVES = 131_072
TREE_FEATURES = 100_000
