"""Dataset tables built by hand for the card's and findings' tests: rows in a table's schema."""
from __future__ import annotations

import pandas as pd

from pipelines.dataset.schema import schema


def frame(table: str, rows: list[dict]) -> pd.DataFrame:
    """``rows`` as the dataset table ``table``: its columns in schema order, the absent ones NA."""
    cols = schema(table).empty()
    df = pd.DataFrame(rows)
    for c in cols.columns:
        if c not in df:
            df[c] = pd.NA
    return df[list(cols.columns)]
