"""``Cursor``: a subscription's ack state with Pulsar's semantics, and its persisted forms.

The ack paths (``ack``, ``ack_many``, ``ack_cumulative``, ``ack_batch_index``, ``ack_batch_set``,
``is_acked``, …) are inherited from the native ``CursorState``, so each is one call into Rust. This
class adds what is decided per persist rather than per ack: limits, encodings, truncation counters,
stats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cursorkit._core import CursorState, Position
from cursorkit.ackstate import persist
from cursorkit.ackstate.limits import UNLIMITED, PersistLimits
from cursorkit.errors import BudgetExceeded, CorruptSnapshot, InvalidArgument


@dataclass(slots=True)
class TruncationCounters:
    """What persists have had to leave out, and how much.

    Pulsar's ``…persist.unacked_ranges.truncated`` and ``…batch_deleted_indexes.truncated`` counters.
    """

    unacked_ranges_truncated: int = 0
    """Persists that left ack ranges out."""
    batch_deleted_indexes_truncated: int = 0
    """Persists that left partial batches out."""
    ranges_cut: int = 0
    """Ack ranges left out, summed over persists."""
    batches_cut: int = 0
    """Partial batches left out, summed over persists."""

    def record(self, result: persist.PersistResult) -> None:
        """Counts one persist's cuts."""
        if result.ranges_cut:
            self.unacked_ranges_truncated += 1
            self.ranges_cut += result.ranges_cut
        if result.batches_cut:
            self.batch_deleted_indexes_truncated += 1
            self.batches_cut += result.batches_cut


@dataclass(frozen=True, slots=True, kw_only=True)
class CursorStats:
    """A cursor's ack-state figures, named after Pulsar's subscription stats where one exists."""

    name: str
    mark_delete_position: Position
    non_contiguous_deleted_ranges: int
    """``nonContiguousDeletedMessagesRanges``."""
    individually_acked_entries: int
    partial_batches: int
    fully_persistable: bool
    message_range_bytes: int
    """``nonContiguousDeletedMessagesRangesSerializedSize``: bytes of the MessageRange field."""
    long_list_map_bytes: int
    compact_bytes: int
    memory_bytes: int
    counters: Mapping[str, int]
    truncations: TruncationCounters = field(default_factory=TruncationCounters)


