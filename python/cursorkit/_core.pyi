"""Typed stubs for the native module ``cursorkit._core`` (built from rust/cursorkit-py)."""

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Self, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from cursorkit.keyshared.dispatcher import AckResult

Int64Array = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "AutoSplitSelectorState",
    "ConsistentHashingSelectorState",
    "ExclusiveRangeSelectorState",
    "CursorState",
    "FrameScanner",
    "DelayQueue",
    "DispatchCore",
    "DrainingHashes",
    "InMemoryTrackerState",
    "KeySharedBase",
    "Position",
    "RangeSet",
    "RedeliveryCounts",
    "SharedCore",
    "__version__",
    "_guard_selftest",
    "batch_fits",
    "bitmap_cardinality",
    "crc32c",
    "cut_segments",
    "decode_records",
    "decode_segment",
    "encode_records",
    "encode_segment",
    "entry_fields",
    "hash_many",
    "heap_allocated",
    "heap_peak",
    "message_frames",
    "reset_heap_peak",
    "segment_bitmaps",
    "send_receipts",
    "slot_for",
    "slots_many",
    "sort_indexes",
    "sticky_key_hash",
]

__version__: str

@final
class Position:
    """An immutable (ledger_id, entry_id) pair, ordered by ledger then entry; ``str`` is ``"L:E"``."""

    def __new__(cls, ledger_id: int, entry_id: int) -> Position: ...
    @property
    def ledger_id(self) -> int:
        """The ledger id."""
    @property
    def entry_id(self) -> int:
        """The entry id within the ledger (-1: before the ledger's first entry)."""
    @staticmethod
    def parse(text: str) -> Position:
        """Parses ``"L:E"``."""
    def __reduce__(self) -> tuple[type[Position], tuple[int, int]]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __lt__(self, other: Position, /) -> bool: ...
    def __le__(self, other: Position, /) -> bool: ...
    def __gt__(self, other: Position, /) -> bool: ...
    def __ge__(self, other: Position, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class RangeSet:
    """Acknowledged (ledger, entry) positions as per-ledger roaring bitmaps; ranges are open-closed."""

    def __new__(cls, pulsar_quirks: bool | None = None) -> RangeSet: ...
    @property
    def pulsar_quirks(self) -> bool:
        """Whether Pulsar's test-asserted quirks are reproduced."""
    def add(self, ledger_id: int, entry_id: int) -> bool:
        """Acknowledges one entry; returns whether it was new."""
    def add_many(self, ledger_ids: Any, entry_ids: Any) -> int:
        """Acknowledges many entries (numpy/Arrow columns or sequences); returns how many were new."""
    def add_open_closed(
        self,
        lower_ledger: int,
        lower_entry: int,
        upper_ledger: int,
        upper_entry: int,
        ledger_sizes: Mapping[int, int] | None = None,
    ) -> None:
        """Adds the open-closed range (lower..upper] with Pulsar's cross-ledger rule."""
    def add_ranges(self, rows: Any, ledger_sizes: Mapping[int, int] | None = None) -> None:
        """Adds many open-closed ranges given as an (n, 4) array of (lk, lv, uk, uv) rows."""
    def remove(self, ledger_id: int, entry_id: int) -> bool:
        """Removes one entry; returns whether it was held."""
    def remove_many(self, ledger_ids: Any, entry_ids: Any) -> BoolArray:
        """Removes many positions; a numpy bool array of which were held (Pulsar's untrack)."""
    def union_ledger_bytes(self, ledger_id: int, data: bytes | bytearray | memoryview) -> int:
        """ORs a 32-bit roaring portable bitmap into one ledger; returns how many entries were new."""
    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the entry is held (entry -1 never is)."""
    def contains_many(self, ledger_ids: Any, entry_ids: Any) -> BoolArray:
        """Membership of many positions as a numpy bool array."""
    def range_containing(self, ledger_id: int, entry_id: int) -> tuple[Position, Position] | None:
        """The CLOSED run [L:first, L:last] holding the entry, or None."""
    def remove_at_most(self, ledger_id: int, entry_id: int) -> None:
        """Removes every position <= (ledger_id, entry_id)."""
    def remove_open_closed(
        self, lower_ledger: int, lower_entry: int, upper_ledger: int, upper_entry: int
    ) -> None:
        """Removes the positions p with (lower) < p <= (upper), across ledgers."""
    def first_range(self) -> tuple[Position, Position] | None:
        """First range of the first ledger, open-closed, or None."""
    def last_range(self) -> tuple[Position, Position] | None:
        """Last range of the last ledger, open-closed, or None."""
    def span(self) -> tuple[Position, Position] | None:
        """(first ledger:first entry-1, last ledger:last entry), possibly across ledgers, or None."""
    def ranges(self) -> list[tuple[int, int, int, int]]:
        """Every range as an open-closed `(lower_ledger, lower_entry, upper_ledger, upper_entry)` tuple."""
    def ranges_array(self, max_ranges: int | None = None) -> Int64Array:
        """The first max_ranges ranges as an (n, 4) int64 array of (L, first-1, L, last) rows."""
    def cardinality(self, lower_ledger: int, lower_entry: int, upper_ledger: int, upper_entry: int) -> int:
        """Acked entries p with (lower) <= p <= (upper), inclusive at both ends."""
    def total_cardinality(self) -> int:
        """Number of held entries."""
    def ledgers(self) -> list[int]:
        """Ids of the ledgers holding entries, ascending."""
    def is_empty(self) -> bool:
        """True when no position is held."""
    def clear(self) -> None:
        """Drops every position (each ledger that held one becomes dirty)."""
    def copy(self) -> RangeSet:
        """An independent copy."""
    def memory_usage(self) -> int:
        """Heap bytes held by the native structure."""
    def compact(self) -> None:
        """Run-optimises every bitmap (also done automatically as mutations accumulate)."""
    def dirty_ledgers(self) -> list[int]:
        """Ledgers whose entries changed since the last clear_dirty(), ascending."""
    def clear_dirty(self) -> None:
        """Forgets which ledgers changed (call after persisting them)."""
    def to_bytes(self) -> bytes:
        """The compact, versioned, CRC-checked byte form."""
    @staticmethod
    def from_bytes(data: bytes) -> RangeSet:
        """Decodes to_bytes(); damaged bytes raise CorruptSnapshot, foreign versions UnsupportedVersion."""
    def ledger_to_bytes(self, ledger_id: int) -> bytes | None:
        """One ledger as a run-optimised 32-bit roaring portable bitmap, or None."""
    def set_ledger_bytes(self, ledger_id: int, data: bytes) -> None:
        """Replaces one ledger's entries with a portable bitmap's (empty removes the ledger)."""
    def to_long_list_map(
        self, max_entries: int | None = None, max_bytes: int | None = None, max_words: int = ...
    ) -> dict[int, Int64Array]:
        """Pulsar's toRanges(max): {ledger: int64 BitSet words}, whole ledgers in ascending order.

        max_bytes stops before the ledger that would pass it; without it, past max_words is BudgetExceeded.
        """
    @staticmethod
    def from_message_range_field(
        data: bytes,
        field: int = 3,
        ledger_sizes: Mapping[int, int] | None = None,
        pulsar_quirks: bool = False,
        max_chunks: int = ...,  # 2**21 chunks of 65,536 entries
    ) -> RangeSet:
        """Parses a serialised MessageRange list (field 3 of PositionInfo, 4 of ManagedCursorInfo) in Rust.

        Cross-ledger ranges are expanded with ledger_sizes.
        """
    @staticmethod
    def from_long_list_map(words: Mapping[int, Any], pulsar_quirks: bool = False) -> RangeSet:
        """Rebuilds a set from {ledger: BitSet words}."""
    def to_message_ranges(self, max_ranges: int | None = None) -> Int64Array:
        """Same rows as ranges_array: the MessageRange list Pulsar persists."""
    def message_range_wire_size(self, max_ranges: int | None = None) -> int:
        """Exact bytes of the first max_ranges ranges as PositionInfo's MessageRange list (field 3)."""
    def long_list_map_wire_size(self, max_entries: int | None = None) -> int:
        """Exact bytes of to_long_list_map(max_entries) as PositionInfo's LongListMap list (field 6)."""
    def message_range_field_bytes(self, max_ranges: int | None = None, field: int | None = None) -> bytes:
        """The first max_ranges ranges as MessageRange field bytes, exactly as protobuf writes them.

        field 3 is PositionInfo's, 4 ManagedCursorInfo's.
        """
    def long_list_map_field_bytes(self, max_entries: int | None = None) -> bytes:
        """to_long_list_map(max_entries) as PositionInfo field 6 bytes (what protobuf would write)."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    def __copy__(self) -> RangeSet: ...
    def __deepcopy__(self, memo: object) -> RangeSet: ...

_BatchRow = tuple[int, int, int, bytes]

@disjoint_base
class CursorState:
    """A subscription's ack state (mark-delete, individual acks, partial batches); subclassed by Cursor."""

    def __new__(
        cls,
        mark_delete: Position | None = None,
        *,
        name: str | None = None,
        pulsar_quirks: bool | None = None,
        ledger_sizes: Mapping[int, int] | None = None,
        **_config: Any,
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The cursor's name (used in errors and stats)."""
    @property
    def pulsar_quirks(self) -> bool:
        """Whether the ack ranges reproduce Pulsar's quirks."""
    @property
    def mark_delete_position(self) -> Position:
        """The last entry of the acknowledged prefix."""
    @property
    def individually_deleted(self) -> RangeSet:
        """A copy of the individually acknowledged entries after mark-delete."""
    @property
    def non_contiguous_deleted_ranges(self) -> int:
        """Number of ack ranges (Pulsar's nonContiguousDeletedMessagesRanges), in O(1)."""
    @property
    def batch_count(self) -> int:
        """Number of partially acknowledged batch entries."""
    @property
    def mutations(self) -> int:
        """Number of state changes so far."""
    @property
    def ledger_sizes(self) -> dict[int, int] | None:
        """Known ledger sizes, or None."""
    def set_ledger_sizes(self, sizes: Mapping[int, int] | None) -> None:
        """Sets (None: forgets) the ledger sizes.

        Acks are then checked against them, and mark-delete rolls across ledger boundaries.
        """
    def set_ledger_size(self, ledger_id: int, entries: int) -> None:
        """Records that a ledger holds `entries` entries (a new or growing ledger)."""
    @overload
    def ack(self, position: Position, entry_id: None = None) -> bool:
        """Acknowledges one entry, a `Position` or `(ledger_id, entry_id)` ints; returns whether it was new.

        The two-int form makes no `Position`; a no-op ack is counted.
        """
    @overload
    def ack(self, position: int, entry_id: int) -> bool: ...
    def ack_many(self, ledger_ids: Any, entry_ids: Any) -> int:
        """Acknowledges many entries given as ledger and entry columns; returns how many were new."""
    def ack_cumulative(
        self, position: Position, batch_index: int | None = None, batch_size: int | None = None
    ) -> bool:
        """Acknowledges everything up to the position; returns whether anything new was acknowledged.

        With `batch_index` (and `batch_size`), only indexes `0..=batch_index` of that entry.
        """
    def ack_batch_index(self, position: Position, index: int, batch_size: int) -> bool:
        """Acknowledges one index of a batch entry; the entry is acknowledged with its last index."""
    def ack_batch_set(self, position: Position, words: Any, batch_size: int) -> int:
        """Applies Pulsar's ``ack_set`` (int64 words, a set bit = index still unacked) to a batch entry.

        ANDed word by word: every index the words leave unset is acknowledged, the entry with its
        last (all-zero words ack it whole). Only the words a batch of ``batch_size`` holds are read:
        words past them and bits past ``batch_size`` are ignored, missing words count as zero.
        Returns how many indexes were newly acknowledged.
        """
    @overload
    def is_acked(self, position: Position, entry_id: None = None) -> bool:
        """Whether the entry is acknowledged (at or below mark-delete, or individually)."""
    @overload
    def is_acked(self, position: int, entry_id: int) -> bool: ...
    def is_acked_many(self, ledger_ids: Any, entry_ids: Any) -> BoolArray:
        """`is_acked` for ledger and entry columns, as a numpy bool array."""
    def is_batch_index_acked(self, position: Position, index: int) -> bool:
        """Whether one index of a batch entry is acknowledged."""
    def backlog(self, ledger_sizes: Mapping[int, int] | None = None) -> int:
        """Unacknowledged entries after mark-delete, given ledger sizes (or the cursor's own)."""
    def next_unacked(
        self,
        after: Position | None = None,
        limit: int | None = None,
        ledger_sizes: Mapping[int, int] | None = None,
    ) -> Int64Array:
        """Up to `limit` (default 1000) not fully acknowledged entries after `after` and mark-delete.

        An `(n, 2)` int64 array of (ledger, entry) rows.
        """
    def skip(self, count: int, ledger_sizes: Mapping[int, int] | None = None) -> int:
        """Acknowledges the next `count` unacknowledged entries; returns how many were skipped."""
    def clear_backlog(self, ledger_sizes: Mapping[int, int] | None = None) -> bool:
        """Acknowledges everything up to the last entry of the last ledger; returns whether it moved."""
    def reset(self, read_position: Position) -> None:
        """Moves the cursor so that `read_position` is delivered next, forgetting every ack after it."""
    def compact_size_estimate(self) -> int:
        """O(1) upper estimate of the compact encoding's bytes (exact form: `encode("compact")`)."""
    def counters(self) -> dict[str, int]:
        """Counts of applied and no-op acknowledgements by kind."""
    def batches(self) -> list[_BatchRow]:
        """Partial batches as `(ledger, entry, batch_size, words)` rows (`batch_size` 0: unknown).

        `words` holds the unacked indexes as little-endian u64 words (Pulsar's deleteSet).
        """
    def batch(self, position: Position) -> tuple[int, bytes] | None:
        """The unacked-index words of one batch entry, or None."""
    def dirty_ledgers(self) -> list[int]:
        """Ledgers whose acks changed since the last flush."""
    def clear_dirty(self) -> None:
        """Forgets which ledgers changed (the state now matches what a store holds)."""
    def mark_dirty(self, ledger_ids: list[int]) -> None:
        """Marks ledgers dirty again (after a flush that failed)."""
    def flush_state(
        self, dirty_only: bool = True, clear_dirty: bool = True
    ) -> tuple[Position, list[tuple[int, bytes | None]], list[int], list[_BatchRow], int]:
        """One consistent cut for a store: `(mark_delete, ledgers, live, batches, mutations)`.

        `ledgers` has the dirty (or, not dirty_only, all) ledgers' roaring bytes; `live` every ledger id.
        """
    def restore(self, mark_delete: Position, acked: RangeSet, batches: Iterable[_BatchRow]) -> None:
        """Replaces the whole state: mark-delete, the acked entries and the partial batches.

        Batches are `(ledger, entry, batch_size, words)` rows; mark-delete is then rolled forward.
        """

_Popped = tuple[Int64Array, Int64Array, Int64Array]

@final
class RedeliveryCounts:
    """How many times each position went back for redelivery, as run-length ranges (beyond Pulsar)."""

    def __new__(cls, max_runs: int | None = None) -> RedeliveryCounts: ...
    @staticmethod
    def decode(data: bytes, max_runs: int | None = None) -> RedeliveryCounts:
        """Counts decoded from a snapshot (``encode``) or a delta (``take_delta``)."""
    @property
    def max_runs(self) -> int:
        """The budget of runs."""
    def __len__(self) -> int: ...
    @property
    def run_count(self) -> int:
        """Runs held (neighbouring positions with one count share one)."""
    def memory_usage(self) -> int:
        """Bytes held, approximately."""
    def get(self, position: Position) -> int:
        """A position's count (0 when it has none)."""
    def get_many(self, ledger_ids: Any, entry_ids: Any) -> npt.NDArray[np.uint32]:
        """Counts of many positions, as a uint32 array."""
    def set(self, position: Position, count: int) -> None:
        """Sets a position's count (0 forgets it)."""
    def increment(self, position: Position) -> int:
        """Raises a position's count by one and returns it."""
    def set_many(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Sets the counts of many positions (checked first: a bad row changes nothing)."""
    def forget_through(self, position: Position) -> None:
        """Forgets every count at or below ``position`` (mark-delete moved)."""
    def prune(self, cursor: CursorState) -> int:
        """Forgets the counts of everything the cursor acknowledged; returns how many went."""
    def clear(self) -> None:
        """Forgets every count (the next delta forgets them too)."""
    @property
    def has_changes(self) -> bool:
        """Whether anything changed since the last ``take_delta``."""
    def take_delta(self) -> bytes:
        """The changed positions with their counts (0: forgotten), encoded; clears the changes."""
    def encode(self, first_runs: int | None = None) -> bytes:
        """Every run, encoded (a snapshot); ``first_runs``: only that many, from the lowest position."""
    def apply(self, data: bytes) -> None:
        """Applies a delta or snapshot over these counts, as changes (damaged bytes change nothing)."""
    def runs(self, min_count: int = 1) -> list[tuple[Position, Position, int]]:
        """Runs with a count of at least ``min_count`` as ``(first, last, count)``, in position order."""

@final
class DelayQueue:
    """Delayed message indexes (deliver_at, ledger, entry), unique by position, popped in that order."""

    def __new__(cls) -> DelayQueue: ...
    def add(self, deliver_at: int, ledger_id: int, entry_id: int) -> bool:
        """Queues one index; False when the position is already queued (the first time wins)."""
    def add_many(self, deliver_at: Any, ledger_ids: Any, entry_ids: Any) -> int:
        """Queues many indexes from numpy/Arrow columns or sequences; returns how many were new."""
    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is queued."""
    def __len__(self) -> int: ...
    def peek(self) -> tuple[int, int, int] | None:
        """The smallest queued `(deliver_at, ledger_id, entry_id)`, or None."""
    def pop_until(self, deliver_at: int, ledger_id: int, entry_id: int, max_items: int) -> _Popped:
        """Pops, in order, up to `max_items` indexes at or before `(deliver_at, ledger_id, entry_id)`.

        Returns `(deliver_at, ledger_ids, entry_ids)` int64 arrays.
        """
    def pop_due(self, cutoff: int, max_items: int) -> _Popped:
        """Pops, in order, up to `max_items` indexes with `deliver_at <= cutoff`."""
    def drain(self) -> _Popped:
        """Removes and returns every index in order, as three int64 arrays."""
    def remove_ledgers_below(self, ledger_id: int) -> int:
        """Drops the indexes of ledgers below `ledger_id` (at or below mark-delete); returns how many."""
    def drop_untracked(self, tracked: RangeSet) -> int:
        """Pops head indexes whose position `tracked` no longer holds; returns how many went."""
    def clear(self) -> None:
        """Drops everything and releases the memory."""
    def memory_usage(self) -> int:
        """Heap bytes held (vectors, maps, bitmaps; capacities, not lengths)."""

@disjoint_base
class InMemoryTrackerState:
    """Pulsar's in-memory delayed-delivery tracker rules; subclassed by InMemoryDelayedDeliveryTracker."""

    def __new__(
        cls,
        *,
        tick_time_ms: int = 1000,
        strict: bool = False,
        fixed_delay_lookahead: int = 50000,
        clock: Callable[[], int] | None = None,
        **_config: Any,
    ) -> Self: ...
    def add_message(self, ledger_id: int, entry_id: int, deliver_at: int) -> bool:
        """Tracks one message; False means "deliver it now" (deliver_at negative or already due)."""
    def add_many(self, ledger_ids: Any, entry_ids: Any, deliver_at: Any) -> BoolArray:
        """Tracks many messages (columns); returns a bool array: True = tracked, False = deliver now."""
    def has_message_available(self) -> bool:
        """Whether a message is due now."""
    def get_scheduled_messages(self, max_messages: int) -> Int64Array:
        """Up to `max_messages` due messages as an (n, 2) int64 array of (ledger, entry) rows.

        Sorted by position, as Pulsar returns a sorted set.
        """
    def next_delivery_time(self) -> int | None:
        """The stored delivery time of the next message, or None when empty."""
    def should_pause_all_deliveries(self) -> bool:
        """Pulsar's fixed-delay pause: every message had the same delay and none is due yet.

        Applies once at least the lookahead number of messages are held.
        """
    def contains_message(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the position is held."""
    @property
    def number_of_delayed_messages(self) -> int:
        """Number of distinct positions held (Pulsar's getNumberOfDelayedMessages)."""
    @property
    def buffer_memory_usage(self) -> int:
        """Exact heap bytes of the index (Pulsar's getBufferMemoryUsage)."""
    @property
    def tick_time_ms(self) -> int:
        """The tick (ms): adds due within it are delivered at once."""
    @property
    def strict(self) -> bool:
        """Whether delivery times are strict (never early; cutoff = now)."""
    @property
    def fixed_delay_lookahead(self) -> int:
        """Fixed-delay detection lookahead (0: never pause)."""
    @property
    def precision_ms(self) -> int:
        """Rounding precision of stored delivery times (ms, a power of two, fixed at construction)."""
    @property
    def highest_delivery_time(self) -> int:
        """Highest deliver_at accepted since the tracker was last empty (0 when empty)."""
    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
    def reset_tick_time(self, tick_time_ms: int) -> None:
        """Changes the tick (a topic policy); the rounding precision stays as constructed."""
    def clear(self) -> None:
        """Forgets every message and releases the memory."""
    def close(self) -> None:
        """Releases the memory; later calls other than the properties raise `TrackerClosed`.

        Closing twice is a no-op.
        """
    def now(self) -> int:
        """The clock's current reading (ms)."""
    def counters(self) -> dict[str, int]:
        """Counts of added, duplicate, refused (due / negative) and delivered messages."""

@final
class DispatchCore:
    """A Key_Shared subscription's per-entry dispatch loop, pending acks and replay queue."""

    def __new__(cls, mode: Literal["draining", "last-sent", "out-of-order"]) -> DispatchCore: ...
    def add_consumer(self, consumer_id: int, permits: int, cursor: CursorState) -> None:
        """Registers consumer `consumer_id` with `permits`."""
    def remove_consumer(self, consumer_id: int, cursor: CursorState) -> list[Position]:
        """Unregisters a consumer; returns its unacked positions (now in replay), in order."""
    def set_owners(self, owners: Any) -> None:
        """Replaces the owner table: consumer id per slot (-1: nobody), at most 65536 slots."""
    def assign(self, added: list[tuple[int, list[tuple[int, int]]]]) -> None:
        """Updates the owner table from a membership change's exact impact (65536-slot selectors only).

        `added` is `[(new owner id, [(start, end), ...]), ...]`.
        """
    def register_moved(self, removed: list[tuple[int, list[tuple[int, int]]]], skip: int) -> None:
        """PIP-379: registers the hashes that moved away from their owners as draining.

        `removed` is `[(previous owner id, [(start, end), ...]), ...]` from consumer `skip`'s change.
        """
    def set_batch_sizes(self, ledgers: Any, entries: Any, messages: Any) -> None:
        """How many messages entries hold (int64 columns): sending one takes that many permits."""
    def add_permits(self, consumer_id: int, n: int) -> None:
        """A flow request of `n` permits."""
    def set_max_unacked_per_key(self, cap: int) -> None:
        """Beyond Pulsar: at most ``cap`` unacknowledged messages per slot (0: no cap)."""
    def max_unacked_per_key(self) -> int:
        """The per-key cap (0: none)."""
    def key_unacked(self, slot: int) -> int:
        """Unacknowledged messages of ``slot`` (counted while the cap is on)."""
    def set_key_ordered_nacks(self, on: bool) -> None:
        """Beyond Pulsar: key-ordered negative acks (refused in out-of-order mode)."""
    def key_ordered_nacks(self) -> bool:
        """Whether key-ordered nacks are on."""
    def key_order_figures(self) -> tuple[int, int, int, int, int, int]:
        """`(parked acks, held keys, unanswered copies, taken back, stale answers, parked dropped)`."""
    def permits_total(self) -> int:
        """Permits available over all consumers."""
    def add_read(self, ledgers: Any, entries: Any, slots: Any, cursor: CursorState) -> None:
        """New entries of one read (ledger, entry and slot columns)."""
    def add_replay(self, ledgers: Any, entries: Any, slots: Any, cursor: CursorState) -> None:
        """Entries to redeliver (re-read for replay, or delayed messages now due)."""
    def dispatch(self, cursor: CursorState) -> list[tuple[int, Int64Array, Int64Array]]:
        """Sends what can be sent: `[(consumer id, ledgers, entries), ...]`, int64 arrays."""
    def ack(
        self, consumer_id: int, ledgers: Any, entries: Any, cursor: CursorState
    ) -> tuple[int, int, int, int, int, int, int]:
        """Acks of many positions from one consumer.

        Returns `(acked, from_other_consumer, not_pending, duplicates, unblocked, parked, stale)`.
        """
    def ack_one(
        self, consumer_id: int, ledger_id: int, entry_id: int, cursor: CursorState
    ) -> tuple[int, int, int, int, int, int, int]:
        """One ack from ints (the per-call path)."""
    def nack(self, consumer_id: int, ledgers: Any, entries: Any, cursor: CursorState) -> int:
        """Negative acks; returns how many were pending on the consumer."""
    def redeliver(self, consumer_id: int, cursor: CursorState) -> list[Position]:
        """Every unacked message of the consumer to replay; returns them in order."""
    def unacked(self, consumer_id: int) -> list[Position]:
        """The consumer's unacked positions, in order."""
    def consumer_figures(self, consumer_id: int) -> tuple[int, int, int, Position | None, int, bool]:
        """`(permits, unacked, delivered, joined last sent position or None, progress, stuck)`."""
    def set_stuck(self, consumer_id: int, stuck: bool) -> None:
        """Beyond Pulsar: marks a consumer stuck (its slots' unsendable entries are spilled)."""
    def take_reread(self) -> tuple[Position, Position] | None:
        """The span of positions to read again for spilled entries that can come back, or None."""
    def add_reread(
        self,
        ledgers: Any,
        entries: Any,
        slots: Any,
        limit: int | None,
        cursor: CursorState,
        read_to: Position | None = None,
    ) -> int:
        """The span's entries read again, through `read_to` (None: all of it).

        Queues at most `limit` spilled ones (None: all); returns how many.
        """
    def isolation_figures(
        self,
    ) -> tuple[int, int, tuple[Position, Position] | None, int, int, int, int]:
        """`(stuck, spilled slots, span or None, spilled, brought back, read back, heap bytes)`."""
    def replay_positions(self) -> list[Position]:
        """The replay queue, in order."""
    def replay_len(self) -> int:
        """Replay queue length."""
    def take_rewind(self) -> Position | None:
        """Where to read again after, once, when the last consumer left; else None."""
    def blocked(self) -> list[tuple[int, str, int | None, int | None, Position]]:
        """`[(slot, reason, consumer id or None, owner id or None, position), ...]` of the last dispatch."""
    def unblocked_events(self) -> int:
        """Unblock events so far."""
    def replay_dropped_acked(self) -> int:
        """Replay entries dropped because the cursor had acknowledged them."""
    def redelivery_count(self, ledger_id: int, entry_id: int) -> int:
        """How many times a position went back for redelivery."""
    def redelivery_counts(self, ledgers: Any, entries: Any) -> npt.NDArray[np.int32]:
        """Redelivery counts of many positions, as an int32 array."""
    def set_counts_journal(self, on: bool) -> None:
        """Journals every redelivery-count raise (durable counts); kept when the last consumer leaves."""
    def take_raised_counts(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """The raises journaled since the last call: ledger ids, entry ids, new counts."""
    def seed_counts(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Counts read back from a durable journal (each position keeps the higher)."""
    def raise_counts(self, positions: Any) -> None:
        """One more redelivery of each position (journaled)."""
    def redeliveries_tracked(self) -> int:
        """Positions with a redelivery count held."""
    def draining_hashes(self) -> Int64Array:
        """Draining hashes as `(n, 4)` int64 rows `(hash, owner id, unacked, blocked attempts)`."""
    def draining_cleared(self) -> dict[int, int]:
        """`{consumer id: draining_hashes_cleared_total}` of consumers with a draining record."""
    def draining_len(self) -> int:
        """Number of draining hashes."""
    def last_sent_position(self) -> Position | None:
        """PIP-282: the last sent position, or None before first use."""
    def individually_sent(self) -> str:
        """PIP-282: the positions sent after the last sent position, in the range-set string form."""
    def recently_joined(self) -> list[tuple[int, Position]]:
        """PIP-282: `[(consumer id, limit), ...]` of joined consumers still limited."""
    def highest_read(self) -> Position | None:
        """The highest position read since the last release, or None."""
    def pending_memory_usage(self) -> int:
        """Heap bytes of every consumer's pending acks."""
    def pending_total(self) -> int:
        """Messages pending over all consumers."""

@final
class SharedCore:
    """A Shared subscription's dispatch state: round-robin over permits, replay first, in flight."""

    def __new__(
        cls,
        round_robin_batch: int | None = None,
        max_unacked_per_consumer: int | None = None,
        max_unacked_per_subscription: int | None = None,
    ) -> SharedCore: ...
    def add_consumer(self, consumer_id: int, priority: int, permits: int) -> None:
        """Registers consumer `consumer_id` at `priority` (lower is served first) with `permits`."""
    def remove_consumer(self, consumer_id: int, cursor: CursorState) -> list[Position]:
        """Unregisters a consumer; returns what it held (now queued again), in order."""
    def add_permits(self, consumer_id: int, permits: int) -> None:
        """Adds permits (messages) to a consumer."""
    def set_paused(self, consumer_id: int, paused: bool) -> None:
        """Pauses (True) or resumes a consumer."""
    def entries_to_read(self, read_batch: int) -> int:
        """How many new entries to read now (0 while the queue has entries or nobody can take)."""
    def add_read(self, positions: Any, messages: Any, cursor: CursorState) -> None:
        """Adds entries read from the log: a `Position` sequence and their message counts."""
    def add_read_columns(self, ledger_ids: Any, entry_ids: Any, messages: Any, cursor: CursorState) -> None:
        """`add_read` with the positions as ledger and entry id columns (int64 arrays or sequences)."""
    def dispatch(self, cursor: CursorState) -> list[tuple[int, list[Position], list[int]]]:
        """Sends what can be sent: `(consumer id, [Position], [redelivery count])` per consumer."""
    def ack(self, positions: Any, cursor: CursorState) -> tuple[int, int, int]:
        """Acknowledges `Position`s, whoever holds them: `(released, not_held, duplicates)`."""
    def ack_cumulative(self, position: Position, cursor: CursorState) -> tuple[int, int, int]:
        """Acknowledges everything up to and including a position: `(released, not_held, duplicates)`."""
    def nack(self, consumer_id: int, positions: Any, cursor: CursorState) -> int:
        """A consumer's negative acks of `Position`s it holds; returns how many went back."""
    def redeliver_all(self, consumer_id: int, cursor: CursorState) -> int:
        """Everything a consumer holds goes back, counts raised; returns how many."""
    def reset(self) -> None:
        """Forgets everything sent or waiting (a seek)."""
    def redelivery_count(self, position: Position) -> int:
        """A position's redelivery count."""
    def set_counts_journal(self, on: bool) -> None:
        """Journals every redelivery-count raise (durable counts); kept when the last consumer leaves."""
    def take_raised_counts(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint32]]:
        """The raises journaled since the last call: ledger ids, entry ids, new counts."""
    def seed_counts(self, ledger_ids: Any, entry_ids: Any, counts: Any) -> None:
        """Counts read back from a durable journal (each position keeps the higher)."""
    def raise_counts(self, positions: Any) -> None:
        """One more redelivery of each position (journaled)."""
    def held_by(self, consumer_id: int) -> list[Position]:
        """The positions a consumer holds, in order."""
    def queued(self) -> list[Position]:
        """The queued positions, in order."""
    def figures(self) -> list[tuple[int, int, int, int, int, int, bool]]:
        """Per consumer in join order: `(id, priority, permits, unacked, held entries, msg out, paused)`."""
    def totals(self) -> tuple[int, int, int, int, int]:
        """`(queued, held entries, unacked messages, dropped as acked, permits of those who can take)`."""
    def memory_usage(self) -> int:
        """Heap bytes of the state, roughly."""

@disjoint_base
class KeySharedBase:
    """The per-event calls of ``KeySharedDispatcher`` (its base class), each one call into Rust."""

    def __new__(
        cls,
        *,
        cursor: CursorState,
        mode: str | None = None,
        policy: Any = None,
        delayed: Any = None,
        look_ahead_per_consumer: int | None = None,
        look_ahead_per_subscription: int | None = None,
        max_unacked_per_consumer: int | None = None,
        max_unacked_per_subscription: int | None = None,
        **_rest: Any,
    ) -> Self: ...
    @property
    def _core(self) -> DispatchCore: ...
    @property
    def cursor(self) -> Any:
        """The cursor the acks go to."""
    @property
    def policy(self) -> Any:
        """The PIP-299 pause policy consulted before new entries are read, or None."""
    @policy.setter
    def policy(self, value: Any) -> None: ...
    @property
    def delayed(self) -> Any:
        """The delayed-delivery tracker holding messages until their deliver-at, or None."""
    @delayed.setter
    def delayed(self, value: Any) -> None: ...
    @property
    def look_ahead_per_consumer(self) -> int:
        """``keySharedLookAheadMsgInReplayThresholdPerConsumer`` (0: none of this kind)."""
    @look_ahead_per_consumer.setter
    def look_ahead_per_consumer(self, value: int) -> None: ...
    @property
    def look_ahead_per_subscription(self) -> int:
        """``keySharedLookAheadMsgInReplayThresholdPerSubscription`` (0: none of this kind)."""
    @look_ahead_per_subscription.setter
    def look_ahead_per_subscription(self, value: int) -> None: ...
    @property
    def max_unacked_per_consumer(self) -> int:
        """``maxUnackedMessagesPerConsumer``: the look-ahead fallback when both limits are 0."""
    @max_unacked_per_consumer.setter
    def max_unacked_per_consumer(self, value: int) -> None: ...
    @property
    def max_unacked_per_subscription(self) -> int:
        """``maxUnackedMessagesPerSubscription``: likewise (0 = no limit)."""
    @max_unacked_per_subscription.setter
    def max_unacked_per_subscription(self, value: int) -> None: ...
    @property
    def look_ahead_limit(self) -> int:
        """Replay-queue size beyond which new entries are not read (Pulsar 4's rule)."""
    @property
    def read_blocked(self) -> str | None:
        """Why the last ``should_read()`` said no: ``paused``, ``look-ahead`` or ``no-permits``.

        None when it said yes.
        """
    def _register(self, consumer: Any, consumer_id: int) -> None: ...
    def _unregister(self, consumer: Any) -> None: ...
    def add_permits(self, consumer: Any, n: int) -> None:
        """A consumer's flow request: ``n`` more messages may be sent to it."""
    def ack(self, consumer: Any, position: Position) -> AckResult:
        """An individual ack from ``consumer``, accepted as Pulsar accepts it (see ``AckResult``)."""
    def ack_many(self, consumer: Any, positions: Iterable[Position]) -> AckResult:
        """Individual acks of many positions from one consumer, accepted as Pulsar accepts them."""
    def ack_columns(self, consumer: Any, ledgers: Any, entries: Any) -> AckResult:
        """``ack_many`` with the positions as ledger and entry columns (numpy, Arrow or int sequences)."""
    def nack(self, consumer: Any, positions: Iterable[Position]) -> int:
        """Negative acks: the messages leave the consumer and are redelivered (order may change)."""
    def redelivery_count(self, position: Position) -> int:
        """How many times ``position`` went back for redelivery (nacks and redeliver, as Pulsar counts)."""
    def should_read(self) -> bool:
        """Whether the broker should read new entries now (PIP-299, look-ahead, permits)."""
    def max_entries_to_read(self) -> int:
        """How many new entries the broker should read now; 0 when ``should_read()`` says no."""
    def add_read(self, positions: Iterable[Position], slots: Any, deliver_at: Any = None) -> None:
        """Entries of one read: ``positions`` in read order and their selector ``slots``.

        Optional ``deliver_at`` times: the entries the delayed tracker takes wait there.
        """
    def add_read_columns(self, ledgers: Any, entries: Any, slots: Any, deliver_at: Any = None) -> None:
        """One read as int64 columns of ledger ids, entry ids and slots (and deliver-at times)."""
    def dispatch(self) -> list[tuple[Any, list[Position]]]:
        """Sends what can be sent: due delayed messages and the replay queue first, then new entries.

        Returns ``[(consumer, [Position, ...]), ...]``.
        """
    def dispatch_columns(self) -> list[tuple[Any, Int64Array, Int64Array]]:
        """``dispatch()`` as ``(consumer, ledger ids, entry ids)`` int64 columns: no object per message.

        Each column is a view of one buffer the dispatch fills once.
        """

@final
class DrainingHashes:
    """PIP-379's draining hashes: hash (1..65535) -> (owner, references, blocked attempts), one owner each."""

    def __new__(cls) -> DrainingHashes: ...
    def add_entry(self, consumer: int, hash: int) -> None:
        """Registers one pending message of `hash` on `consumer` (a new entry or one more reference).

        A hash draining on another consumer is `InvalidArgument`.
        """
    def add_entries(self, consumer: int, hashes: Any) -> None:
        """`add_entry` for every hash of a column (repeats add references); all or nothing."""
    def reduce_ref(self, consumer: int, hash: int, closing: bool = False) -> bool:
        """Drops one reference (an ack; `closing`: a leaving consumer's redelivery).

        True when the entry went and had blocked another consumer (not while closing).
        """
    def reduce_refs(self, consumer: int, hashes: Any, closing: bool = False) -> Int64Array:
        """`reduce_ref` for every hash of a column; returns the unblocked hashes (int64 array)."""
    def should_block(self, target: int, hash: int) -> bool:
        """PIP-379's gate: True blocks dispatching `hash` to `target` while it drains elsewhere.

        Blocks are counted; the owner itself reclaims the hash (its entry goes, False).
        """
    def should_block_many(self, targets: Any, hashes: Any) -> BoolArray:
        """`should_block` for each `(targets[i], hashes[i])` in order, as a bool array."""
    def owner(self, hash: int) -> int | None:
        """The consumer a hash drains on, or None."""
    def entry(self, hash: int) -> tuple[int, int, int] | None:
        """`(owner, unacked, blocked_attempts)` of a draining hash, or None."""
    def remove_consumer(self, consumer: int, closing: bool = True) -> tuple[Int64Array, BoolArray]:
        """Drops a consumer's draining hashes and statistics; returns `(hashes, unblocked)`.

        Hashes ascending (int64); `unblocked` marks those that had blocked others (never if closing).
        """
    def clear(self) -> None:
        """Forgets every hash and consumer statistic (all consumers gone); counters stay."""
    def __len__(self) -> int: ...
    def consumer_stats(self, consumer: int) -> dict[str, int]:
        """One consumer's Pulsar 4 statistics, zeros if unknown.

        `draining_hashes_count`, `draining_hashes_cleared_total`, `draining_hashes_unacked_messages`.
        """
    def stats(self) -> dict[int, dict[str, int]]:
        """`{consumer: consumer_stats(consumer)}` for every consumer with a record."""
    def draining_hashes(self, consumer: int | None = None) -> Int64Array:
        """Draining hashes as `(n, 4)` int64 `(hash, owner, unacked, blocked_attempts)` rows by hash.

        Only `consumer`'s when given (Pulsar's `drainingHashes`).
        """
    def counters(self) -> dict[str, int]:
        """Lifetime counts: `blocked_attempts`, `unblocked`, `cleared`, `stale_reductions`."""
    def memory_usage(self) -> int:
        """Exact heap bytes held (capacities, not lengths)."""

@final
class FrameScanner:
    """A client's byte stream into Pulsar frames, SEND/ACK/FLOW decoded (see ``cursorkit.broker``).

    ``feed`` returns one tuple per frame, its first item the command type:
    ``(6, producer_id, sequence_id, stored, publish_time, num_messages)`` for a SEND,
    ``(10, consumer_id, cumulative, [Position])`` for an ACK, ``(11, consumer_id, permits)`` for a
    FLOW, ``(0, frame)`` for any other frame (its bytes after ``totalSize``, for the full decoder).
    """

    def __new__(cls, max_frame_size: int) -> FrameScanner: ...
    @property
    def buffered(self) -> int:
        """Bytes held of a frame not yet complete."""
    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """The frames ``data`` completes, in stream order; ``ProtocolError`` at a size that cannot be."""
    def feed_runs(self, data: bytes) -> list[tuple[Any, ...]]:
        """``feed`` with each run of one producer's SENDs as one item ``(6, producer_id, [seq], [rows])``."""

def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data`` (any C-contiguous byte buffer), continuing ``value``, as a u32."""

def message_frames(
    consumer_id: int,
    positions: list[Position],
    redelivery_counts: list[int],
    datas: list[bytes],
    ack_sets: list[list[int] | None] | None = None,
    partition: int | None = None,
) -> bytes:
    """The MESSAGE frames delivering ``datas`` at ``positions`` to ``consumer_id``, concatenated.

    Their ids name ``partition`` when it is a partition of a partitioned topic (None or negative: not).
    """

def send_receipts(producer_id: int, sequence_ids: list[int], positions: list[Position]) -> bytes:
    """The SEND_RECEIPT frames of ``sequence_ids`` stored at ``positions``, concatenated."""

def batch_fits(
    num_messages: int,
    payload_bytes: int,
    compression: int | None = None,
    uncompressed_size: int | None = None,
) -> bool:
    """Whether a batch payload of ``payload_bytes`` can hold ``num_messages`` messages (6 bytes each).

    A compressed payload (``compression``: a ``CompressionType``, None or 0 for none) is bounded by
    its codec's largest expansion and its stated ``uncompressed_size``; a count of 1 or less fits.
    """

def entry_fields(datas: list[bytes]) -> tuple[list[int], list[bytes]]:
    """Each stored entry's ``deliver_at_time`` (0 when absent) and key (ordering, else partition key)."""

def encode_records(entries: Any) -> tuple[bytes, list[int], list[int]]:
    """The message log's records of ``(data, publish_time_ms, num_messages)``: blob, offsets, times."""

def decode_records(ledger_id: int, first: int, data: bytes) -> list[tuple[Position, bytes, int, int]]:
    """The entries of consecutive log records, checked against their CRCs."""

def heap_allocated() -> int:
    """Bytes currently allocated on the Rust heap by this extension (for memory benchmarks)."""

def heap_peak() -> int:
    """Highest ``heap_allocated()`` since the last ``reset_heap_peak()``."""

def reset_heap_peak() -> None:
    """Restarts peak tracking from the current allocation."""

def _guard_selftest() -> None:
    """Panics inside the binding's guard on purpose: raises ``errors.InternalError``."""

def cut_segments(timestamps: Any, max_time_step_ms: int, max_indexes_per_segment: int) -> Int64Array:
    """Exclusive end offsets of the PIP-195 segments cut from sorted deliver-at timestamps."""

def sort_indexes(
    timestamps: Any, ledger_ids: Any, entry_ids: Any
) -> tuple[Int64Array, Int64Array, Int64Array]:
    """Indexes sorted by (timestamp, ledger, entry), each position once with its earliest timestamp."""

def encode_segment(timestamps: Any, ledger_ids: Any, entry_ids: Any) -> bytes:
    """``SnapshotSegment`` bytes for the indexes in the given order, exactly as protobuf writes them."""

def decode_segment(data: bytes | bytearray | memoryview) -> tuple[Int64Array, Int64Array, Int64Array]:
    """``(timestamps, ledger_ids, entry_ids)`` of ``SnapshotSegment`` bytes; damage is CorruptSnapshot."""

def segment_bitmaps(ledger_ids: Any, entry_ids: Any) -> list[tuple[int, bytes]]:
    """Per ledger (ascending), its entry ids as a run-optimised 32-bit roaring portable bitmap."""

def bitmap_cardinality(data: bytes | bytearray | memoryview) -> int:
    """Number of entries in a 32-bit roaring portable bitmap; damage is CorruptSnapshot."""

def sticky_key_hash(key: bytes | bytearray | memoryview | str) -> int:
    """Pulsar's sticky-key hash: Murmur3 x86_32 of the key (str as UTF-8), seed 0, masked to 31 bits."""

def hash_many(keys: Any) -> npt.NDArray[np.uint32]:
    """Sticky-key hashes of a list/tuple/numpy array of bytes/str or an Arrow binary/string (chunked) array.

    Arrow input is read without copying; an Arrow null is InvalidArgument naming its index.
    """

def slots_many(
    hashes: Any, selector_kind: Literal["consistent", "range"], range_size: int | None = None
) -> npt.NDArray[np.uint32]:
    """Slots of sticky-key hashes under a selector's slot function (range_size None: 65536)."""

def slot_for(hash: int, selector_kind: Literal["consistent", "range"], range_size: int | None = None) -> int:
    """The slot of one sticky-key hash under a selector's slot function (range_size None: 65536)."""

_ByConsumer = list[tuple[int, list[tuple[int, int]]]]
_Impact = tuple[_ByConsumer, _ByConsumer]  # (removed, added): per consumer id, ranges lost and gained

@final
class AutoSplitSelectorState:
    """PIP-34's auto-split selector over integer consumer ids (wrapped by keyshared.AutoSplitSelector)."""

    def __new__(cls, range_size: int | None = None) -> AutoSplitSelectorState: ...
    def add_consumer(
        self, consumer_id: int, name: str, ranges: Iterable[tuple[int, int]] | None = None
    ) -> _Impact:
        """Registers consumer `consumer_id` (named `name`) and returns `(removed, added)`."""
    def remove_consumer(self, consumer_id: int) -> _Impact:
        """Unregisters consumer `consumer_id` and returns `(removed, added)`."""
    def select(self, slot: int) -> int | None:
        """The id of the consumer owning `slot`, or None."""
    def select_many(self, slots: Any) -> Int64Array:
        """The owner id of every slot as an int64 array (-1: nobody)."""
    def consumer_key_hash_ranges(self) -> _ByConsumer:
        """`[(id, [(start, end), ...]), ...]`: merged inclusive ranges, by first range."""
    def assignments(self) -> list[tuple[int, int, int]]:
        """The snapshot: `[(start, end, id), ...]` sorted by start."""
    def consumer_ids(self) -> list[int]:
        """The registered ids, ascending."""
    @property
    def key_hash_range(self) -> tuple[int, int]:
        """The slots the selector's hashing produces, `(first, last)`."""
    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: object, /) -> bool: ...
    @property
    def range_size(self) -> int:
        """The size of the hash space."""

@final
class ConsistentHashingSelectorState:
    """Pulsar 4's consistent-hashing selector over integer consumer ids."""

    def __new__(cls, points_per_consumer: int | None = None) -> ConsistentHashingSelectorState: ...
    def add_consumer(
        self, consumer_id: int, name: str, ranges: Iterable[tuple[int, int]] | None = None
    ) -> _Impact:
        """Registers consumer `consumer_id` (named `name`) and returns `(removed, added)`."""
    def remove_consumer(self, consumer_id: int) -> _Impact:
        """Unregisters consumer `consumer_id` and returns `(removed, added)`."""
    def select(self, slot: int) -> int | None:
        """The id of the consumer owning `slot`, or None."""
    def select_many(self, slots: Any) -> Int64Array:
        """The owner id of every slot as an int64 array (-1: nobody)."""
    def consumer_key_hash_ranges(self) -> _ByConsumer:
        """`[(id, [(start, end), ...]), ...]`: merged inclusive ranges, by first range."""
    def assignments(self) -> list[tuple[int, int, int]]:
        """The snapshot: `[(start, end, id), ...]` sorted by start."""
    def consumer_ids(self) -> list[int]:
        """The registered ids, ascending."""
    @property
    def key_hash_range(self) -> tuple[int, int]:
        """The slots the selector's hashing produces, `(first, last)`."""
    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: object, /) -> bool: ...
    @property
    def points_per_consumer(self) -> int:
        """Points each consumer puts on the ring."""
    @staticmethod
    def point(name: str, name_index: int, i: int) -> int:
        """The ring point of index `i` for a consumer name and name index."""
    def points(self, consumer_id: int) -> list[int]:
        """The consumer's points by point index (owned or queued behind a collision)."""
    def name_index(self, consumer_id: int) -> int:
        """The consumer's name index (the lowest unused among consumers of its name)."""
    def owned_points(self, consumer_id: int) -> int:
        """How many ring points the consumer owns (0 when all of its points collided)."""
    def owns_points(self, consumer_id: int) -> bool:
        """Whether the consumer owns any ring point (false when all of its points collided)."""
    def ring_len(self) -> int:
        """Number of distinct points on the ring."""

@final
class ExclusiveRangeSelectorState:
    """The exclusive (STICKY) selector over integer consumer ids: consumer-given ranges."""

    def __new__(cls, range_size: int | None = None) -> ExclusiveRangeSelectorState: ...
    def add_consumer(
        self, consumer_id: int, name: str, ranges: Iterable[tuple[int, int]] | None = None
    ) -> _Impact:
        """Registers consumer `consumer_id` (named `name`) and returns `(removed, added)`."""
    def remove_consumer(self, consumer_id: int) -> _Impact:
        """Unregisters consumer `consumer_id` and returns `(removed, added)`."""
    def select(self, slot: int) -> int | None:
        """The id of the consumer owning `slot`, or None."""
    def select_many(self, slots: Any) -> Int64Array:
        """The owner id of every slot as an int64 array (-1: nobody)."""
    def consumer_key_hash_ranges(self) -> _ByConsumer:
        """`[(id, [(start, end), ...]), ...]`: merged inclusive ranges, by first range."""
    def assignments(self) -> list[tuple[int, int, int]]:
        """The snapshot: `[(start, end, id), ...]` sorted by start."""
    def consumer_ids(self) -> list[int]:
        """The registered ids, ascending."""
    @property
    def key_hash_range(self) -> tuple[int, int]:
        """The slots the selector's hashing produces, `(first, last)`."""
    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: object, /) -> bool: ...
    @property
    def range_size(self) -> int:
        """The modulus applied to hashes."""
    def ranges_of(self, consumer_id: int) -> list[tuple[int, int]]:
        """The ranges the consumer registered, sorted by start."""
    def conflicting_consumer(self, ranges: Iterable[tuple[int, int]]) -> tuple[int, tuple[int, int]] | None:
        """`(id, (start, end))` of the first holder overlapping `ranges`, or None."""
