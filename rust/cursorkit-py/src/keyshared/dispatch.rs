//! `cursorkit._core.DispatchCore`: the core Key_Shared dispatch loop behind a mutex.
//!
//! Calls that touch the cursor take a `CursorState` (a `cursorkit.Cursor`) and lock it after the
//! dispatcher, always in that order. Positions cross as int64 columns; a dispatch returns
//! `(consumer id, ledgers, entries)` per consumer, each array handed over without a copy. Work over
//! many entries runs with the GIL released.

use std::sync::Mutex;

use cursorkit_core::{
    AckOutcome, BlockReason, CoreError, Cursor, DispatchCore, DispatchMode, HashRange, Position,
};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::ackstate::cursor::with_cursor;
use crate::ackstate::dispatch_counts::{
    positions as positions_of, seeds, take_raised, RaisedColumns,
};
use crate::ackstate::position::{position_arg, PyPosition};
use crate::ackstate::rangeset::columns;
use crate::args::{bool_arg, column, int_arg, str_arg, u32_arg};
use crate::errors::{to_py, InvalidArgument, InvalidInputType};
use crate::keyshared::draining::{draining_rows, rows_array};
use crate::sync::Shared;

/// Calls over at most this many entries run with the GIL held (cheaper than releasing it).
const SMALL: usize = 256;

/// Ack outcome as `(acked, from_other_consumer, not_pending, duplicates, unblocked, parked,
/// stale)`.
type Outcome = (u64, u64, u64, u64, u64, u64, u64);

fn outcome(o: AckOutcome) -> Outcome {
    (
        o.acked,
        o.from_other_consumer,
        o.not_pending,
        o.duplicates,
        o.unblocked,
        o.parked,
        o.stale,
    )
}

/// A Key_Shared subscription's dispatch state (see `cursorkit_core::DispatchCore`).
#[pyclass(name = "DispatchCore", module = "cursorkit._core", frozen)]
pub struct PyDispatchCore {
    inner: Mutex<DispatchCore>,
}

crate::shared!(PyDispatchCore, DispatchCore, "DispatchCore");

impl PyDispatchCore {
    /// An empty subscription in `mode` (for `KeySharedBase`, which owns one).
    pub fn with_mode(mode: DispatchMode) -> Self {
        Self {
            inner: Mutex::new(DispatchCore::new(mode)),
        }
    }
}

fn positions<'py>(py: Python<'py>, ps: Vec<Position>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, ps.into_iter().map(PyPosition))
}

/// A core call taking entries as ledger, entry and slot columns (and the cursor).
type EntriesCall = fn(&mut DispatchCore, &[i64], &[i64], &[i64], &Cursor) -> Result<(), CoreError>;

impl PyDispatchCore {
    /// Reads three int64 columns and hands them to `call` (GIL released for large reads).
    fn take_entries(
        &self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
        method: &'static str,
        call: EntriesCall,
    ) -> PyResult<()> {
        let (ls, es) = columns(ledgers, entries)?;
        let ss = column(slots, "slots")?;
        let (ls, es, ss) = (ls.as_slice(), es.as_slice(), ss.as_slice());
        with_cursor(self, cursor, method, ls.len() > SMALL, |d, c| {
            call(d, ls, es, ss, c)
        })
    }

    /// Reads a consumer id and two position columns and hands them to `call` (GIL released for
    /// large batches): the shape of acks and nacks.
    fn consumer_positions<R: Send>(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
        method: &'static str,
        call: PositionsCall<R>,
    ) -> PyResult<R> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let (ls, es) = columns(ledgers, entries)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        with_cursor(self, cursor, method, ls.len() > SMALL, |d, c| {
            call(d, id, ls, es, c)
        })
    }
}

/// A core call taking a consumer id and positions as ledger and entry columns (and the cursor).
type PositionsCall<R> =
    fn(&mut DispatchCore, u32, &[i64], &[i64], &mut Cursor) -> Result<R, CoreError>;

fn reason(r: BlockReason) -> &'static str {
    match r {
        BlockReason::NoConsumer => "no-consumer",
        BlockReason::NoPermits => "no-permits",
        BlockReason::Draining => "draining",
        BlockReason::RecentlyJoined => "recently-joined",
        BlockReason::ReplayOrder => "replay-order",
        BlockReason::KeyUnackedLimit => "key-unacked-limit",
        BlockReason::KeyOrder => "key-order",
        BlockReason::Spilled => "spilled",
    }
}

