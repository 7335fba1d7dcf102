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
use crate::delayed::delay_queue::PyInMemoryTrackerState;
use crate::errors::{error, to_py};
use crate::keyshared::dispatch::PyDispatchCore;
use crate::sync::{self, catching, Shared};
use crate::views::views;

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

/// Ack outcome as `(acked, from_other_consumer, not_pending, duplicates, unblocked)`.
type Outcome = (u64, u64, u64, u64, u64);

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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A non-negative count argument (`InvalidInputType` for a non-int, `InvalidArgument` below 0).
fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if !obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return Err(error(
            obj.py(),
            "InvalidInputType",
            format!("{what} must be an int, got {}", type_name(obj)),
        ));
    }
    let v = int_arg(obj, what)?;
    u64::try_from(v).map_err(|_| {
        error(
            obj.py(),
            "InvalidArgument",
            format!("{what} must be >= 0, got {v}"),
        )
    })
}

/// `Position`'s type object, as an address.
#[inline]
fn position_type(py: Python<'_>) -> usize {
    *POSITION_TYPE.get_or_init(py, || py.get_type::<PyPosition>().as_type_ptr() as usize)
}

fn position_of(obj: &Bound<'_, PyAny>) -> PyResult<Position> {
    position_of_type(obj, position_type(obj.py()))
}

/// [`position_of`] with `Position`'s type address at hand (a list reader looks it up once).
#[inline(always)]
fn position_of_type(obj: &Bound<'_, PyAny>, exact: usize) -> PyResult<Position> {
    // A `Position` (the per-event case) is one type compare; anything else takes the checked cast
    // (which refuses it with a typed error).
    // SAFETY: a type compare against `Position`'s own type object: the cast below is to it.
    if unsafe { pyo3::ffi::Py_TYPE(obj.as_ptr()) } as usize == exact {
        // SAFETY: the object's type is exactly `PyPosition` (checked above).
        return Ok(unsafe { obj.cast_unchecked::<PyPosition>() }.get().0);
    }
    match obj.cast::<PyPosition>() {
        Ok(p) => Ok(p.get().0),
        Err(_) => Err(error(
            obj.py(),
            "InvalidInputType",
            format!("positions must be Position objects, got {}", type_name(obj)),
        )),
    }
}

/// `Position`'s type object, as an address (compared, never dereferenced here).
static POSITION_TYPE: PyOnceLock<usize> = PyOnceLock::new();

/// Ledger and entry ids of a sequence of `Position`s, on the stack when few.
struct Ids {
    n: usize,
    inline_ls: [i64; INLINE],
    inline_es: [i64; INLINE],
    heap: Option<(Vec<i64>, Vec<i64>)>,
}

impl Ids {
    fn empty() -> Self {
        Ids {
            n: 0,
            inline_ls: [0; INLINE],
            inline_es: [0; INLINE],
            heap: None,
        }
    }

    /// Fills an empty `Ids` (the caller's, in its own frame: a few hundred bytes are not moved
    /// per call) with the ids of a sequence of `Position`s.
    fn read(&mut self, positions: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Ok(list) = positions.cast::<PyList>() {
            return self.read_list(list);
        }
        let ids = self;
        if let Ok(tuple) = positions.cast::<PyTuple>() {
            for item in tuple.iter() {
                ids.push(position_of(&item)?);
            }
        } else {
            for item in positions.try_iter().map_err(|_| {
                error(
                    positions.py(),
                    "InvalidInputType",
                    format!(
                        "positions must be a sequence of Position, got {}",
                        type_name(positions)
                    ),
                )
            })? {
                ids.push(position_of(&item?)?);
            }
        }
        Ok(())
    }

