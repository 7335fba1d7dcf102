"""A tiny, obviously-correct pure-Python reference model of ``cursorkit.RangeSet``.

It follows the semantics contract (open-closed ranges, Pulsar's cross-ledger rules, BitSet word
layout, protobuf wire sizes).  Each ledger holds a sorted list of disjoint closed runs
``(first, last)`` instead of a set of entries, because entry ids go up to 2^32 - 1 and a
cross-ledger add fills ``0..uv``; apart from that representation every operation is the naive one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MAX_LEDGER = 2**63 - 1
MAX_ENTRY = 2**32 - 1
JAVA_INT_MAX = 2**31 - 1  # Pulsar's Integer.MAX_VALUE sentinel

Run = tuple[int, int]  # closed run of entries [first, last]
Range = tuple[int, int, int, int]  # open-closed (lk, lv, uk, uv)


def _normalize(runs: Iterable[Run]) -> list[Run]:
    """Sort runs and merge the ones that overlap or touch."""
    out: list[list[int]] = []
    for a, b in sorted(runs):
        if a > b:
            continue
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _union(runs: list[Run], first: int, last: int) -> list[Run]:
    """Runs with the entries first..last added."""
    return _normalize([*runs, (first, last)])


def _subtract(runs: list[Run], first: int, last: int) -> list[Run]:
    """Runs with the entries first..last removed."""
    out: list[Run] = []
    for a, b in runs:
        if b < first or a > last:
            out.append((a, b))
            continue
        if a < first:
            out.append((a, first - 1))
        if b > last:
            out.append((last + 1, b))
    return out


def _check_ledger(ledger: int) -> None:
    if not 0 <= ledger <= MAX_LEDGER:
        raise ValueError(f"ledger id {ledger} out of range")


def _check_entry(entry: int, *, allow_open: bool) -> None:
    low = -1 if allow_open else 0
    if not low <= entry <= MAX_ENTRY:
        raise ValueError(f"entry id {entry} out of range")


def to_signed64(word: int) -> int:
    """Reinterpret an unsigned 64-bit word as a Java long."""
    return word - 2**64 if word >= 2**63 else word


def encode_varint(value: int) -> bytes:
    """Protobuf varint of an int64 (negative values are sign-extended to 64 bits: 10 bytes)."""
    if value < 0:
        value += 2**64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_tag(field: int, wire_type: int) -> bytes:
    """Protobuf key byte(s) for a field number and wire type."""
    return encode_varint((field << 3) | wire_type)


def encode_len_delimited(field: int, body: bytes) -> bytes:
    """A length-delimited protobuf field: tag, length varint, body."""
    return encode_tag(field, 2) + encode_varint(len(body)) + body


def encode_nested_position(ledger: int, entry: int) -> bytes:
    """NestedPositionInfo{1: ledgerId, 2: entryId} body (both int64, proto2 required)."""
    return encode_tag(1, 0) + encode_varint(ledger) + encode_tag(2, 0) + encode_varint(entry)


def encode_message_ranges(rows: Iterable[Range]) -> bytes:
    """Repeated PositionInfo field 3: MessageRange{1: lower, 2: upper} per open-closed range."""
    out = bytearray()
    for lk, lv, uk, uv in rows:
        body = encode_len_delimited(1, encode_nested_position(lk, lv)) + encode_len_delimited(
            2, encode_nested_position(uk, uv)
        )
        out += encode_len_delimited(3, body)
    return bytes(out)


def encode_long_list_maps(words: Mapping[int, Iterable[int]]) -> bytes:
    """Repeated PositionInfo field 6: LongListMap{1: key, 2: repeated int64 values (unpacked)}."""
    out = bytearray()
    for key in sorted(words):
        body = bytearray(encode_tag(1, 0) + encode_varint(key))
        for word in words[key]:
            body += encode_tag(2, 0) + encode_varint(int(word))
        out += encode_len_delimited(6, bytes(body))
    return bytes(out)


def runs_to_words(runs: list[Run]) -> list[int]:
    """java.util.BitSet.toLongArray of the runs' entries, as signed int64 words."""
    if not runs:
        return []
    words = [0] * (runs[-1][1] // 64 + 1)
    for a, b in runs:
        for entry in range(a, b + 1):
            words[entry // 64] |= 1 << (entry % 64)
    return [to_signed64(w) for w in words]


def words_to_runs(words: Iterable[int]) -> list[Run]:
    """Inverse of runs_to_words."""
    entries: list[Run] = []
    for j, word in enumerate(words):
        unsigned = int(word) % 2**64
        entries.extend((64 * j + i, 64 * j + i) for i in range(64) if unsigned >> i & 1)
    return _normalize(entries)


class ModelRangeSet:
    """Reference model: ``ledgers`` maps a ledger id to its non-empty sorted closed runs."""

    def __init__(self, pulsar_quirks: bool = False) -> None:
        self.pulsar_quirks = pulsar_quirks
        self.ledgers: dict[int, list[Run]] = {}
        # pulsar_quirks only: ledgers recorded as present by an empty same-ledger add.
        self.empty_ledgers: set[int] = set()
        self.dirty: set[int] = set()

    # -- internal -------------------------------------------------------------------------------

    def _runs(self, ledger: int) -> list[Run]:
        return self.ledgers.get(ledger, [])

    def _store(self, ledger: int, runs: list[Run]) -> None:
        if runs != self._runs(ledger):
            self.dirty.add(ledger)
        if runs:
            self.ledgers[ledger] = runs
            self.empty_ledgers.discard(ledger)
        else:
            self.ledgers.pop(ledger, None)

    def _add_run(self, ledger: int, first: int, last: int) -> None:
        if first <= last:
            self._store(ledger, _union(self._runs(ledger), first, last))

    def _remove_run(self, ledger: int, first: int, last: int) -> None:
        if first <= last:
            self._store(ledger, _subtract(self._runs(ledger), first, last))

    def _drop(self, ledger: int) -> None:
        self._store(ledger, [])

    def _sentinel(self, entry: int) -> bool:
        return self.pulsar_quirks and entry == JAVA_INT_MAX

    # -- mutations ------------------------------------------------------------------------------

    def add(self, ledger: int, entry: int) -> bool:
        """Add one position; True if it was new."""
        _check_ledger(ledger)
        _check_entry(entry, allow_open=False)
        if self.contains(ledger, entry):
            return False
        self._add_run(ledger, entry, entry)
        return True

    def add_many(self, ledgers: Iterable[int], entries: Iterable[int]) -> int:
        """Add many positions; the number of distinct new ones."""
        pairs = list(zip(ledgers, entries, strict=True))
        for ledger, entry in pairs:
            _check_ledger(ledger)
            _check_entry(entry, allow_open=False)
        return sum(self.add(ledger, entry) for ledger, entry in sorted(set(pairs)))

    def remove(self, ledger: int, entry: int) -> bool:
        """Remove one position; True if it was present."""
        _check_ledger(ledger)
        _check_entry(entry, allow_open=False)
        if not self.contains(ledger, entry):
            return False
        self._remove_run(ledger, entry, entry)
        return True

    def add_open_closed(
        self,
        lk: int,
        lv: int,
        uk: int,
        uv: int,
        ledger_sizes: Mapping[int, int] | None = None,
    ) -> None:
        """Pulsar's addOpenClosed, or the ledger_sizes variant for cross-ledger ranges."""
        for ledger in (lk, uk):
            _check_ledger(ledger)
        for entry in (lv, uv):
            _check_entry(entry, allow_open=True)
        if lk > uk:
            return
        if lk == uk:
            if uv <= lv:
                if self.pulsar_quirks and lk not in self.ledgers:
                    self.empty_ledgers.add(lk)
                return
            self._add_run(lk, lv + 1, uv)
            return
        if ledger_sizes is None:
            runs = self._runs(lk)
            if runs and runs[-1][1] > lv and not self._sentinel(lv + 1):
                self._add_run(lk, lv + 1, runs[-1][1])
        else:
            size = ledger_sizes.get(lk)
            if size is not None and not self._sentinel(lv + 1):
                self._add_run(lk, lv + 1, size - 1)
            for ledger in sorted(ledger_sizes):
                if lk < ledger < uk:
                    self._add_run(ledger, 0, ledger_sizes[ledger] - 1)
        if uv >= 0 and not self._sentinel(uv):
            self._add_run(uk, 0, uv)

    def add_ranges(self, rows: Iterable[Range], ledger_sizes: Mapping[int, int] | None = None) -> None:
        """add_open_closed for each (lk, lv, uk, uv) row."""
        for lk, lv, uk, uv in rows:
            self.add_open_closed(lk, lv, uk, uv, ledger_sizes)

    def remove_at_most(self, ledger: int, entry: int) -> None:
        """Remove every position <= (ledger, entry)."""
        _check_ledger(ledger)
        _check_entry(entry, allow_open=True)
        for other in sorted(self.ledgers):
            if other < ledger:
                self._drop(other)
        self._remove_run(ledger, 0, entry)
        # Pulsar's remove walks every bitmap and drops the empty ones.
        self.empty_ledgers.clear()

    def remove_open_closed(self, lk: int, lv: int, uk: int, uv: int) -> None:
        """Remove positions p with (lk, lv) < p <= (uk, uv); quirk keeps the lower ledger's top entry."""
        for ledger in (lk, uk):
            _check_ledger(ledger)
        for entry in (lv, uv):
            _check_entry(entry, allow_open=True)
        if (lk, lv) >= (uk, uv):
            return
        # Pulsar's remove walks every bitmap and drops the empty ones.
        self.empty_ledgers.clear()
        if lk == uk:
            self._remove_run(lk, lv + 1, uv)
            return
        runs = self._runs(lk)
        if runs:
            end = runs[-1][1] - 1 if self.pulsar_quirks else MAX_ENTRY
            self._remove_run(lk, lv + 1, end)
        for ledger in sorted(self.ledgers):
            if lk < ledger < uk:
                self._drop(ledger)
        self._remove_run(uk, 0, uv)

    def clear(self) -> None:
        """Drop everything (the dropped ledgers become dirty)."""
        for ledger in list(self.ledgers):
            self._drop(ledger)
        self.empty_ledgers.clear()

    def clear_dirty(self) -> None:
        """Forget which ledgers changed."""
        self.dirty.clear()

    # -- queries --------------------------------------------------------------------------------

    def contains(self, ledger: int, entry: int) -> bool:
        """Membership; entry -1 is never a member."""
        return any(a <= entry <= b for a, b in self._runs(ledger))

    def range_containing(self, ledger: int, entry: int) -> tuple[int, int, int, int] | None:
        """The CLOSED run containing the entry as (L, first, L, last), or None."""
        for a, b in self._runs(ledger):
            if a <= entry <= b:
                return (ledger, a, ledger, b)
        return None

    def ranges(self) -> list[Range]:
        """All runs as open-closed (L, first-1, L, last) rows, ascending."""
        return [
            (ledger, a - 1, ledger, b) for ledger in sorted(self.ledgers) for a, b in self.ledgers[ledger]
        ]

    def first_range(self) -> Range | None:
        """First run of the first ledger."""
        rows = self.ranges()
        return rows[0] if rows else None

    def last_range(self) -> Range | None:
        """Last run of the last ledger."""
        rows = self.ranges()
        return rows[-1] if rows else None

    def span(self) -> Range | None:
        """(first ledger, first entry - 1, last ledger, last entry)."""
        rows = self.ranges()
        if not rows:
            return None
        return (rows[0][0], rows[0][1], rows[-1][2], rows[-1][3])

    def __len__(self) -> int:
        return len(self.ranges())

    def is_empty(self) -> bool:
        """No entries at all."""
        return not self.ledgers

    def ledger_ids(self) -> list[int]:
        """Sorted ledgers holding at least one entry."""
        return sorted(self.ledgers)

    def total_cardinality(self) -> int:
        """Number of entries."""
        return sum(b - a + 1 for runs in self.ledgers.values() for a, b in runs)

    def cardinality(self, lk: int, lv: int, uk: int, uv: int) -> int:
        """Entries p with (lk, lv) <= p <= (uk, uv), inclusive at both ends."""
        total = 0
        for ledger, runs in self.ledgers.items():
            if not lk <= ledger <= uk:
                continue
            low = lv if ledger == lk else 0
            high = uv if ledger == uk else MAX_ENTRY
            for a, b in runs:
                total += max(0, min(b, high) - max(a, low) + 1)
        return total

    def entries(self) -> set[tuple[int, int]]:
        """Every position as a set (only for small models)."""
        return {
            (ledger, entry)
            for ledger, runs in self.ledgers.items()
            for a, b in runs
            for entry in range(a, b + 1)
        }

    def max_entry(self) -> int:
        """Highest entry id of any ledger, -1 if empty."""
        return max((runs[-1][1] for runs in self.ledgers.values()), default=-1)

    def __str__(self) -> str:
        return "[" + ",".join(f"({lk}:{lv}..{uk}:{uv}]" for lk, lv, uk, uv in self.ranges()) + "]"

    # -- persistence ----------------------------------------------------------------------------

    def to_long_list_map(self, max_entries: int | None = None) -> dict[int, list[int]]:
        """BitSet words per ledger, truncated by whole ledgers on the running entry count."""
        present = set(self.ledgers)
        if self.pulsar_quirks:
            present |= self.empty_ledgers
        out: dict[int, list[int]] = {}
        running = 0
        for ledger in sorted(present):
            runs = self._runs(ledger)
            count = sum(b - a + 1 for a, b in runs)
            before = running
            running += count
            if max_entries is not None:
                if self.pulsar_quirks and before > max_entries:
                    continue
                if not self.pulsar_quirks and running > max_entries:
                    continue
            out[ledger] = runs_to_words(runs)
        return out

    @classmethod
    def from_positions(
        cls, positions: Iterable[tuple[int, int]], pulsar_quirks: bool = False
    ) -> ModelRangeSet:
        """A model holding exactly the given (ledger, entry) positions."""
        by_ledger: dict[int, list[Run]] = {}
        for ledger, entry in positions:
            _check_ledger(ledger)
            _check_entry(entry, allow_open=False)
            by_ledger.setdefault(ledger, []).append((entry, entry))
        model = cls(pulsar_quirks)
        model.ledgers = {ledger: _normalize(runs) for ledger, runs in by_ledger.items()}
        return model

    @classmethod
    def from_long_list_map(
        cls, words: Mapping[int, Iterable[int]], pulsar_quirks: bool = False
    ) -> ModelRangeSet:
        """Inverse of to_long_list_map."""
        model = cls(pulsar_quirks)
        for ledger, ledger_words in words.items():
            runs = words_to_runs(ledger_words)
            if runs:
                model.ledgers[ledger] = runs
            elif pulsar_quirks:
                model.empty_ledgers.add(ledger)
        return model

    def message_range_bytes(self, max_ranges: int | None = None) -> bytes:
        """Encoded repeated MessageRange field for the first max_ranges ranges."""
        rows = self.ranges()
        return encode_message_ranges(rows if max_ranges is None else rows[:max_ranges])

    def message_range_wire_size(self, max_ranges: int | None = None) -> int:
        """Exact bytes of message_range_bytes."""
        return len(self.message_range_bytes(max_ranges))

    def long_list_map_wire_size(self, max_entries: int | None = None) -> int:
        """Exact bytes of the repeated LongListMap field for to_long_list_map(max_entries)."""
        return len(encode_long_list_maps(self.to_long_list_map(max_entries)))