#[pymethods]
impl PyDispatchCore {
    /// A subscription in `mode`: `"draining"`, `"last-sent"` or `"out-of-order"`.
    #[new]
    fn new(mode: &Bound<'_, PyAny>) -> PyResult<Self> {
        let mode = match str_arg(mode, "mode")?.as_str() {
            "draining" => DispatchMode::Draining,
            "last-sent" => DispatchMode::LastSent,
            "out-of-order" => DispatchMode::OutOfOrder,
            other => {
                return Err(InvalidArgument::new_err(format!(
                    "mode must be draining, last-sent or out-of-order, got {other:?}"
                )))
            }
        };
        Ok(Self {
            inner: Mutex::new(DispatchCore::new(mode)),
        })
    }

    /// Registers consumer `consumer_id` with `permits`.
    fn add_consumer(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let n = permits_arg(permits)?;
        with_cursor(self, cursor, "add_consumer", false, |d, c| {
            d.add_consumer(id, n, c)
        })
    }

    /// Unregisters a consumer; returns its unacked positions (now in replay), in order.
    fn remove_consumer<'py>(
        &self,
        consumer_id: &Bound<'py, PyAny>,
        cursor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let ps = with_cursor(self, cursor, "remove_consumer", true, |d, c| {
            d.remove_consumer(id, c)
        })?;
        positions(consumer_id.py(), ps)
    }

    /// Replaces the owner table: consumer id per slot (-1: nobody), at most 65536 slots.
    fn set_owners(&self, owners: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = owners.py();
        let col = column(owners, "owners")?;
        let col = col.as_slice();
        self.bulk(py, "set_owners", |d| d.set_owners(col))
            .map_err(|e| to_py(py, e))
    }

    /// Owner table update from a membership change: `added` is `[(new owner id, [(start, end),
    /// ...]), ...]`, the selector's exact impact (selectors over all 65536 slots only).
    fn assign(&self, added: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = added.py();
        let rows: Vec<(u32, Vec<HashRange>)> = added.extract().map_err(|_| {
            InvalidInputType::new_err(
                "added must be a list of (consumer id, [(start, end), ...])".to_owned(),
            )
        })?;
        self.call(py, "assign", |d| d.assign(&rows))
    }

    /// PIP-379: `removed` is `[(previous owner id, [(start, end), ...]), ...]` from a membership
    /// change of consumer `skip`.
    fn register_moved(&self, removed: &Bound<'_, PyAny>, skip: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = removed.py();
        let skip = u32_arg(skip, "skip")?;
        let rows: Vec<(u32, Vec<HashRange>)> = removed.extract().map_err(|_| {
            InvalidInputType::new_err(
                "removed must be a list of (consumer id, [(start, end), ...])".to_owned(),
            )
        })?;
        self.call(py, "register_moved", |d| d.register_moved(&rows, skip))
    }

    /// How many messages entries hold (int64 columns): sending one takes that many permits.
    fn set_batch_sizes(
        &self,
        py: Python<'_>,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        messages: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (ls, es) = columns(ledgers, entries)?;
        let ms = column(messages, "messages")?;
        let r = self
            .lock(py)
            .set_batch_sizes(ls.as_slice(), es.as_slice(), ms.as_slice());
        r.map_err(|e| to_py(py, e))
    }

    /// A flow request of `n` permits.
    fn add_permits(&self, consumer_id: &Bound<'_, PyAny>, n: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = n.py();
        let id = u32_arg(consumer_id, "consumer id")?;
        let k = permits_arg(n)?;
        self.call(py, "add_permits", |d| d.add_permits(id, k))
    }

    /// Beyond Pulsar (opt-in): at most ``cap`` unacknowledged messages per sticky-key hash slot
    /// (0: no cap); a held slot is reported as ``key-unacked-limit``.
    fn set_max_unacked_per_key(&self, py: Python<'_>, cap: &Bound<'_, PyAny>) -> PyResult<()> {
        let cap = int_arg(cap, "max_unacked_per_key")?;
        let cap = u64::try_from(cap).map_err(|_| {
            InvalidArgument::new_err(format!("max_unacked_per_key must be >= 0, got {cap}"))
        })?;
        self.lock(py).set_max_unacked_per_key(cap);
        Ok(())
    }

    /// The per-key cap (0: none).
    fn max_unacked_per_key(&self, py: Python<'_>) -> u64 {
        self.lock(py).max_unacked_per_key()
    }

    /// Beyond Pulsar (opt-in): key-ordered negative acks (a nack takes back the later messages of
    /// its key; acks overtaking an earlier unanswered message of their key wait for it).
    fn set_key_ordered_nacks(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.call(py, "set_key_ordered_nacks", |d| d.set_key_ordered_nacks(on))
    }

    /// Whether key-ordered nacks are on.
    fn key_ordered_nacks(&self, py: Python<'_>) -> bool {
        self.lock(py).key_ordered_nacks()
    }

    /// Key-ordered nacks' figures: `(parked acks, held keys, unanswered copies, taken back,
    /// stale answers, parked dropped)`.
    fn key_order_figures(&self, py: Python<'_>) -> (u64, u64, u64, u64, u64, u64) {
        let f = self.lock(py).key_order_figures();
        (
            f.parked_acks,
            f.held_keys,
            f.unanswered_copies,
            f.taken_back,
            f.stale_answers,
            f.parked_dropped,
        )
    }

    /// Unacknowledged messages of ``slot`` (counted while the cap is on).
    fn key_unacked(&self, py: Python<'_>, slot: u16) -> u64 {
        self.lock(py).key_unacked(slot)
    }

    /// Permits available over all consumers.
    fn permits_total(&self, py: Python<'_>) -> u64 {
        self.lock(py).permits_total()
    }

    /// New entries of one read (ledger, entry and slot columns).
    fn add_read(
        &self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.take_entries(
            ledgers,
            entries,
            slots,
            cursor,
            "add_read",
            DispatchCore::add_read,
        )
    }

    /// Entries to redeliver (re-read for replay, or delayed messages now due).
    fn add_replay(
        &self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.take_entries(
            ledgers,
            entries,
            slots,
            cursor,
            "add_replay",
            DispatchCore::add_replay,
        )
    }

    /// Sends what can be sent: `[(consumer id, ledgers, entries), ...]`, int64 arrays.
    fn dispatch<'py>(&self, cursor: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = cursor.py();
        let out = with_cursor(self, cursor, "dispatch", true, |d, c| d.dispatch(c))?;
        let list = PyList::empty(py);
        for d in out {
            let row = PyTuple::new(
                py,
                [
                    d.consumer.into_pyobject(py)?.into_any(),
                    PyArray1::from_vec(py, d.ledgers).into_any(),
                    PyArray1::from_vec(py, d.entries).into_any(),
                ],
            )?;
            list.append(row)?;
        }
        Ok(list)
    }

    /// Acks of many positions from one consumer; returns
    /// `(acked, from_other_consumer, not_pending, duplicates, unblocked)`.
    fn ack(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        self.consumer_positions(
            consumer_id,
            ledgers,
            entries,
            cursor,
            "ack",
            DispatchCore::ack,
        )
        .map(outcome)
    }

    /// One ack from ints (the per-call path).
    fn ack_one(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        with_cursor(self, cursor, "ack_one", false, |d, c| {
            d.ack_one(id, l, e, c)
        })
        .map(outcome)
    }

    /// Negative acks; returns how many were pending on the consumer.
    fn nack(
        &self,
        consumer_id: &Bound<'_, PyAny>,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        cursor: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        self.consumer_positions(
            consumer_id,
            ledgers,
            entries,
            cursor,
            "nack",
            |d, id, ls, es, c| d.nack(id, ls, es, c),
        )
    }

    /// Every unacked message of the consumer to replay; returns them in order.
    fn redeliver<'py>(
        &self,
        consumer_id: &Bound<'py, PyAny>,
        cursor: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let id = u32_arg(consumer_id, "consumer id")?;
        let ps = with_cursor(self, cursor, "redeliver", true, |d, c| d.redeliver(id, c))?;
        positions(consumer_id.py(), ps)
    }

    /// The consumer's unacked positions, in order.
    fn unacked<'py>(&self, consumer_id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = consumer_id.py();
        let id = u32_arg(consumer_id, "consumer id")?;
        let ps = self.call(py, "unacked", |d| d.unacked(id))?;
        positions(py, ps)
    }

    /// `(permits, unacked, delivered, joined last sent position or None)`.
    fn consumer_figures(
        &self,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<(u64, u64, u64, Option<PyPosition>, u64, bool)> {
        let py = consumer_id.py();
        let id = u32_arg(consumer_id, "consumer id")?;
        let f = self.call(py, "consumer_figures", |d| d.consumer_figures(id))?;
        Ok((
            f.permits,
            f.unacked,
            f.delivered,
            f.joined_last_sent.map(PyPosition),
            f.progress,
            f.stuck,
        ))
    }

    /// The replay queue, in order.
    fn replay_positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ps = self.lock(py).replay_positions();
        positions(py, ps)
    }

    /// Replay queue length.
    fn replay_len(&self, py: Python<'_>) -> usize {
        self.lock(py).replay_len()
    }

    /// Beyond Pulsar: marks a consumer stuck (or no longer): entries of its slots that cannot be
    /// sent are spilled (dropped from memory, read again later).
    fn set_stuck(&self, consumer_id: &Bound<'_, PyAny>, stuck: bool) -> PyResult<()> {
        let py = consumer_id.py();
        let id = u32_arg(consumer_id, "consumer id")?;
        self.call(py, "set_stuck", |d| d.set_stuck(id, stuck))
    }

    /// The span of positions to read again for spilled entries, `(first, last)`, or None.
    fn take_reread(&self, py: Python<'_>) -> Option<(PyPosition, PyPosition)> {
        self.lock(py)
            .take_reread()
            .map(|(a, b)| (PyPosition(a), PyPosition(b)))
    }

    /// The entries of the span read again (ledger, entry and slot columns), every one of it
    /// through `read_to` (None: through its end); at most `limit` of the spilled ones are queued
    /// again (None: all); returns how many.
    #[pyo3(signature = (ledgers, entries, slots, limit, cursor, read_to = None))]
    fn add_reread(
        &self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        limit: Option<usize>,
        cursor: &Bound<'_, PyAny>,
        read_to: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let read_to = match read_to.filter(|r| !r.is_none()) {
            Some(r) => Some(position_arg(r, "read_to")?),
            None => None,
        };
        let (ls, es) = columns(ledgers, entries)?;
        let ss = column(slots, "slots")?;
        let (ls, es, ss) = (ls.as_slice(), es.as_slice(), ss.as_slice());
        with_cursor(self, cursor, "add_reread", ls.len() > SMALL, |d, c| {
            d.add_reread(ls, es, ss, limit, read_to, c)
        })
    }

    /// Stuck-consumer isolation's figures: `(stuck consumers, spilled slots, span or None,
    /// spilled in total, brought back in total, read back in total, heap bytes held)`.
    #[allow(clippy::type_complexity)]
    fn isolation_figures(
        &self,
        py: Python<'_>,
    ) -> (
        u64,
        u64,
        Option<(PyPosition, PyPosition)>,
        u64,
        u64,
        u64,
        usize,
    ) {
        let core = self.lock(py);
        let f = core.isolation_figures();
        (
            f.stuck,
            f.spilled_slots,
            f.span.map(|(a, b)| (PyPosition(a), PyPosition(b))),
            f.spilled,
            f.brought_back,
            f.read_back,
            core.isolation_memory(),
        )
    }

    /// Where to read again after, once, when the last consumer left; else None.
    fn take_rewind(&self, py: Python<'_>) -> Option<PyPosition> {
        self.lock(py).take_rewind().map(PyPosition)
    }

    /// `[(slot, reason, consumer id or None, owner id or None, position), ...]` of the last dispatch.
    #[allow(clippy::type_complexity)]
    fn blocked(
        &self,
        py: Python<'_>,
    ) -> Vec<(u16, &'static str, Option<u32>, Option<u32>, PyPosition)> {
        self.lock(py)
            .blocked()
            .into_iter()
            .map(|(s, b)| {
                (
                    s,
                    reason(b.reason),
                    b.consumer,
                    b.owner,
                    PyPosition(b.position),
                )
            })
            .collect()
    }

    /// Unblock events so far.
    fn unblocked_events(&self, py: Python<'_>) -> u64 {
        self.lock(py).unblocked_events()
    }

    /// Replay entries dropped because the cursor had acknowledged them.
    fn replay_dropped_acked(&self, py: Python<'_>) -> u64 {
        self.lock(py).replay_dropped_acked()
    }

    /// How many times a position went back for redelivery.
    fn redelivery_count(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<u32> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        Ok(self.lock(py).redelivery_count(Position {
            ledger_id: l,
            entry_id: e,
        }))
    }

    /// Redelivery counts of many positions, as an int32 array.
    fn redelivery_counts<'py>(
        &self,
        ledgers: &Bound<'py, PyAny>,
        entries: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let py = ledgers.py();
        let (ls, es) = columns(ledgers, entries)?;
        let counts = self
            .lock(py)
            .redelivery_counts(ls.as_slice(), es.as_slice());
        Ok(PyArray1::from_vec(
            py,
            counts
                .into_iter()
                .map(|c| i32::try_from(c).unwrap_or(i32::MAX))
                .collect(),
        ))
    }

    /// Journals every redelivery-count raise from now on (durable counts), or stops; a journaled
    /// dispatcher keeps its counts when the last consumer leaves.
    fn set_counts_journal(&self, py: Python<'_>, on: &Bound<'_, PyAny>) -> PyResult<()> {
        let on = bool_arg(on, "on")?;
        self.lock(py).counts_mut().set_journal(on);
        Ok(())
    }

    /// The raises journaled since the last call: `(ledger ids, entry ids, new counts)` arrays.
    fn take_raised_counts<'py>(&self, py: Python<'py>) -> RaisedColumns<'py> {
        take_raised(py, self.lock(py).counts_mut())
    }

    /// Counts read back from a durable journal: each position keeps the higher of its count and
    /// the given one.
    fn seed_counts(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
        counts: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let seeds = seeds(ledger_ids, entry_ids, counts)?;
        self.lock(ledger_ids.py()).counts_mut().seed(seeds);
        Ok(())
    }

    /// One more redelivery of each of `positions` (a consumer lost holding them); journaled.
    fn raise_counts(&self, positions: &Bound<'_, PyAny>) -> PyResult<()> {
        let ps = positions_of(positions)?;
        let mut d = self.lock(positions.py());
        ps.into_iter().for_each(|p| {
            d.counts_mut().raise(p);
        });
        Ok(())
    }

    /// Positions with a redelivery count held.
    fn redeliveries_tracked(&self, py: Python<'_>) -> usize {
        self.lock(py).redeliveries_tracked()
    }

    /// Draining hashes as `(n, 4)` int64 rows `(hash, owner id, unacked, blocked attempts)`.
    fn draining_hashes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let flat = draining_rows(&self.lock(py).draining().entries(None));
        rows_array(py, flat)
    }

    /// `{consumer id: draining_hashes_cleared_total}` of consumers with a draining record.
    fn draining_cleared<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let all = self.lock(py).draining().consumers_stats();
        let d = PyDict::new(py);
        for (c, s) in all {
            d.set_item(c, s.draining_hashes_cleared_total)?;
        }
        Ok(d)
    }

    /// Number of draining hashes.
    fn draining_len(&self, py: Python<'_>) -> usize {
        self.lock(py).draining().len()
    }

    /// PIP-282: the last sent position, or None before first use.
    fn last_sent_position(&self, py: Python<'_>) -> Option<PyPosition> {
        self.lock(py).last_sent_position().map(PyPosition)
    }

    /// PIP-282: the positions sent after the last sent position, in the range-set string form.
    fn individually_sent(&self, py: Python<'_>) -> String {
        self.lock(py).individually_sent().to_string()
    }

    /// PIP-282: `[(consumer id, limit), ...]` of joined consumers still limited.
    fn recently_joined(&self, py: Python<'_>) -> Vec<(u32, PyPosition)> {
        self.lock(py)
            .recently_joined()
            .into_iter()
            .map(|(c, p)| (c, PyPosition(p)))
            .collect()
    }

    /// The highest position read since the last release, or None.
    fn highest_read(&self, py: Python<'_>) -> Option<PyPosition> {
        self.lock(py).highest_read().map(PyPosition)
    }

    /// Heap bytes of every consumer's pending acks.
    fn pending_memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).pending_memory_usage()
    }

    /// Messages pending over all consumers.
    fn pending_total(&self, py: Python<'_>) -> u64 {
        self.lock(py).pending_total()
    }
}

/// A non-negative permit count.
fn permits_arg(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let v = int_arg(obj, "permits")?;
    u64::try_from(v).map_err(|_| InvalidArgument::new_err(format!("permits must be >= 0, got {v}")))
}
