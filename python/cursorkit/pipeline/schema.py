"""The two input logs of the pipeline: their columns, types and the rules for values they may hold.

A *message log* has one row per entry of the topic; an *ack log* one row per acknowledgement a
subscription sent. Both are Parquet (or CSV/JSON) with these columns; extra columns are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "ACK_COLUMNS",
    "ACK_CUMULATIVE",
    "ACK_INDIVIDUAL",
    "ACK_NACK",
    "ACK_TYPES",
    "MAX_PLAUSIBLE_MS",
    "MESSAGE_COLUMNS",
    "Column",
]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an input log: its Arrow type, whether it must be present and may be null."""

    name: str
    type: pa.DataType
    required: bool = True
    nullable: bool = False
    doc: str = ""
    time: bool = False
    """A moment in ms since the epoch: a timestamp-typed column (any unit) is read as its epoch ms."""


MESSAGE_COLUMNS: tuple[Column, ...] = (
    Column("ledger_id", pa.int64(), doc="BookKeeper ledger of the entry (>= 0)"),
    Column("entry_id", pa.int64(), doc="entry within the ledger (>= 0)"),
    Column("publish_time", pa.int64(), doc="ms since the epoch", time=True),
    Column(
        "deliver_at",
        pa.int64(),
        required=False,
        nullable=True,
        doc="ms since the epoch; null or <= publish_time = not delayed",
        time=True,
    ),
    Column("key", pa.string(), required=False, nullable=True, doc="message key; null hashes as NONE_KEY"),
    Column(
        "batch_size",
        pa.int32(),
        required=False,
        nullable=True,
        doc="messages in the entry (a batch); absent or null = 1",
    ),
)
"""Columns of the message log, in this order when written by ``cursorkit generate``."""

ACK_INDIVIDUAL = "individual"
"""An ack of one entry (or, with ``batch_index``, of one message of a batch entry)."""
ACK_CUMULATIVE = "cumulative"
"""An ack of everything up to and including the position (with ``batch_index``: up to that message)."""
ACK_NACK = "nack"
"""Beyond Pulsar: not an ack but one redelivery of the entry (a negative ack, a redelivery request,
a consumer lost holding it). The rebuilt cursor's store keeps, per entry still unacknowledged, how
many such rows it has, as its durable redelivery count (``batch_index`` is ignored)."""
ACK_TYPES = (ACK_INDIVIDUAL, ACK_CUMULATIVE, ACK_NACK)
"""The ack types, lower case: a log's values are compared in any case, so Pulsar's ``AckType`` names
(``Individual``, ``Cumulative``) are read as these."""

ACK_COLUMNS: tuple[Column, ...] = (
    Column("subscription", pa.string(), doc="subscription name"),
    Column("ledger_id", pa.int64()),
    Column("entry_id", pa.int64()),
    Column(
        "batch_index",
        pa.int32(),
        required=False,
        nullable=True,
        doc="index inside a batch entry; null = the whole entry",
    ),
    Column(
        "ack_type",
        pa.string(),
        doc="'individual' or 'cumulative', in any case (Pulsar's AckType names); 'nack': one redelivery",
    ),
    Column("ack_time", pa.int64(), doc="ms since the epoch", time=True),
)
"""Columns of the ack log, in this order when written by ``cursorkit generate``."""

MAX_PLAUSIBLE_MS = 32_503_680_000_000
"""1 January 3000 in ms: a later publish_time/deliver_at is taken for µs or ns and refused."""
