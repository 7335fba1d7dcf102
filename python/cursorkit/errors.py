"""The one exception hierarchy of cursorkit; each class also inherits the natural stdlib class."""

from __future__ import annotations

__all__ = [
    "BucketNotFound",
    "BudgetExceeded",
    "ConsumerAssignError",
    "CorruptSnapshot",
    "CursorkitError",
    "DamagedStore",
    "Fenced",
    "InvalidArgument",
    "InvalidInput",
    "InvalidInputType",
    "InternalError",
    "InvalidPosition",
    "LengthMismatch",
    "NotDurable",
    "PersistFailed",
    "ProtocolError",
    "StoreUnavailable",
    "TrackerClosed",
    "UnknownConsumer",
    "UnknownLedger",
    "UnsupportedVersion",
]


class CursorkitError(Exception):
    """Base of every error cursorkit raises on purpose."""


class InvalidPosition(CursorkitError, ValueError):
    """A ledger or entry id outside its legal range (ledger 0..2^63-1, entry -1..2^32-1 in bitmaps)."""


class InvalidArgument(CursorkitError, ValueError):
    """An argument with a legal type but an unusable value (a negative limit, an unknown name)."""


class NotDurable(CursorkitError, TypeError):
    """A persist of a non-durable cursor (a reader's): its state lives in memory only, by design."""


class InvalidInputType(CursorkitError, TypeError):
    """An argument of the wrong type: a float where an integer id belongs, a 2-D array for a column."""


class LengthMismatch(CursorkitError, ValueError):
    """Bulk columns (ledger ids, entry ids) of different lengths."""


class CorruptSnapshot(CursorkitError, ValueError):
    """Persisted bytes that are truncated, fail their checksum or do not decode."""


class BudgetExceeded(CursorkitError, ValueError):
    """Input whose decoding, or a call whose work, would pass a documented budget.

    The message names the budget; pass a larger one to accept the input. Keeps small hostile
    inputs from costing seconds or gigabytes.
    """


class InternalError(CursorkitError, RuntimeError):
    """A bug: a panic inside the native core, caught at the binding (the message names the call).

    The object it happened on may be left in a partly changed state; the process is not.
    """


class UnsupportedVersion(CorruptSnapshot):
    """Persisted bytes written by a format version this build does not read."""


class DamagedStore(CorruptSnapshot):
    """A store or rebuild output that would load only by stepping over damage.

    Loading it as if healthy would hand back older or smaller state (a rewound cursor, missing
    delayed messages), so loaders raise this unless the caller passes ``allow_damaged=True``.
    ``damage`` maps each damaged part (a subscription, ``delayed``, a file) to what was lost.
    """

    def __init__(self, message: str, *, damage: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.damage: dict[str, str] = dict(damage or {})


class ProtocolError(CursorkitError, ValueError):
    """Bytes that break Pulsar's wire protocol: a bad frame, a command that does not parse, a bad batch.

    ``server_error`` names the Pulsar ``ServerError`` (a ``pulsar_api_pb2.ServerError`` value) a broker
    answers the request with, when the problem is one the client is told of and the connection
    survives; ``None`` means there is nothing to answer and the connection is closed.
    """

    def __init__(self, message: str, *, server_error: int | None = None) -> None:
        super().__init__(message)
        self.server_error = server_error


class UnknownLedger(CursorkitError, KeyError):
    """A position in a ledger the cursor does not know, when its ledger sizes are set."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PersistFailed(CursorkitError, OSError):
    """A flush that could not be made durable; recovery still returns the previous flush."""


class StoreUnavailable(CursorkitError, OSError):
    """A shared store (ZooKeeper, an object store) that did not answer, or not in time.

    Raised by reads and by opening a store; a write that fails this way raises ``PersistFailed``.
    Nothing the call would have changed was changed, and the store stays usable once it answers.
    """


class Fenced(PersistFailed):
    """A write of an owner that has lost the store: another opener took ownership after it.

    Ownership is an owner epoch kept in the store and advanced by each opener with a versioned
    write; a write carrying an older epoch is refused and leaves nothing a reader would pick up.
    ``owner_epoch`` is the writer's epoch, ``current_epoch`` the one that fenced it.
    """

    def __init__(self, message: str, *, owner_epoch: int = 0, current_epoch: int = 0) -> None:
        super().__init__(message)
        self.owner_epoch = owner_epoch
        self.current_epoch = current_epoch

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class BucketNotFound(CursorkitError, KeyError):
    """A delayed-index bucket snapshot id that the storage does not hold (Pulsar's BucketNotExist)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TrackerClosed(CursorkitError, RuntimeError):
    """A call on a delayed-delivery tracker after ``close()``."""


class UnknownConsumer(CursorkitError, KeyError):
    """A consumer that a Key_Shared selector does not hold (never added, or already removed)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConsumerAssignError(CursorkitError, ValueError):
    """Hash ranges that cannot be assigned (Pulsar's ConsumerAssignException).

    Overlapping exclusive ranges (the message names the holder and its range), or no auto-split range
    left to halve.
    """


class InvalidInput(CursorkitError, ValueError):
    """A log a pipeline job cannot rebuild from: names the input, the column and a sample row.

    Raised for missing or mistyped columns, null ids, duplicate positions and values no rule covers;
    inputs a documented rule handles (acks for unknown positions, deliver-at in the past) are counted in
    the report instead.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str = "",
        column: str = "",
        row: dict[str, object] | None = None,
        topic: str | None = None,
    ) -> None:
        self.source = source
        self.column = column
        self.topic = topic
        """The topic of a many-topic log the problem is in (None: a one-topic log)."""
        self.row = dict(row) if row is not None else None
        parts = [message]
        if row is not None:
            parts.append("sample row: " + ", ".join(f"{k}={v!r}" for k, v in row.items()))
        super().__init__("; ".join(parts))