    /// A list of `Position`s, read by index and borrowed (no reference count taken and dropped
    /// per item), straight into place: nothing between the reads can change the list
    /// (`position_of` runs no Python code, and the GIL is held throughout).
    fn read_list(&mut self, list: &Bound<'_, PyList>) -> PyResult<()> {
        let py = list.py();
        let exact = position_type(py);
        let n = list.len();
        let at = |i: usize| -> PyResult<Position> {
            // SAFETY: `i` < the list's length, read before the reads and unchanged since, so
            // `PyList_GetItem` returns a non-null borrowed reference the list keeps alive.
            let item = unsafe {
                Borrowed::from_ptr(py, pyo3::ffi::PyList_GetItem(list.as_ptr(), i as isize))
            };
            position_of_type(&item, exact)
        };
        let ids = self;
        if n > INLINE {
            ids.heap = Some((vec![0; n], vec![0; n]));
        }
        let (ls, es) = match &mut ids.heap {
            Some((ls, es)) => (ls.as_mut_slice(), es.as_mut_slice()),
            None => (&mut ids.inline_ls[..], &mut ids.inline_es[..]),
        };
        for (i, (l, e)) in ls.iter_mut().zip(es.iter_mut()).take(n).enumerate() {
            let p = at(i)?;
            *l = p.ledger_id;
            *e = p.entry_id;
        }
        ids.n = n;
        Ok(())
    }

    /// Two contiguous int64 numpy arrays of equal length up to [`INLINE`], copied into this empty
    /// `Ids` (false, nothing read, for anything else: the general column reader takes it).
    fn read_short_arrays(
        &mut self,
        ledgers: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
    ) -> bool {
        // SAFETY: read and copied at once with the GIL held and no Python code run in between,
        // so nothing can write the arrays while they are read (a borrow's bookkeeping would cost
        // more than the copy).
        let Some((l, e)) = (unsafe { plain_i64(ledgers).zip(plain_i64(entries)) }) else {
            return false;
        };
        if l.len() != e.len() || l.len() > INLINE {
            return false;
        }
        self.n = l.len();
        for ((to_l, to_e), (&from_l, &from_e)) in self
            .inline_ls
            .iter_mut()
            .zip(self.inline_es.iter_mut())
            .zip(l.iter().zip(e))
        {
            *to_l = from_l;
            *to_e = from_e;
        }
        true
    }

    #[inline]
    fn push(&mut self, p: Position) {
        match (
            &mut self.heap,
            self.inline_ls.get_mut(self.n),
            self.inline_es.get_mut(self.n),
        ) {
            (None, Some(l), Some(e)) => {
                *l = p.ledger_id;
                *e = p.entry_id;
            }
            (None, _, _) => {
                let mut ls = self.inline_ls.to_vec();
                let mut es = self.inline_es.to_vec();
                ls.push(p.ledger_id);
                es.push(p.entry_id);
                self.heap = Some((ls, es));
            }
            (Some((ls, es)), _, _) => {
                ls.push(p.ledger_id);
                es.push(p.entry_id);
            }
        }
        self.n += 1;
    }

    fn slices(&self) -> (&[i64], &[i64]) {
        match &self.heap {
            Some((ls, es)) => (ls, es),
            None => (
                self.inline_ls.get(..self.n).unwrap_or(&[]),
                self.inline_es.get(..self.n).unwrap_or(&[]),
            ),
        }
    }
}

impl PyKeySharedBase {
    /// The consumer id of a registered consumer (`UnknownConsumer` otherwise).
    #[inline]
    fn id_of(&self, consumer: &Bound<'_, PyAny>) -> PyResult<u32> {
        // A registered object is kept alive by `consumers`, so its address is not reused.
        if let Some(&id) = lock(&self.by_address).get(&(consumer.as_ptr() as usize)) {
            return Ok(id);
        }
        let py = consumer.py();
        match self.ids.bind(py).get_item(consumer) {
            Ok(Some(id)) => id.extract::<u32>(),
            Ok(None) | Err(_) => Err(unknown_consumer(consumer)),
        }
    }

    /// Runs `f` on the dispatch core and the cursor, locked in that order (GIL held).
    #[inline]
    fn locked<R>(
        &self,
        py: Python<'_>,
        method: &'static str,
        f: impl FnOnce(&mut DispatchCore, &mut Cursor) -> Result<R, CoreError>,
    ) -> PyResult<R> {
        let core = self.core.get();
        let cursor = self.cursor.get();
        let mut d = core.lock(py);
        let mut c = cursor.lock(py);
        catching(
            || format!("KeySharedDispatcher.{method}"),
            || f(&mut d, &mut c),
        )
        .map_err(|e| to_py(py, e))
    }