class Cursor(CursorState):
    """Mark-delete position + individually acked entries + partial batches of one subscription.

    ``mark_delete`` defaults to ``0:-1`` (nothing acknowledged). With ``ledger_sizes``
    ({ledger id: entries}) acks are checked against the ledgers and mark-delete rolls across
    ledger boundaries; ``set_ledger_size`` keeps it current as ledgers grow.
    """

    durable: ClassVar[bool] = True
    """Whether the state may be persisted (a reader's :class:`NonDurableCursor` may not)."""

    def __init__(
        self,
        mark_delete: Position | None = None,
        *,
        name: str = "cursor",
        pulsar_quirks: bool = False,
        ledger_sizes: Mapping[int, int] | None = None,
        limits: PersistLimits | None = None,
        max_unacked_ranges_to_persist: int | None = None,
        properties: Mapping[str, int] | None = None,
    ) -> None:
        base = limits if limits is not None else PersistLimits()
        if max_unacked_ranges_to_persist is not None:
            base = PersistLimits(
                max_unacked_ranges_to_persist=max_unacked_ranges_to_persist,
                max_unacked_ranges_to_persist_in_metadata_store=base.max_unacked_ranges_to_persist_in_metadata_store,
                max_batch_deleted_index_to_persist=base.max_batch_deleted_index_to_persist,
                max_entry_bytes=base.max_entry_bytes,
            )
        self.limits: PersistLimits = base
        self.properties: dict[str, int] = persist.checked_properties(properties or {}, f"cursor {name!r}")
        self.truncations = TruncationCounters()

    def seek(self, read_position: Position) -> None:
        """Pulsar's subscription seek: the same as :meth:`reset`."""
        self.reset(read_position)

    def is_fully_persistable(self) -> bool:
        """Whether a Pulsar-form persist keeps every range and partial batch (O(1)).

        Pulsar compares only the range count; partial batches beyond their own limit are counted
        here too, since they are lost the same way (Pulsar issue #26499).
        """
        return (
            self.non_contiguous_deleted_ranges <= self.limits.max_unacked_ranges_to_persist
            and self.batch_count <= self.limits.max_batch_deleted_index_to_persist
        )

    def persist(self, encoding: str = "compact") -> persist.PersistResult:
        """Serialises the state within the limits; cuts are returned and counted, never silent."""
        result = persist.encode(self, encoding, self.limits)
        self.truncations.record(result)
        return result

    def encode(self, encoding: str = "compact") -> bytes:
        """The bytes of :meth:`persist` in one of :data:`~cursorkit.ackstate.ENCODINGS`.

        ``"managed_cursor_info"`` is Pulsar's metadata-store record, cut at the metadata-store limit.
        """
        return self.persist(encoding).data

    @classmethod
    def decode(
        cls,
        data: bytes,
        encoding: str = "compact",
        *,
        name: str = "cursor",
        ledger_sizes: Mapping[int, int] | None = None,
        limits: PersistLimits | None = None,
        pulsar_quirks: bool = False,
    ) -> Cursor:
        """A cursor from the bytes of :meth:`encode`; damage raises ``CorruptSnapshot``.

        Both Pulsar forms are ``PositionInfo`` messages and decode either way (MessageRange is
        preferred, as Pulsar's recovery does); its cross-ledger ranges are expanded with
        ``ledger_sizes`` when given.
        """
        form = persist.check_encoding(encoding)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgument(f"data must be bytes, got {type(data).__name__}")
        raw = bytes(data)
        where = f"cursor {name!r} ({form})"
        if form == "compact":
            md, acked, batches, props = persist.snapshot_state(persist.open_snapshot(raw, where), where)
        elif form == "managed_cursor_info":
            md, acked, batches, props = persist.decode_cursor_info(raw, where, ledger_sizes)
        else:
            md, acked, batches, props = persist.decode_position_info(raw, where, ledger_sizes)
        cursor = cls(
            name=name,
            pulsar_quirks=pulsar_quirks,
            ledger_sizes=ledger_sizes,
            limits=limits,
            properties=props,
        )
        try:
            cursor.restore(md, acked, batches)
        except BudgetExceeded:
            raise
        except (ValueError, TypeError, KeyError) as e:  # persisted state no cursor can hold
            raise CorruptSnapshot(f"{where}: {e}") from e
        return cursor

    def stats(self) -> CursorStats:
        """Current figures: ranges, entries, persistability, the size of every encoding."""
        acked = self.individually_deleted
        limit = self.limits.max_unacked_ranges_to_persist
        return CursorStats(
            name=self.name,
            mark_delete_position=self.mark_delete_position,
            non_contiguous_deleted_ranges=len(acked),
            individually_acked_entries=acked.total_cardinality(),
            partial_batches=self.batch_count,
            fully_persistable=self.is_fully_persistable(),
            message_range_bytes=acked.message_range_wire_size(limit),
            long_list_map_bytes=acked.long_list_map_wire_size(),
            compact_bytes=persist.encode(self, "compact", self.limits).size,
            memory_bytes=acked.memory_usage(),
            counters=self.counters(),
            truncations=TruncationCounters(
                self.truncations.unacked_ranges_truncated,
                self.truncations.batch_deleted_indexes_truncated,
                self.truncations.ranges_cut,
                self.truncations.batches_cut,
            ),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        data = persist.encode(self, "compact", UNLIMITED).data
        return (_rebuild, (data, self.name, self.ledger_sizes, self.limits, self.pulsar_quirks))


def _rebuild(
    data: bytes,
    name: str,
    ledger_sizes: Mapping[int, int] | None,
    limits: PersistLimits,
    pulsar_quirks: bool,
) -> Cursor:
    return Cursor.decode(
        data, "compact", name=name, ledger_sizes=ledger_sizes, limits=limits, pulsar_quirks=pulsar_quirks
    )
