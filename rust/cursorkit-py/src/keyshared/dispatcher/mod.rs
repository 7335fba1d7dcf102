//! `cursorkit._core.KeySharedBase`: the per-event calls of `KeySharedDispatcher`, in Rust.
//!
//! A broker calls these tens of thousands of times a second with a few positions each: an ack, a
//! flow, a read check, a dispatch. `cursorkit.keyshared.KeySharedDispatcher` subclasses this class,
//! so each is one call straight into Rust with no Python frame, lock or conversion around it: the
//! consumer object is looked up here (a dict, by the consumer's own hash), `Position` lists are
//! read here without numpy, results are made here (ack outcomes are shared objects, made once).
//! Membership changes, stats and the selector stay in Python (they happen per join, not per event).
//!
//! Locks: the dispatch core, then the cursor, as `DispatchCore` takes them; the policy and delayed
//! hooks are called with neither held.
//!
//! Here: the class and its Python methods; `ids.rs` reads `Position` lists and short columns,
//! `calls.rs` holds what the methods share (lookups, locked calls, hooks, checks).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

use cursorkit_core::{
    pack_bits, CoreError, Cursor, DispatchCore, DispatchMode, Dispatched, Position,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyTuple};

use crate::ackstate::cursor::PyCursorState;
use crate::ackstate::position::{untracked_position, PyPosition};
use crate::ackstate::rangeset::columns;
use crate::args::{column, int_arg, plain_i64, str_arg};
use crate::delayed::tracker::PyInMemoryTrackerState;
use crate::errors::{to_py, InvalidInputType};
use crate::keyshared::dispatch::PyDispatchCore;
use crate::sync::{self, catching, Shared};
use crate::views::views;

mod calls;
pub(crate) mod ids;

use calls::*;
use ids::*;

/// Positions read in place (on the stack) by an ack or nack; more go to the heap.
const INLINE: usize = 16;
/// Entries waiting below which a dispatch keeps the GIL (releasing it costs more).
const SMALL: usize = 256;
/// Distinct ack outcomes kept as shared objects.
const RESULTS_KEPT: usize = 4096;
/// `keySharedLookAheadMsgInReplayThresholdPerConsumer` and its three neighbours' defaults.
const DEFAULT_LOOK_AHEAD: [u64; 4] = [2000, 20_000, 50_000, 200_000];
/// `look_ahead_limit` when no limit applies.
const UNLIMITED: u64 = i64::MAX as u64;

/// Ack outcome as `(acked, from_other_consumer, not_pending, duplicates, unblocked, parked,
/// stale)`.
type Outcome = (u64, u64, u64, u64, u64, u64, u64);

static ACK_RESULT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// `AckResult(acked=k)` for `k` up to 64, the outcome of nearly every ack call.
static PLAIN_RESULTS: [PyOnceLock<Py<PyAny>>; 65] = [const { PyOnceLock::new() }; 65];

/// A new `AckResult` (``cursorkit.keyshared.dispatcher.AckResult``) of an outcome.
fn make_result(py: Python<'_>, o: Outcome) -> PyResult<Py<PyAny>> {
    let class = ACK_RESULT.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py
            .import("cursorkit.keyshared.dispatcher")?
            .getattr("AckResult")?
            .unbind())
    })?;
    Ok(class.bind(py).call1(o)?.unbind())
}

/// Why the last read check said no.
const READ_OK: u8 = 0;
const READ_REASONS: [&str; 3] = ["paused", "look-ahead", "no-permits"];

/// The hot half of a Key_Shared dispatcher (see the module docs); subclassed in Python.
#[pyclass(name = "KeySharedBase", module = "cursorkit._core", frozen, subclass)]
pub struct PyKeySharedBase {
    core: Py<PyDispatchCore>,
    cursor: Py<PyCursorState>,
    /// Consumer object -> consumer id (the dict hashes consumers as Python does).
    ids: Py<PyDict>,
    /// Registered consumer object's address -> consumer id: the lookup of a consumer passed as
    /// the object it was registered as (the dict is asked only for an equal, other object).
    by_address: Mutex<HashMap<usize, u32, BuildHasherDefault<AddressHasher>>>,
    /// Consumer id -> consumer object, for what a dispatch returns.
    consumers: Mutex<HashMap<u32, Py<PyAny>, BuildHasherDefault<AddressHasher>>>,
    policy: Mutex<Option<Py<PyAny>>>,
    has_policy: AtomicBool,
    delayed: Mutex<Option<Py<PyAny>>>,
    has_delayed: AtomicBool,
    /// Per consumer, per subscription, max unacked per consumer, per subscription.
    look_ahead: [AtomicU64; 4],
    read_blocked: AtomicU8,
    results: Mutex<HashMap<Outcome, Py<PyAny>>>,
}