    /// [`locked`](Self::locked) with the GIL released, for work over many entries.
    fn detached<R: Send>(
        &self,
        py: Python<'_>,
        method: &'static str,
        f: impl FnOnce(&mut DispatchCore, &mut Cursor) -> Result<R, CoreError> + Send,
    ) -> PyResult<R> {
        let (mine, theirs) = (self.core.get().cell(), self.cursor.get().cell());
        sync::guarded(py, method, || {
            let mut d = lock(mine);
            let mut c = lock(theirs);
            f(&mut d, &mut c)
        })
        .map_err(|e| to_py(py, e))
    }

    /// The shared `AckResult` of an outcome: the usual ones (`k` acked, nothing else) from a
    /// table without a lock, others from a map (made once; the first few thousand kept).
    #[inline]
    fn result(&self, py: Python<'_>, o: Outcome) -> PyResult<Py<PyAny>> {
        if let (k, 0, 0, 0, 0) = o {
            if let Some(cell) = PLAIN_RESULTS.get(k as usize) {
                return cell
                    .get_or_try_init(py, || make_result(py, o))
                    .map(|r| r.clone_ref(py));
            }
        }
        if let Some(found) = lock(&self.results).get(&o) {
            return Ok(found.clone_ref(py));
        }
        let made = make_result(py, o)?;
        let mut kept = lock(&self.results);
        if kept.len() < RESULTS_KEPT {
            kept.insert(o, made.clone_ref(py));
        }
        Ok(made)
    }

    /// A hook if one is set (the atomic keeps the common no-hook case off the mutex).
    #[inline]
    fn hook(
        &self,
        py: Python<'_>,
        set: &AtomicBool,
        slot: &Mutex<Option<Py<PyAny>>>,
    ) -> Option<Py<PyAny>> {
        if !set.load(Ordering::Acquire) {
            return None;
        }
        lock(slot).as_ref().map(|h| h.clone_ref(py))
    }

    /// Whether the PIP-299 policy wants a look after acks (a policy without the flag always does).
    fn policy_watching(py: Python<'_>, policy: &Bound<'_, PyAny>) -> PyResult<bool> {
        match policy.getattr(intern!(py, "checks_acks")) {
            Ok(flag) => flag.is_truthy(),
            Err(_) => Ok(true),
        }
    }

    /// PIP-299: the policy re-checks the cursor after an ack (skipped while it is off and unpaused).
    fn after_ack(&self, py: Python<'_>) -> PyResult<()> {
        if let Some(policy) = self.hook(py, &self.has_policy, &self.policy) {
            let policy = policy.bind(py);
            if Self::policy_watching(py, policy)? {
                policy.call_method1(
                    intern!(py, "after_ack"),
                    (self.cursor.clone_ref(py), intern!(py, "Key_Shared")),
                )?;
            }
        }
        Ok(())
    }

    /// Whether the PIP-299 policy pauses reads of new entries now.
    fn paused(&self, py: Python<'_>) -> PyResult<bool> {
        let Some(policy) = self.hook(py, &self.has_policy, &self.policy) else {
            return Ok(false);
        };
        let policy = policy.bind(py);
        if !Self::policy_watching(py, policy)? {
            return Ok(false);
        }
        policy
            .call_method1(
                intern!(py, "should_pause"),
                (self.cursor.clone_ref(py), intern!(py, "Key_Shared")),
            )?
            .is_truthy()
    }

    /// Pulsar 4's look-ahead limit for `consumers` consumers.
    fn limit_for(&self, consumers: u64) -> u64 {
        let [per_c, per_s, max_c, max_s] = self
            .look_ahead
            .each_ref()
            .map(|a| a.load(Ordering::Relaxed));
        let limit = if per_c > 0 {
            let l = per_c.saturating_mul(consumers);
            if per_s > 0 {
                l.min(per_s)
            } else {
                l
            }
        } else {
            per_s
        };
        if limit > 0 {
            return limit;
        }
        let by_consumers = consumers.saturating_mul(max_c);
        [max_s, by_consumers]
            .into_iter()
            .filter(|&c| c > 0)
            .min()
            .unwrap_or(UNLIMITED)
    }

