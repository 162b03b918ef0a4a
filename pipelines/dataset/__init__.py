"""The dataset: table schemas, public-data importers, the loading API and the dataset card.

- :mod:`.schema`: the five tables as data (columns, dtypes, units, keys) and ``check_table``;
- :mod:`.usc`, :mod:`.help`, :mod:`.qaihub`: importers of the public USC, HELP and Qualcomm AI Hub
  measurements (:mod:`.qaihub_models`: which AI Hub networks the IR expresses);
- :mod:`.opfeatures`: op types, op features and kernel types of the suite's own records (assemble);
- :mod:`.importers`: the import machinery the importers share;
- :mod:`.import_public`: ``run_import``, the importers into a folder (the ``import-public`` stage);
- :mod:`.load`: ``load_dataset(path) -> Dataset``;
- :mod:`.card`: DATASET.md and its figures.

Scenario ids (``make_scenario_id``) are the scenarios' own: pipelines/scenarios.py.

See docs/dataset.md.
"""
from .help import HelpConfig, import_help
from .import_public import run_import
from .importers import ImportProblem, ImportResult, PublicDataError, merge_tables
from .load import Dataset, Scenario, load_dataset, save_tables
from .qaihub import QaihubConfig, import_qaihub
from .schema import SCHEMA_VERSION, SCHEMAS, TABLES, SchemaError, check_table, check_tables, conform
from .usc import UscConfig, import_usc

__all__ = [
    "SCHEMA_VERSION", "SCHEMAS", "TABLES", "SchemaError", "check_table", "check_tables", "conform",
    "Dataset", "Scenario", "load_dataset", "save_tables",
    "UscConfig", "import_usc", "HelpConfig", "import_help", "QaihubConfig", "import_qaihub",
    "ImportProblem", "ImportResult", "PublicDataError", "merge_tables", "run_import",
]
