"""The driver's stage plumbing, shared by the one-topic and the many-topic jobs.

Each stage is timed and told to a progress callback; a per-partition function's Arrow output schema
becomes the Spark schema ``mapInArrow`` takes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from cursorkit.pipeline.results import StageTiming

__all__ = ["StageTimer", "spark_schema"]


@dataclass(slots=True)
class StageTimer:
    """Times the stages and tells a progress callback."""

    on_stage: Callable[[str, str], None] | None
    timings: list[StageTiming] = field(default_factory=list)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Times the ``with`` block as stage ``name``."""
        if self.on_stage is not None:
            self.on_stage(name, "start")
        t0 = time.perf_counter()
        yield
        self.timings.append(StageTiming(name, round(time.perf_counter() - t0, 3)))
        if self.on_stage is not None:
            self.on_stage(name, "done")


def spark_schema(arrow_schema: pa.Schema) -> Any:
    """The Spark schema of a per-partition function's Arrow output schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)
