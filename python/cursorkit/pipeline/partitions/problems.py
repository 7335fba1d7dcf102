"""Problems of the input counted per partition, a first sample row kept, merged on the driver."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["Problems", "sample_row"]


@dataclass(slots=True)
class Problems:
    """Counts of each problem seen and the first row that showed it (JSON-ready)."""

    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, dict[str, Any]] = field(default_factory=dict)

    def note(self, name: str, mask: npt.NDArray[np.bool_], batch: pa.RecordBatch) -> None:
        """Counts the rows of ``batch`` where ``mask`` holds, keeping the first as the sample."""
        n = int(np.count_nonzero(mask))
        if not n:
            return
        self.counts[name] = self.counts.get(name, 0) + n
        if name not in self.samples:
            self.samples[name] = sample_row(batch, int(np.flatnonzero(mask)[0]))

    def merge(self, other: Mapping[str, Any]) -> None:
        """Adds another partition's problems (as :meth:`to_json` wrote them)."""
        for k, v in other.get("counts", {}).items():
            self.counts[k] = self.counts.get(k, 0) + int(v)
        for k, v in other.get("samples", {}).items():
            self.samples.setdefault(k, v)

    def to_json(self) -> dict[str, Any]:
        """The JSON form carried in a ``stats`` row."""
        return {"counts": self.counts, "samples": self.samples}


def sample_row(batch: pa.RecordBatch, i: int) -> dict[str, Any]:
    """Row ``i`` of ``batch`` as a dict of JSON-able values."""
    row = batch.slice(i, 1).to_pylist()[0]
    return {
        k: (v if isinstance(v, int | float | str | bool) or v is None else str(v)) for k, v in row.items()
    }