    /// Due delayed messages join the replay queue (they are older than anything read since).
    fn take_due(&self, py: Python<'_>) -> PyResult<()> {
        let Some(delayed) = self.hook(py, &self.has_delayed, &self.delayed) else {
            return Ok(());
        };
        let due = delayed
            .bind(py)
            .call_method1(intern!(py, "get_scheduled_messages"), (1i64 << 31,))?;
        let (ls, es) = pairs(&due)?;
        if ls.is_empty() {
            return Ok(());
        }
        self.locked(py, "dispatch", |d, c| d.release_delayed(&ls, &es, c))?;
        Ok(())
    }

    /// A dispatch's deliveries (the GIL released when much is waiting).
    fn deliveries(&self, py: Python<'_>) -> PyResult<Dispatched> {
        self.take_due(py)?;
        let waiting = self.core.get().lock(py).waiting();
        if waiting > SMALL {
            self.detached(py, "dispatch", |d, c| d.dispatch_packed(c))
        } else {
            self.locked(py, "dispatch", |d, c| d.dispatch_packed(c))
        }
    }

    /// A read (columns), the entries a delayed-delivery tracker takes held back in one call to it.
    ///
    /// Each id column comes with the caller's array when it was read without a copy: the tracker
    /// gets that array itself rather than a copy.
    fn read<'py>(
        &self,
        py: Python<'py>,
        (ls, ls_given): (&[i64], Option<Bound<'py, PyAny>>),
        (es, es_given): (&[i64], Option<Bound<'py, PyAny>>),
        slots: &[i64],
        deliver_at: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<()> {
        let delayed = match deliver_at.filter(|d| !d.is_none()) {
            Some(at) => self
                .hook(py, &self.has_delayed, &self.delayed)
                .map(|d| (d, at)),
            None => None,
        };
        let Some((tracker, at)) = delayed else {
            return self.locked(py, "add_read", |d, c| d.add_read(ls, es, slots, c));
        };
        let at_column = column(at, "deliver_at")?;
        let at_given = at_column.borrowed();
        let at = at_column.as_slice();
        if at.len() != ls.len() || slots.len() != ls.len() || es.len() != ls.len() {
            return Err(error(
                py,
                "InvalidArgument",
                format!(
                    "positions, slots and deliver_at differ in length: {}, {}, {}",
                    ls.len(),
                    slots.len(),
                    at.len()
                ),
            ));
        }
        if ls.is_empty() {
            return Ok(());
        }
        if self.core.get().lock(py).is_empty() {
            // Nobody to hold them for: the core releases the read (and the broker reads it again).
            return self.locked(py, "add_read", |d, c| d.add_read(ls, es, slots, c));
        }
        check_slots(py, slots)?;
        let tracker = tracker.bind(py);
        let (held, kept) = match native_tracker(tracker)? {
            Some(native) => native.get().add_many_words(py, ls, es, at)?,
            None => {
                let array = |given: Option<Bound<'py, PyAny>>, v: &[i64]| {
                    given.unwrap_or_else(|| PyArray1::from_slice(py, v).into_any())
                };
                let mask = tracker.call_method1(
                    intern!(py, "add_many"),
                    (
                        array(ls_given, ls),
                        array(es_given, es),
                        array(at_given, at),
                    ),
                )?;
                pack_bits(&bools(&mask, ls.len())?, |&h| h)
            }
        };
        // The core splits the read by the held bits: no column of either side built here.
        self.locked(py, "add_read", |d, c| {
            if kept == 0 {
                d.add_read(ls, es, slots, c)
            } else {
                d.add_read_split(ls, es, slots, &held, c)
            }
        })
    }
}

/// The native in-memory tracker behind `tracker` when its `add_many` is the native one (a
/// subclass that overrides it is called through Python, as any other tracker is).
fn native_tracker<'a, 'py>(
    tracker: &'a Bound<'py, PyAny>,
) -> PyResult<Option<&'a Bound<'py, PyInMemoryTrackerState>>> {
    let Ok(native) = tracker.cast::<PyInMemoryTrackerState>() else {
        return Ok(None);
    };
    let py = tracker.py();
    let name = intern!(py, "add_many");
    let own = tracker.get_type().getattr(name)?;
    let base = py.get_type::<PyInMemoryTrackerState>().getattr(name)?;
    Ok(own.is(&base).then_some(native))
}

#[cold]
fn unknown_consumer(consumer: &Bound<'_, PyAny>) -> PyErr {
    let py = consumer.py();
    let shown = consumer
        .getattr(intern!(py, "name"))
        .unwrap_or_else(|_| consumer.clone())
        .repr()
        .map_or_else(|_| "?".to_owned(), |r| r.to_string());
    error(
        py,
        "UnknownConsumer",
        format!("consumer {shown} is not registered"),
    )
}

fn check_slots(py: Python<'_>, slots: &[i64]) -> PyResult<()> {
    if slots.iter().all(|&s| (1..=65535).contains(&s)) {
        Ok(())
    } else {
        Err(error(
            py,
            "InvalidArgument",
            "slots must be in 1..=65535 (sticky-key hash slots)".to_owned(),
        ))
    }
}

/// `(ledgers, entries)` of an `(n, 2)` int64 array or a sequence of `(ledger, entry)` rows.
fn pairs(obj: &Bound<'_, PyAny>) -> PyResult<(Vec<i64>, Vec<i64>)> {
    if let Ok(arr) = obj.extract::<PyReadonlyArray2<'_, i64>>() {
        let view = arr.as_array();
        if view.ncols() == 2 {
            let ls = view.column(0).to_vec();
            let es = view.column(1).to_vec();
            return Ok((ls, es));
        }
        if view.nrows() == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
    }
    let mut ls = Vec::new();
    let mut es = Vec::new();
    for row in obj.try_iter()? {
        let (l, e): (i64, i64) = row?.extract()?;
        ls.push(l);
        es.push(e);
    }
    Ok((ls, es))
}