/// Hashes an object address (objects are 16-byte aligned, so the bits above those are spread) or
/// a consumer id (ids are small and dense).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.0 = ((v as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[pymethods]
impl PyKeySharedBase {
    #[new]
    #[pyo3(signature = (
        *,
        cursor,
        mode = None,
        policy = None,
        delayed = None,
        look_ahead_per_consumer = None,
        look_ahead_per_subscription = None,
        max_unacked_per_consumer = None,
        max_unacked_per_subscription = None,
        **_rest
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cursor: &Bound<'_, PyAny>,
        mode: Option<&Bound<'_, PyAny>>,
        policy: Option<&Bound<'_, PyAny>>,
        delayed: Option<&Bound<'_, PyAny>>,
        look_ahead_per_consumer: Option<&Bound<'_, PyAny>>,
        look_ahead_per_subscription: Option<&Bound<'_, PyAny>>,
        max_unacked_per_consumer: Option<&Bound<'_, PyAny>>,
        max_unacked_per_subscription: Option<&Bound<'_, PyAny>>,
        _rest: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let mode = mode_of(mode)?;
        let cursor = cursor.cast::<PyCursorState>().map_err(|_| {
            InvalidInputType::new_err(format!(
                "cursor must be a cursorkit.Cursor, got {}",
                type_name(cursor)
            ))
        })?;
        let names = [
            "look_ahead_per_consumer",
            "look_ahead_per_subscription",
            "max_unacked_per_consumer",
            "max_unacked_per_subscription",
        ];
        let given = [
            look_ahead_per_consumer,
            look_ahead_per_subscription,
            max_unacked_per_consumer,
            max_unacked_per_subscription,
        ];
        let mut look_ahead = DEFAULT_LOOK_AHEAD;
        for ((slot, value), name) in look_ahead.iter_mut().zip(given).zip(names) {
            if let Some(v) = value.filter(|v| !v.is_none()) {
                *slot = count_arg(v, name)?;
            }
        }
        let hook =
            |h: Option<&Bound<'_, PyAny>>| h.filter(|h| !h.is_none()).map(|h| h.clone().unbind());
        let (policy, delayed) = (hook(policy), hook(delayed));
        Ok(Self {
            core: Py::new(py, PyDispatchCore::with_mode(mode))?,
            cursor: cursor.clone().unbind(),
            ids: PyDict::new(py).unbind(),
            by_address: Mutex::new(HashMap::default()),
            consumers: Mutex::new(HashMap::default()),
            has_policy: AtomicBool::new(policy.is_some()),
            policy: Mutex::new(policy),
            has_delayed: AtomicBool::new(delayed.is_some()),
            delayed: Mutex::new(delayed),
            look_ahead: look_ahead.map(AtomicU64::new),
            read_blocked: AtomicU8::new(READ_OK),
            results: Mutex::new(HashMap::new()),
        })
    }

    /// The id-level dispatch core (`cursorkit._core.DispatchCore`) this dispatcher drives.
    #[getter]
    fn _core(&self, py: Python<'_>) -> Py<PyDispatchCore> {
        self.core.clone_ref(py)
    }

    /// The cursor the acks go to.
    #[getter]
    fn cursor(&self, py: Python<'_>) -> Py<PyCursorState> {
        self.cursor.clone_ref(py)
    }

    /// The PIP-299 pause policy consulted before new entries are read, or None.
    #[getter]
    fn policy(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(&self.policy).as_ref().map(|p| p.clone_ref(py))
    }

    #[setter]
    fn set_policy(&self, value: &Bound<'_, PyAny>) {
        let hook = (!value.is_none()).then(|| value.clone().unbind());
        let mut slot = lock(&self.policy);
        self.has_policy.store(hook.is_some(), Ordering::Release);
        *slot = hook;
    }

    /// The delayed-delivery tracker holding messages until their deliver-at, or None.
    #[getter]
    fn delayed(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(&self.delayed).as_ref().map(|p| p.clone_ref(py))
    }

    #[setter]
    fn set_delayed(&self, value: &Bound<'_, PyAny>) {
        let hook = (!value.is_none()).then(|| value.clone().unbind());
        let mut slot = lock(&self.delayed);
        self.has_delayed.store(hook.is_some(), Ordering::Release);
        *slot = hook;
    }

    /// ``keySharedLookAheadMsgInReplayThresholdPerConsumer`` (0: none of this kind).
    #[getter]
    fn look_ahead_per_consumer(&self) -> u64 {
        self.look_ahead[0].load(Ordering::Relaxed)
    }

    #[setter]
    fn set_look_ahead_per_consumer(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.look_ahead[0].store(
            count_arg(value, "look_ahead_per_consumer")?,
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// ``keySharedLookAheadMsgInReplayThresholdPerSubscription`` (0: none of this kind).
    #[getter]
    fn look_ahead_per_subscription(&self) -> u64 {
        self.look_ahead[1].load(Ordering::Relaxed)
    }

    #[setter]
    fn set_look_ahead_per_subscription(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.look_ahead[1].store(
            count_arg(value, "look_ahead_per_subscription")?,
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// ``maxUnackedMessagesPerConsumer``: the look-ahead fallback when both limits are 0.
    #[getter]
    fn max_unacked_per_consumer(&self) -> u64 {
        self.look_ahead[2].load(Ordering::Relaxed)
    }

    #[setter]
    fn set_max_unacked_per_consumer(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.look_ahead[2].store(
            count_arg(value, "max_unacked_per_consumer")?,
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// ``maxUnackedMessagesPerSubscription``: likewise (0 = no limit).
    #[getter]
    fn max_unacked_per_subscription(&self) -> u64 {
        self.look_ahead[3].load(Ordering::Relaxed)
    }

    #[setter]
    fn set_max_unacked_per_subscription(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.look_ahead[3].store(
            count_arg(value, "max_unacked_per_subscription")?,
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// Replay-queue size beyond which new entries are not read (Pulsar 4's rule).
    ///
    /// ``per_consumer × consumers`` capped by ``per_subscription``, or ``per_subscription`` alone.
    /// A limit of 0 means "no limit of this kind": Pulsar then falls back to
    /// ``min(max_unacked_per_subscription, consumers × max_unacked_per_consumer)``, each 0 = none,
    /// and to an unlimited look-ahead when every one is 0.
    #[getter]
    fn look_ahead_limit(&self, py: Python<'_>) -> u64 {
        let consumers = self.core.get().lock(py).len() as u64;
        self.limit_for(consumers)
    }

    /// Why the last ``should_read()`` said no: ``paused``, ``look-ahead`` or ``no-permits`` (None: yes).
    #[getter]
    fn read_blocked(&self) -> Option<&'static str> {
        let code = self.read_blocked.load(Ordering::Relaxed);
        code.checked_sub(1)
            .and_then(|i| READ_REASONS.get(usize::from(i)).copied())
    }

    /// Records `consumer` as the consumer with id `consumer_id` (the Python side's membership calls).
    fn _register(&self, consumer: &Bound<'_, PyAny>, consumer_id: u32) -> PyResult<()> {
        self.ids
            .bind(consumer.py())
            .set_item(consumer, consumer_id)?;
        let old = lock(&self.consumers).insert(consumer_id, consumer.clone().unbind());
        let mut addresses = lock(&self.by_address);
        if let Some(old) = &old {
            addresses.remove(&(old.as_ptr() as usize));
        }
        addresses.insert(consumer.as_ptr() as usize, consumer_id);
        drop(addresses);
        drop(old);
        Ok(())
    }

    /// Forgets a consumer recorded by ``_register``.
    fn _unregister(&self, consumer: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = consumer.py();
        let id = self.id_of(consumer)?;
        self.ids.bind(py).del_item(consumer)?;
        let gone = lock(&self.consumers).remove(&id);
        if let Some(registered) = &gone {
            lock(&self.by_address).remove(&(registered.as_ptr() as usize));
        }
        drop(gone);
        Ok(())
    }

    /// A consumer's flow request: ``n`` more messages may be sent to it.
    fn add_permits(&self, consumer: &Bound<'_, PyAny>, n: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = consumer.py();
        let k = match n.cast::<PyInt>() {
            Ok(i) if !n.is_instance_of::<PyBool>() => match i.extract::<u64>() {
                Ok(k) => k,
                Err(_) => count_arg(n, "permits")?,
            },
            _ => count_arg(n, "permits")?,
        };
        let id = self.id_of(consumer)?;
        let core = self.core.get();
        core.call(py, "add_permits", |d| d.add_permits(id, k))
    }

    /// An individual ack from ``consumer``, accepted as Pulsar accepts it (see ``AckResult``).
    fn ack(&self, consumer: &Bound<'_, PyAny>, position: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = consumer.py();
        let id = self.id_of(consumer)?;
        let p = position_of(position)?;
        let o = self.locked(py, "ack", |d, c| d.ack_one(id, p.ledger_id, p.entry_id, c))?;
        self.after_ack(py)?;
        self.result(py, outcome(o))
    }

    /// Individual acks of many positions from one consumer, accepted as Pulsar accepts them.
    fn ack_many(
        &self,
        consumer: &Bound<'_, PyAny>,
        positions: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let py = consumer.py();
        let id = self.id_of(consumer)?;
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        let o = if ls.len() > SMALL {
            self.detached(py, "ack_many", |d, c| d.ack(id, ls, es, c))?
        } else {
            self.locked(py, "ack_many", |d, c| d.ack(id, ls, es, c))?
        };
        self.after_ack(py)?;
        self.result(py, outcome(o))
    }

    /// ``ack_many`` with the positions as ledger and entry columns (numpy, Arrow or int sequences).
    fn ack_columns(
        &self,
        consumer: &Bound<'_, PyAny>,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let py = consumer.py();
        let id = self.id_of(consumer)?;
        let mut ids = Ids::empty();
        if ids.read_short_arrays(ledgers, entries) {
            let (ls, es) = ids.slices();
            let o = self.locked(py, "ack_columns", |d, c| d.ack(id, ls, es, c))?;
            self.after_ack(py)?;
            return self.result(py, outcome(o));
        }
        let (ls, es) = columns(ledgers, entries)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let o = if ls.len() > SMALL {
            self.detached(py, "ack_columns", |d, c| d.ack(id, ls, es, c))?
        } else {
            self.locked(py, "ack_columns", |d, c| d.ack(id, ls, es, c))?
        };
        self.after_ack(py)?;
        self.result(py, outcome(o))
    }

    /// Negative acks: the messages leave the consumer and are redelivered (order may change).
    ///
    /// As in Pulsar, a position not pending on ``consumer`` is skipped; returns how many were nacked.
    fn nack(&self, consumer: &Bound<'_, PyAny>, positions: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = consumer.py();
        let id = self.id_of(consumer)?;
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        self.locked(py, "nack", |d, c| d.nack(id, ls, es, c))
    }

    /// How many times ``position`` went back for redelivery (nacks and redeliver, as Pulsar counts).
    fn redelivery_count(&self, position: &Bound<'_, PyAny>) -> PyResult<u32> {
        let py = position.py();
        let p = position_of(position)?;
        Ok(self.core.get().lock(py).redelivery_count(p))
    }

    /// Whether the broker should read new entries now (PIP-299, look-ahead, permits).
    ///
    /// When not, ``stats().read_blocked`` says why: ``paused`` (ack state not persistable),
    /// ``look-ahead`` (the replay queue is at its limit) or ``no-permits``.
    fn should_read(&self, py: Python<'_>) -> PyResult<bool> {
        let code = if self.paused(py)? {
            1
        } else {
            let d = self.core.get().lock(py);
            if d.replay_len() as u64 >= self.limit_for(d.len() as u64) {
                2
            } else if d.permits_total() == 0 {
                3
            } else {
                READ_OK
            }
        };
        self.read_blocked.store(code, Ordering::Relaxed);
        Ok(code == READ_OK)
    }

    /// How many new entries the broker should read now; 0 when ``should_read()`` says no.
    ///
    /// Pulsar's read size for Key_Shared: ``max(look-ahead limit - replay size, 1)``, and never more
    /// than the permits consumers have available, so one read cannot overshoot the limit.
    fn max_entries_to_read(&self, py: Python<'_>) -> PyResult<u64> {
        if !self.should_read(py)? {
            return Ok(0);
        }
        let d = self.core.get().lock(py);
        let room = self
            .limit_for(d.len() as u64)
            .saturating_sub(d.replay_len() as u64)
            .max(1);
        Ok(room.min(d.permits_total()))
    }

    /// Entries of one read as columns: ``positions`` in read order, their selector ``slots``, and
    /// optionally their ``deliver_at`` times (those the delayed tracker takes wait there).
    #[pyo3(signature = (positions, slots, deliver_at = None))]
    fn add_read(
        &self,
        positions: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        deliver_at: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = positions.py();
        let mut ids = Ids::empty();
        ids.read(positions)?;
        let (ls, es) = ids.slices();
        let slots = column(slots, "slots")?;
        self.read(py, (ls, None), (es, None), slots.as_slice(), deliver_at)
    }

    /// One read as int64 columns of ledger ids, entry ids and slots (and deliver-at times).
    #[pyo3(signature = (ledgers, entries, slots, deliver_at = None))]
    fn add_read_columns(
        &self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
        slots: &Bound<'_, PyAny>,
        deliver_at: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = ledgers.py();
        let (ls, es) = columns(ledgers, entries)?;
        let slots = column(slots, "slots")?;
        self.read(
            py,
            (ls.as_slice(), ls.borrowed()),
            (es.as_slice(), es.borrowed()),
            slots.as_slice(),
            deliver_at,
        )
    }

    /// Sends what can be sent: due delayed messages and the replay queue first, then new entries.
    /// Returns ``[(consumer, [Position, ...]), ...]``.
    fn dispatch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = self.deliveries(py)?;
        let list = PyList::empty(py);
        if out.is_empty() {
            return Ok(list);
        }
        let consumers = lock(&self.consumers);
        let mut made = Vec::new(); // one buffer for every consumer's positions
        for (id, ledgers, entries) in out.iter() {
            let Some(consumer) = consumers.get(&id) else {
                continue; // it left meanwhile: what it was sent went back for redelivery
            };
            for (&ledger_id, &entry_id) in ledgers.iter().zip(entries) {
                made.push(untracked_position(
                    py,
                    Position {
                        ledger_id,
                        entry_id,
                    },
                )?);
            }
            let positions = PyList::new(py, made.drain(..))?;
            list.append((consumer.clone_ref(py), positions))?;
        }
        Ok(list)
    }

    /// ``dispatch()`` as ``(consumer, ledger ids, entry ids)`` int64 columns: no object per message
    /// (each column a view of one buffer the dispatch fills once).
    fn dispatch_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let Dispatched {
            consumers: ids,
            ends,
            mut ledgers,
            entries,
        } = self.deliveries(py)?;
        if ids.is_empty() {
            return Ok(PyList::empty(py));
        }
        let total = ledgers.len();
        ledgers.extend_from_slice(&entries); // one buffer: the ledger ids, then the entry ids
        drop(entries);
        // Each consumer's ledger ids, then each one's entry ids (the same ranges, `total` on).
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let ranges: Vec<(usize, usize)> = starts.zip(ends.iter().copied()).collect();
        let shifted = ranges.iter().map(|&(a, b)| (total + a, total + b));
        let all: Vec<(usize, usize)> = ranges.iter().copied().chain(shifted).collect();
        let columns = views(py, ledgers, &all)?;
        let (ls, es) = columns.split_at(ids.len().min(columns.len()));
        let list = PyList::empty(py);
        let consumers = lock(&self.consumers);
        for ((id, l), e) in ids.iter().zip(ls).zip(es) {
            let Some(consumer) = consumers.get(id) else {
                continue; // it left meanwhile: what it was sent went back for redelivery
            };
            list.append((consumer.clone_ref(py), l, e))?;
        }
        Ok(list)
    }
}

fn outcome(o: cursorkit_core::AckOutcome) -> Outcome {
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
