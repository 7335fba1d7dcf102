"""Integer columns of an Arrow batch as numpy arrays, nulls filled or masked."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Int64Array", "int_column", "null_mask"]

Int64Array = npt.NDArray[np.int64]


def int_column(batch: pa.RecordBatch, name: str, fill: int = 0) -> Int64Array:
    """An integer column as int64 numpy, nulls replaced by ``fill`` (masks are taken separately)."""
    col = batch.column(name)
    if col.null_count:
        col = pc.fill_null(col, fill)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)


def null_mask(batch: pa.RecordBatch, name: str) -> npt.NDArray[np.bool_]:
    """Where a column is null, as a numpy bool mask."""
    col = batch.column(name)
    if not col.null_count:
        return np.zeros(batch.num_rows, dtype=np.bool_)
    return np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