/// A tracker's `add_many` mask as booleans (numpy bool array or any sequence of truths).
fn bools(obj: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<bool>> {
    let out: Vec<bool> = match obj.cast::<PyArray1<bool>>() {
        Ok(arr) => match arr.to_vec() {
            Ok(v) => v,
            Err(_) => arr.readonly().as_array().to_vec(), // not contiguous
        },
        Err(_) => obj
            .try_iter()?
            .map(|v| v.and_then(|v| v.is_truthy()))
            .collect::<PyResult<_>>()?,
    };
    if out.len() != n {
        return Err(error(
            obj.py(),
            "InvalidArgument",
            format!(
                "the tracker's add_many returned {} flags for {n} messages",
                out.len()
            ),
        ));
    }
    Ok(out)
}

fn mode_of(py: Python<'_>, mode: Option<&Bound<'_, PyAny>>) -> PyResult<DispatchMode> {
    let Some(mode) = mode.filter(|m| !m.is_none()) else {
        return Ok(DispatchMode::Draining);
    };
    let text = str_arg(mode, "mode").ok();
    match text.as_deref() {
        Some("draining") => Ok(DispatchMode::Draining),
        Some("last-sent") => Ok(DispatchMode::LastSent),
        Some("out-of-order") => Ok(DispatchMode::OutOfOrder),
        _ => Err(error(
            py,
            "InvalidArgument",
            format!(
                "mode must be one of draining, last-sent, out-of-order, got {}",
                mode.repr()
                    .map_or_else(|_| "?".to_owned(), |r| r.to_string())
            ),
        )),
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
        let mode = mode_of(py, mode)?;
        let cursor = cursor.cast::<PyCursorState>().map_err(|_| {
            error(
                py,
                "InvalidInputType",
                format!(
                    "cursor must be a cursorkit.Cursor, got {}",
                    type_name(cursor)
                ),
            )
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
    )
}
