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

import bisect
import shlex
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cursorkit._core import Position
from cursorkit.errors import InvalidArgument
from cursorkit.keyshared.dispatcher import KeySharedDispatcher, acked_mask


@dataclass(eq=False)
class SimConsumer:
    """A simulated consumer: acks what it received ``ack_delay`` rounds later unless stalled."""

    name: str
    permits: int = 1000
    ack_delay: int = 0
    stalled: bool = False
    inbox: deque[tuple[int, list[Position]]] = field(default_factory=deque)
    """(round received, positions) not yet acked, a batch per delivery."""

    def unacked(self) -> list[Position]:
        """Everything received and not acked, oldest first."""
        return [p for _, batch in self.inbox for p in batch]


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
    """A seeded Key_Shared scenario around one ``KeySharedDispatcher``."""

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
        self.positions: list[Position] = []
        """Published positions in order (the topic as the broker reads it), with ``slots`` beside."""
        self.slots = np.empty(0, dtype=np.int64)
        self.distribution = distribution
        self.zipf_s = zipf_s
        self.ledger_size = ledger_size
        self.read_batch = read_batch
        self.log: list[tuple[Position, int]] = []
        """Published (position, key index), in publish order."""
        self.key_of: dict[Position, int] = {}
        self.read_upto = 0
        self.reread_until = 0
        """Read index before the last rewind: entries below it may have been acked already."""
        self.round = 0
        self.consumers: dict[str, SimConsumer] = {}
        self.checker = OrderingChecker(single_owner=dispatcher.mode == "draining")
        self.check = check
        """False: skip the ordering checker (throughput runs); only acks are counted."""
        self.acked_count = 0

    # --- producers -------------------------------------------------------------------------------

    def publish(self, n: int, key: bytes | None = None) -> None:
        """Publishes ``n`` messages: with ``key``, or keys drawn from the distribution."""
        if key is not None:
            idx = [self.key_names.index(key)] * n if key in self.key_names else self._new_key(key, n)
        elif self.distribution == "uniform":
            idx = self.rng.integers(0, len(self.key_names), size=n).tolist()
        else:
            ranks = self.rng.zipf(self.zipf_s, size=n) - 1
            idx = (ranks % len(self.key_names)).tolist()
        first, size = len(self.log), self.ledger_size
        positions = [Position(s // size + 1, s % size) for s in range(first, first + len(idx))]
        keys = [int(k) for k in idx]
        self.log.extend(zip(positions, keys, strict=True))
        self.key_of.update(zip(positions, keys, strict=True))
        self.positions.extend(positions)
        self.slots = np.concatenate([self.slots, self.key_slot_array[np.asarray(keys, dtype=np.int64)]])

    def _new_key(self, key: bytes, n: int) -> list[int]:
        self.key_names.append(key)
        self.key_slots.append(self.dispatcher.slot_of(key))
        self.key_slot_array = np.asarray(self.key_slots, dtype=np.int64)
        return [len(self.key_names) - 1] * n

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
        for pos in c.unacked():
            self.checker.released(name, self.key_names[self.key_of[pos]], pos, acked=False)
        self.dispatcher.remove_consumer(c)
        del self.consumers[name]

    def nack(self, name: str, n: int) -> None:
        """``name`` negatively acks its ``n`` oldest unacked messages."""
        c = self._consumer(name)
        victims: list[Position] = []
        while c.inbox and len(victims) < n:  # the oldest first; the rest keep their receive round
            received, batch = c.inbox[0]
            take = n - len(victims)
            victims.extend(batch[:take])
            if take >= len(batch):
                c.inbox.popleft()
            else:
                c.inbox[0] = (received, batch[take:])
        for pos in victims:
            self.checker.nacked.add(pos)
            self.checker.released(name, self.key_names[self.key_of[pos]], pos, acked=False)
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
            self.read_upto = bisect.bisect_right(self.positions, rewind)
        if self.read_upto < len(self.log) and d.should_read():
            start, end = self.read_upto, min(self.read_upto + self.read_batch, len(self.log))
            part, slots = self.positions[start:end], self.slots[start:end]
            self.read_upto = end
            if start < self.reread_until:  # a re-read after a rewind skips what is acked, as a cursor does
                keep = ~acked_mask(d.cursor, part)
                if not keep.all():
                    part = [p for p, k in zip(part, keep.tolist(), strict=True) if k]
                    slots = slots[keep]
            if part:
                d.add_read(part, slots)
        sent = 0
        for consumer, positions in d.dispatch():
            if self.check:
                for pos in positions:
                    self.checker.delivered(consumer.name, self.key_names[self.key_of[pos]], pos)
            consumer.inbox.append((self.round, positions))
            sent += len(positions)
        for c in list(self.consumers.values()):
            done: list[Position] = []
            while not c.stalled and c.inbox and c.inbox[0][0] + c.ack_delay <= self.round:
                batch = c.inbox.popleft()[1]
                if self.check:
                    for pos in batch:
                        self.checker.released(c.name, self.key_names[self.key_of[pos]], pos, acked=True)
                done.extend(batch)
            if done:
                d.ack_many(c, done)
                self.acked_count += len(done)
                d.add_permits(c, len(done))
        return sent

    def drain(self, max_rounds: int = 1_000_000) -> None:
        """Rounds until every published message is acked (or ``max_rounds`` pass: an error)."""
        for _ in range(max_rounds):
            settled = self.acked_count >= len(self.log) and not any(c.inbox for c in self.consumers.values())
            if settled and (not self.check or len(self.checker.acked) == len(self.log)):
                return
            self.step()
        raise InvalidArgument(
            f"not drained after {max_rounds} rounds: {self.acked_count} of {len(self.log)} acked"
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
