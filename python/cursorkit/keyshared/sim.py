"""``Simulation``: a deterministic Key_Shared world for testing dispatch (producers, consumers, broker).

Seeded producers publish keyed messages (uniform or Zipf keys); the broker loop reads entries when
the dispatcher allows, dispatches, and consumers receive, ack (after a delay, or never while stalled),
nack and leave. An ``OrderingChecker`` watches every delivery and ack. Scenarios are short text
scripts (``Simulation.run_script``), one command per line:

    publish 1000            # messages with keys from the distribution
    join c1 1000            # consumer c1 with 1000 permits (refilled as it acks)
    step 5                  # 5 broker rounds
    stall c1 / resume c1    # stop / restart acking
    nack c1 3               # c1 negatively acks its 3 oldest unacked messages
    leave c1                # disconnect: its unacked messages are redelivered
    drain                   # run until everything published is acked
"""

from __future__ import annotations

import shlex
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from cursorkit._core import Position
from cursorkit.errors import InvalidArgument
from cursorkit.keyshared.dispatcher import KeySharedDispatcher


@dataclass(eq=False)
class SimConsumer:
    """A simulated consumer: acks what it received ``ack_delay`` rounds later unless stalled."""

    name: str
    permits: int = 1000
    ack_delay: int = 0
    stalled: bool = False
    inbox: deque[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = field(default_factory=deque)
    """(round received, ledger ids, entry ids) not yet acked, a batch per delivery."""

    def unacked(self) -> list[Position]:
        """Everything received and not acked, oldest first."""
        return [
            Position(ledger, entry)
            for _, ls, es in self.inbox
            for ledger, entry in zip(ls.tolist(), es.tolist(), strict=True)
        ]


@dataclass(slots=True)
class OrderingChecker:
    """Per-key ordering rules, checked on every event; ``violations`` lists what broke."""

    single_owner: bool = True
    """Check that a key's unacked messages are never on two consumers at once (draining mode)."""
    violations: list[str] = field(default_factory=list)
    holders: dict[bytes, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    max_acked: dict[bytes, Position] = field(default_factory=dict)
    last_to: dict[tuple[str, bytes], Position] = field(default_factory=dict)
    acked: set[Position] = field(default_factory=set)
    deliveries: int = 0
    redeliveries: int = 0
    nacked: set[Position] = field(default_factory=set)

    def delivered(self, consumer: str, key: bytes, pos: Position) -> None:
        """One delivery of ``pos`` (key ``key``) to ``consumer``."""
        self.deliveries += 1
        if pos in self.acked:
            self.violations.append(f"{pos} delivered to {consumer} after it was acked")
        top = self.max_acked.get(key)
        if top is not None and pos < top and pos not in self.nacked:
            self.violations.append(f"key {key!r}: {pos} delivered to {consumer} after {top} was acked")
        prev = self.last_to.get((consumer, key))
        if prev is not None and pos <= prev and pos not in self.nacked:
            self.violations.append(f"key {key!r}: {consumer} got {pos} after {prev}")
        self.last_to[(consumer, key)] = pos
        held = self.holders[key]
        held[consumer] = held.get(consumer, 0) + 1
        if self.single_owner and len(held) > 1:
            self.violations.append(f"key {key!r} has unacked messages on {sorted(held)} at {pos}")

    def released(self, consumer: str, key: bytes, pos: Position, *, acked: bool) -> None:
        """A message left ``consumer``: acked, or (not acked) nacked or returned on disconnect."""
        held = self.holders[key]
        left = held.get(consumer, 0) - 1
        if left > 0:
            held[consumer] = left
        else:
            held.pop(consumer, None)
        if acked:
            self.acked.add(pos)
            if key not in self.max_acked or pos > self.max_acked[key]:
                self.max_acked[key] = pos
        else:
            self.redeliveries += 1


class Simulation:
    """A seeded Key_Shared scenario around one ``KeySharedDispatcher``.

    The topic is kept as columns (ledger ids, entry ids, slots, key indexes), and the broker loop
    moves columns between the dispatcher and the consumers, so a throughput run makes no object per
    message; ``log`` and ``key_of`` build the per-message views on demand (tests, the checker).
    """

    def __init__(
        self,
        dispatcher: KeySharedDispatcher,
        *,
        seed: int = 0,
        keys: int = 1000,
        distribution: str = "uniform",
        zipf_s: float = 1.2,
        ledger_size: int = 10_000,
        read_batch: int = 100,
        check: bool = True,
    ) -> None:
        if distribution not in ("uniform", "zipf"):
            raise InvalidArgument(f"distribution must be 'uniform' or 'zipf', got {distribution!r}")
        if keys < 1 or ledger_size < 1 or read_batch < 1:
            raise InvalidArgument("keys, ledger_size and read_batch must be positive")
        self.dispatcher = dispatcher
        self.rng = np.random.default_rng(seed)
        self.key_names = [f"key-{i}".encode() for i in range(keys)]
        self.key_slots = [dispatcher.slot_of(k) for k in self.key_names]
        self.key_slot_array = np.asarray(self.key_slots, dtype=np.int64)
        self._topic = np.empty((4, 1024), dtype=np.int64)
        """Published messages in order (the topic as the broker reads it): rows of ledger ids, entry
        ids, slots and key indexes, with room to grow (doubling); ``_published`` columns are used."""
        self._published = 0
        self.distribution = distribution
        self.zipf_s = zipf_s
        self.ledger_size = ledger_size
        self.read_batch = read_batch
        self.read_upto = 0
        self.reread_until = 0
        """Read index before the last rewind: entries below it may have been acked already."""
        self.round = 0
        self.consumers: dict[str, SimConsumer] = {}
        self.checker = OrderingChecker(single_owner=dispatcher.mode == "draining")
        self.check = check
        """False: skip the ordering checker (throughput runs); only acks are counted."""
        self.acked_count = 0

    @property
    def ledgers(self) -> npt.NDArray[np.int64]:
        """Ledger id of every published message, in order."""
        return self._topic[0, : self._published]

    @property
    def entries(self) -> npt.NDArray[np.int64]:
        """Entry id of every published message."""
        return self._topic[1, : self._published]

    @property
    def slots(self) -> npt.NDArray[np.int64]:
        """Selector slot of every published message."""
        return self._topic[2, : self._published]

    @property
    def keys(self) -> npt.NDArray[np.int64]:
        """Key index of every published message."""
        return self._topic[3, : self._published]

    @property
    def log(self) -> list[tuple[Position, int]]:
        """Published (position, key index), in publish order."""
        return list(
            zip(map(Position, self.ledgers.tolist(), self.entries.tolist()), self.keys.tolist(), strict=True)
        )

    @property
    def key_of(self) -> dict[Position, int]:
        """Key index of every published position."""
        return dict(self.log)

    def _index(self, ledger: int, entry: int) -> int:
        """Publish index of a position (positions are numbered densely, ``ledger_size`` a ledger)."""
        return (ledger - 1) * self.ledger_size + entry

    def _key(self, pos: Position) -> bytes:
        return self.key_names[int(self.keys[self._index(pos.ledger_id, pos.entry_id)])]

    # --- producers -------------------------------------------------------------------------------

    def draw_keys(self, n: int) -> npt.NDArray[np.int64]:
        """Key indexes of ``n`` messages drawn from the distribution (the producers' side)."""
        if self.distribution == "uniform":
            return self.rng.integers(0, len(self.key_names), size=n).astype(np.int64)
        ranks = self.rng.zipf(self.zipf_s, size=n) - 1
        return (ranks % len(self.key_names)).astype(np.int64)

    def publish(self, n: int, key: bytes | None = None) -> None:
        """Publishes ``n`` messages: with ``key``, or keys drawn from the distribution."""
        if key is not None:
            k = self.key_names.index(key) if key in self.key_names else self._new_key(key)
            self.publish_keys(np.full(n, k, dtype=np.int64))
        else:
            self.publish_keys(self.draw_keys(n))

    def reserve(self, n: int) -> None:
        """Makes room for ``n`` more messages now (a throughput run keeps allocation off the clock)."""
        need = self._published + n
        if need > self._topic.shape[1]:
            grown = np.full((4, max(2 * self._topic.shape[1], need)), -1, dtype=np.int64)  # touched now
            grown[:, : self._published] = self._topic[:, : self._published]
            self._topic = grown

    def publish_keys(self, keys: npt.NDArray[np.int64]) -> None:
        """Publishes one message per key index of ``keys`` (drawn beforehand, e.g. by ``draw_keys``)."""
        first, n = self._published, len(keys)
        self.reserve(n)
        rows = self._topic[:, first : first + n]
        ledger, entry = divmod(first, self.ledger_size)
        if entry + n <= self.ledger_size:  # within one ledger: no per-message division
            rows[0].fill(ledger + 1)
            rows[1] = np.arange(entry, entry + n, dtype=np.int64)
        else:
            seq = np.arange(first, first + n, dtype=np.int64)
            np.floor_divide(seq, self.ledger_size, out=rows[0])
            rows[0] += 1
            np.remainder(seq, self.ledger_size, out=rows[1])
        np.take(self.key_slot_array, keys, out=rows[2])
        rows[3] = keys
        self._published = first + n

    def _new_key(self, key: bytes) -> int:
        self.key_names.append(key)
        self.key_slots.append(self.dispatcher.slot_of(key))
        self.key_slot_array = np.asarray(self.key_slots, dtype=np.int64)
        return len(self.key_names) - 1

    # --- consumers -------------------------------------------------------------------------------

    def join(self, name: str, permits: int = 1000, *, ack_delay: int = 0) -> SimConsumer:
        """A consumer connects with ``permits``."""
        if name in self.consumers:
            raise InvalidArgument(f"consumer {name!r} already joined")
        c = SimConsumer(name, permits=permits, ack_delay=ack_delay)
        self.consumers[name] = c
        self.dispatcher.add_consumer(c, permits)
        return c

    def leave(self, name: str) -> None:
        """A consumer disconnects; what it had not acked is redelivered to others."""
        c = self._consumer(name)
        if self.check:
            for pos in c.unacked():
                self.checker.released(name, self._key(pos), pos, acked=False)
        self.dispatcher.remove_consumer(c)
        del self.consumers[name]

    def nack(self, name: str, n: int) -> None:
        """``name`` negatively acks its ``n`` oldest unacked messages."""
        c = self._consumer(name)
        victims: list[Position] = []
        while c.inbox and len(victims) < n:  # the oldest first; the rest keep their receive round
            received, ls, es = c.inbox[0]
            take = n - len(victims)
            victims.extend(map(Position, ls[:take].tolist(), es[:take].tolist()))
            if take >= len(ls):
                c.inbox.popleft()
            else:
                c.inbox[0] = (received, ls[take:], es[take:])
        for pos in victims:
            self.checker.nacked.add(pos)
            self.checker.released(name, self._key(pos), pos, acked=False)
        self.dispatcher.nack(c, victims)

    def _consumer(self, name: str) -> SimConsumer:
        try:
            return self.consumers[name]
        except KeyError:
            raise InvalidArgument(f"no consumer {name!r} in the simulation") from None

    # --- the broker loop ---------------------------------------------------------------------------

    def step(self) -> int:
        """One round: read if allowed, dispatch, deliver, ack. Returns messages delivered."""
        self.round += 1
        d = self.dispatcher
        rewind = d.take_rewind()
        if rewind is not None:  # the last consumer left: read again after mark-delete, as Pulsar does
            self.reread_until = max(self.reread_until, self.read_upto)
            after = self._index(rewind.ledger_id, rewind.entry_id) + 1
            self.read_upto = min(max(after, 0), self.read_upto)
        total = len(self.keys)
        if self.read_upto < total and d.should_read():
            start = self.read_upto
            end = min(start + self.read_batch, total)
            ls, es, slots = self.ledgers[start:end], self.entries[start:end], self.slots[start:end]
            self.read_upto = end
            if start < self.reread_until:  # a re-read after a rewind skips what is acked, as a cursor does
                keep = ~d.cursor.is_acked_many(ls, es)
                if not keep.all():
                    ls, es, slots = ls[keep], es[keep], slots[keep]
            if len(ls):
                d.add_read_columns(ls, es, slots)
        sent = 0
        check, rnd = self.check, self.round
        for consumer, ls, es in d.dispatch_columns():
            if check:
                for pos in map(Position, ls.tolist(), es.tolist()):
                    self.checker.delivered(consumer.name, self._key(pos), pos)
            consumer.inbox.append((rnd, ls, es))
            sent += len(ls)
        for c in self.consumers.values():
            inbox = c.inbox
            if c.stalled or not inbox or inbox[0][0] + c.ack_delay > rnd:
                continue
            done: list[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = []
            while inbox and inbox[0][0] + c.ack_delay <= rnd:
                done.append(inbox.popleft())
            if len(done) == 1:
                ls, es = done[0][1], done[0][2]
            else:
                ls = np.concatenate([b[1] for b in done])
                es = np.concatenate([b[2] for b in done])
            if check:
                for pos in map(Position, ls.tolist(), es.tolist()):
                    self.checker.released(c.name, self._key(pos), pos, acked=True)
            d.ack_columns(c, ls, es)
            self.acked_count += len(ls)
            d.add_permits(c, len(ls))
        return sent

    def drain(self, max_rounds: int = 1_000_000) -> None:
        """Rounds until every published message is acked (or ``max_rounds`` pass: an error)."""
        for _ in range(max_rounds):
            settled = self.acked_count >= len(self.keys) and not any(c.inbox for c in self.consumers.values())
            if settled and (not self.check or len(self.checker.acked) == len(self.keys)):
                return
            self.step()
        raise InvalidArgument(
            f"not drained after {max_rounds} rounds: {self.acked_count} of {len(self.keys)} acked"
        )

    def run_script(self, script: str) -> None:
        """Runs a scenario script (see the module docstring)."""
        for raw in script.strip().splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            cmd, *args = shlex.split(line)
            self._command(cmd, args)

    def _command(self, cmd: str, args: list[str]) -> None:
        handlers: dict[str, Any] = {
            "publish": lambda: self.publish(int(args[0]), args[1].encode() if len(args) > 1 else None),
            "join": lambda: self.join(args[0], int(args[1]) if len(args) > 1 else 1000),
            "leave": lambda: self.leave(args[0]),
            "stall": lambda: setattr(self._consumer(args[0]), "stalled", True),
            "resume": lambda: setattr(self._consumer(args[0]), "stalled", False),
            "nack": lambda: self.nack(args[0], int(args[1])),
            "step": lambda: [self.step() for _ in range(int(args[0]) if args else 1)],
            "drain": lambda: self.drain(),
        }
        if cmd not in handlers:
            raise InvalidArgument(f"unknown scenario command {cmd!r}")
        handlers[cmd]()
