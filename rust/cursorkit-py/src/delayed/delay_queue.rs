//! `cursorkit._core.DelayQueue` and `InMemoryTrackerState`: the core delayed-index queue and
//! Pulsar's in-memory tracker rules, each behind a mutex in a frozen pyclass.
//!
//! The tracker reads its clock here (a Python callable, or the system clock when none is given),
//! once per call that needs `now`, before taking the lock, so a clock may call back into the
//! tracker. `cursorkit.delayed.InMemoryDelayedDeliveryTracker` subclasses `InMemoryTrackerState`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use cursorkit_core::{check_entry, DelayQueue, InMemoryTracker, Popped};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyTuple};

use crate::ackstate::rangeset::PyRangeSet;
use crate::args::{bool_arg, column, int_arg, limit_arg, Column};
use crate::errors::{
    IntoPy, InvalidArgument, InvalidInputType, InvalidPosition, LengthMismatch, TrackerClosed,
};
use crate::sync::{self, Shared};

/// Pops of at most this many indexes run with the GIL held (cheaper than releasing it).
const SMALL_POP: usize = 1024;

/// A time or count argument: a non-integer is `InvalidInputType`, one beyond int64 `InvalidArgument`.
#[inline]
fn time_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    match obj.extract::<i64>() {
        Ok(v) if !obj.is_instance_of::<PyBool>() => Ok(v),
        _ => Err(time_arg_error(obj, what)),
    }
}

#[cold]
fn time_arg_error(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        InvalidArgument::new_err(format!(
            "{what} {obj} does not fit in a signed 64-bit integer"
        ))
    } else {
        match int_arg(obj, what) {
            Err(e) => e,
            Ok(_) => InvalidInputType::new_err(format!("{what} must be an int")),
        }
    }
}

/// A column of delivery times: like an id column, but a value beyond int64 is `InvalidArgument`.
fn time_column<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Column<'py>> {
    let py = obj.py();
    column(obj, what).map_err(|e| {
        if e.is_instance_of::<InvalidPosition>(py) {
            InvalidArgument::new_err(e.value(py).to_string())
        } else {
            e
        }
    })
}

/// A required count (`0..`); None and non-integers are `InvalidInputType`, negatives `InvalidArgument`.
fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if obj.is_none() {
        return Err(InvalidInputType::new_err(format!(
            "{what} must be an int, got None"
        )));
    }
    let n = limit_arg(Some(obj), what)?.unwrap_or(u64::MAX);
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Three columns of one length, or `LengthMismatch` naming the three lengths.
fn same_length(names: [&str; 3], cols: [&[i64]; 3]) -> PyResult<()> {
    if cols[0].len() == cols[1].len() && cols[1].len() == cols[2].len() {
        return Ok(());
    }
    Err(LengthMismatch::new_err(format!(
        "{}, {} and {} differ in length: {}, {} and {} values",
        names[0],
        names[1],
        names[2],
        cols[0].len(),
        cols[1].len(),
        cols[2].len()
    )))
}

/// `(deliver_at, ledger_ids, entry_ids)` arrays taking over the popped columns without copying.
fn popped_arrays(py: Python<'_>, p: Popped) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(
        py,
        [
            PyArray1::from_vec(py, p.at).into_any(),
            PyArray1::from_vec(py, p.ledgers).into_any(),
            PyArray1::from_vec(py, p.entries).into_any(),
        ],
    )
}

/// Delayed message indexes `(deliver_at, ledger, entry)`, unique by position, popped in order.
#[pyclass(name = "DelayQueue", module = "cursorkit._core", frozen)]
pub struct PyDelayQueue {
    inner: Mutex<DelayQueue>,
}

crate::shared!(PyDelayQueue, DelayQueue, "DelayQueue");

impl PyDelayQueue {
    /// Pops up to `max` indexes `<= limit`; small pops keep the GIL, large ones release it.
    fn pop(&self, py: Python<'_>, limit: (i64, i64, i64), max: usize) -> Popped {
        let pop = move |q: &mut DelayQueue| {
            let mut out = Popped::with_capacity(max.min(q.len() as usize));
            q.pop_until(limit, max, &mut out);
            out
        };
        if max <= SMALL_POP {
            pop(&mut self.lock(py))
        } else {
            sync::detached(py, &self.inner, pop)
        }
    }
}

#[pymethods]
impl PyDelayQueue {
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(DelayQueue::new()),
        }
    }

    /// Queues one index; False when the position is already queued (the first time wins).
    fn add(
        &self,
        deliver_at: &Bound<'_, PyAny>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = deliver_at.py();
        let at = time_arg(deliver_at, "deliver_at")?;
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        self.call(py, "add", |c| c.add(at, l, e))
    }

    /// Queues many indexes from numpy/Arrow columns or sequences; returns how many were new.
    fn add_many(
        &self,
        deliver_at: &Bound<'_, PyAny>,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = deliver_at.py();
        let ats = time_column(deliver_at, "deliver_at")?;
        let ls = column(ledger_ids, "ledger_ids")?;
        let es = column(entry_ids, "entry_ids")?;
        let (ats, ls, es) = (ats.as_slice(), ls.as_slice(), es.as_slice());
        same_length(["deliver_at", "ledger_ids", "entry_ids"], [ats, ls, es])?;
        sync::detached(py, &self.inner, |q| q.add_many(ats, ls, es)).py_err(py)
    }

    /// Whether the position is queued.
    fn contains(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        check_entry(l, e).py_err(py)?;
        Ok(self.lock(py).contains(l, e))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).len() as usize
    }

    /// The smallest queued `(deliver_at, ledger_id, entry_id)`, or None.
    fn peek(&self, py: Python<'_>) -> Option<(i64, i64, i64)> {
        self.lock(py).peek()
    }

    /// Pops, in order, up to `max_items` indexes at or before `(deliver_at, ledger_id, entry_id)`
    /// (compared as tuples); returns `(deliver_at, ledger_ids, entry_ids)` int64 arrays.
    fn pop_until<'py>(
        &self,
        deliver_at: &Bound<'py, PyAny>,
        ledger_id: &Bound<'py, PyAny>,
        entry_id: &Bound<'py, PyAny>,
        max_items: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = deliver_at.py();
        let limit = (
            time_arg(deliver_at, "deliver_at")?,
            int_arg(ledger_id, "ledger_id")?,
            int_arg(entry_id, "entry_id")?,
        );
        let max = count_arg(max_items, "max_items")?;
        popped_arrays(py, self.pop(py, limit, max))
    }

    /// Pops, in order, up to `max_items` indexes with `deliver_at <= cutoff`.
    fn pop_due<'py>(
        &self,
        cutoff: &Bound<'py, PyAny>,
        max_items: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = cutoff.py();
        let cutoff = time_arg(cutoff, "cutoff")?;
        let max = count_arg(max_items, "max_items")?;
        popped_arrays(py, self.pop(py, (cutoff, i64::MAX, i64::MAX), max))
    }

    /// Removes and returns every index in order, as three int64 arrays.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let all = sync::detached(py, &self.inner, |q| q.drain());
        popped_arrays(py, all)
    }

    /// Drops the indexes of ledgers below `ledger_id` (at or below mark-delete); returns how many.
    fn remove_ledgers_below(&self, ledger_id: &Bound<'_, PyAny>) -> PyResult<u64> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        Ok(sync::detached(py, &self.inner, |q| {
            q.remove_ledgers_below(l)
        }))
    }

    /// Pops head indexes whose position `tracked` no longer holds; returns how many went.
    fn drop_untracked(&self, tracked: &Bound<'_, PyRangeSet>) -> u64 {
        let py = tracked.py();
        let set = tracked.get().lock(py);
        let mut q = self.lock(py);
        q.drop_stale_heads(|l, e| !matches!(set.contains(l, e), Ok(true)))
    }

    /// Drops everything and releases the memory.
    fn clear(&self, py: Python<'_>) {
        self.lock(py).clear();
    }

    /// Heap bytes held (vectors, maps, bitmaps; capacities, not lengths).
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let q = self.lock(py);
        format!(
            "<DelayQueue len={} ledgers={} memory={} B>",
            q.len(),
            q.ledger_count(),
            q.memory_usage()
        )
    }
}

/// A keyword argument that was given and is not None.
fn present<'py>(o: Option<&Bound<'py, PyAny>>) -> Option<Bound<'py, PyAny>> {
    o.filter(|v| !v.is_none()).cloned()
}

/// Milliseconds since the Unix epoch from the system clock.
fn system_now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// Pulsar's in-memory delayed-delivery tracker state: the rules in Rust, the clock injectable.
#[pyclass(
    name = "InMemoryTrackerState",
    module = "cursorkit._core",
    frozen,
    subclass
)]
pub struct PyInMemoryTrackerState {
    inner: Mutex<InMemoryTracker>,
    /// Set (under the lock) by `close()`; read without it as a fast first check.
    closed: AtomicBool,
    clock: Option<Py<PyAny>>,
}

impl PyInMemoryTrackerState {
    #[inline]
    fn check_open(&self) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed_error());
        }
        Ok(())
    }

    /// The tracker, locked, or `TrackerClosed`.
    #[inline]
    fn open(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, InMemoryTracker>> {
        self.check_open()?;
        let guard = sync::lock(py, &self.inner);
        self.check_open()?;
        Ok(guard)
    }

    /// Runs `f` on the open tracker with the GIL released.
    fn detached<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut InMemoryTracker) -> T + Send,
    ) -> PyResult<T> {
        let closed = &self.closed;
        sync::detached(py, &self.inner, |t| {
            (!closed.load(Ordering::Acquire)).then(|| f(t))
        })
        .ok_or_else(closed_error)
    }

    /// A dispatcher's read handed over in one call: the tracker's `add_many` as bit words of what
    /// it holds and how many (what `add_many` returns as a bool array, with no array built).
    pub(crate) fn add_many_words(
        &self,
        py: Python<'_>,
        ledgers: &[i64],
        entries: &[i64],
        ats: &[i64],
    ) -> PyResult<(Vec<u64>, usize)> {
        self.check_open()?;
        let now = self.read_clock(py)?;
        self.detached(py, |t| t.add_many_words(ledgers, entries, ats, now))?
            .py_err(py)
    }

    /// Reads the clock (ms): the Python callable, or the system clock.
    #[inline]
    fn read_clock(&self, py: Python<'_>) -> PyResult<i64> {
        match &self.clock {
            None => Ok(system_now_ms()),
            Some(clock) => {
                let v = clock.bind(py).call0()?;
                match v.extract::<i64>() {
                    Ok(ms) if !v.is_instance_of::<PyBool>() => Ok(ms),
                    _ => Err(clock_error(&v)),
                }
            }
        }
    }

    /// `now`, checking first that the tracker is open (a closed tracker never calls its clock).
    #[inline]
    fn now_open(&self, py: Python<'_>) -> PyResult<i64> {
        self.check_open()?;
        self.read_clock(py)
    }

    /// Pops due messages; small requests keep the GIL, large ones release it.
    fn scheduled(&self, py: Python<'_>, max: usize, now: i64) -> PyResult<Vec<(i64, i64)>> {
        if max <= SMALL_POP {
            Ok(self.open(py)?.get_scheduled(max, now))
        } else {
            self.detached(py, |t| t.get_scheduled(max, now))
        }
    }
}

#[cold]
fn closed_error() -> PyErr {
    TrackerClosed::new_err("the delayed-delivery tracker is closed".to_owned())
}

#[cold]
fn clock_error(v: &Bound<'_, PyAny>) -> PyErr {
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        InvalidArgument::new_err(format!(
            "the clock returned {v}, beyond the int64 range of milliseconds"
        ))
    } else {
        let shown = v.repr().map_or_else(|_| "?".to_owned(), |r| r.to_string());
        let type_name = v
            .get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string());
        InvalidInputType::new_err(format!(
            "the clock must return an int (ms), got {type_name} {shown}"
        ))
    }
}

#[pymethods]
impl PyInMemoryTrackerState {
    #[new]
    #[pyo3(
        signature = (*, tick_time_ms = None, strict = None, fixed_delay_lookahead = None, clock = None, **_config),
        text_signature = "(*, tick_time_ms=1000, strict=False, fixed_delay_lookahead=50000, clock=None, **_config)"
    )]
    fn new(
        py: Python<'_>,
        tick_time_ms: Option<&Bound<'_, PyAny>>,
        strict: Option<&Bound<'_, PyAny>>,
        fixed_delay_lookahead: Option<&Bound<'_, PyAny>>,
        clock: Option<&Bound<'_, PyAny>>,
        _config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let tick = present(tick_time_ms).map_or(Ok(1000), |t| time_arg(&t, "tick_time_ms"))?;
        let strict = present(strict).map_or(Ok(false), |s| bool_arg(&s, "strict"))?;
        let lookahead = present(fixed_delay_lookahead)
            .map_or(Ok(50_000), |l| time_arg(&l, "fixed_delay_lookahead"))?;
        let clock = match present(clock) {
            None => None,
            Some(c) if c.is_callable() => Some(c.unbind()),
            Some(c) => {
                let type_name = c
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string());
                return Err(InvalidInputType::new_err(format!(
                    "clock must be a zero-argument callable returning ms, got {type_name}"
                )));
            }
        };
        let tracker = InMemoryTracker::new(tick, strict, lookahead).py_err(py)?;
        Ok(Self {
            inner: Mutex::new(tracker),
            closed: AtomicBool::new(false),
            clock,
        })
    }

    /// Tracks one message; False means "deliver it now" (deliver_at negative or already due).
    fn add_message(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        deliver_at: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        self.check_open()?;
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        let at = time_arg(deliver_at, "deliver_at")?;
        let now = self.read_clock(py)?;
        self.open(py)?.add(l, e, at, now).py_err(py)
    }

    /// Tracks many messages (columns); returns a bool array: True = tracked, False = deliver now.
    fn add_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        deliver_at: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_ids.py();
        self.check_open()?;
        let ls = column(ledger_ids, "ledger_ids")?;
        let es = column(entry_ids, "entry_ids")?;
        let ats = time_column(deliver_at, "deliver_at")?;
        let (ls, es, ats) = (ls.as_slice(), es.as_slice(), ats.as_slice());
        same_length(["ledger_ids", "entry_ids", "deliver_at"], [ls, es, ats])?;
        let now = self.read_clock(py)?;
        let mask = self
            .detached(py, |t| t.add_many_mask(ls, es, ats, now))?
            .py_err(py)?;
        Ok(PyArray1::from_vec(py, mask).into_any())
    }

    /// Whether a message is due now.
    fn has_message_available(&self, py: Python<'_>) -> PyResult<bool> {
        let now = self.now_open(py)?;
        Ok(self.open(py)?.has_message_available(now))
    }

    /// Up to `max_messages` due messages as an (n, 2) int64 array of (ledger, entry) rows, sorted
    /// by position (Pulsar returns a sorted set).
    fn get_scheduled_messages<'py>(
        &self,
        max_messages: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = max_messages.py();
        self.check_open()?;
        let max = count_arg(max_messages, "max_messages")?;
        let now = self.read_clock(py)?;
        let pairs = self.scheduled(py, max, now)?;
        let n = pairs.len();
        let flat: Vec<i64> = pairs.into_iter().flat_map(|(l, e)| [l, e]).collect();
        Ok(PyArray1::from_vec(py, flat).reshape([n, 2])?.into_any())
    }

    /// The stored delivery time of the next message, or None when empty.
    fn next_delivery_time(&self, py: Python<'_>) -> PyResult<Option<i64>> {
        Ok(self.open(py)?.next_delivery_time())
    }

    /// Pulsar's fixed-delay pause: every message had the same delay, at least the lookahead
    /// number are held and none is due.
    fn should_pause_all_deliveries(&self, py: Python<'_>) -> PyResult<bool> {
        let now = self.now_open(py)?;
        Ok(self.open(py)?.should_pause_all_deliveries(now))
    }

    /// Whether the position is held.
    fn contains_message(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        self.check_open()?;
        let l = int_arg(ledger_id, "ledger_id")?;
        let e = int_arg(entry_id, "entry_id")?;
        check_entry(l, e).py_err(py)?;
        Ok(self.open(py)?.contains(l, e))
    }

    /// Number of distinct positions held (Pulsar's getNumberOfDelayedMessages).
    #[getter]
    fn number_of_delayed_messages(&self, py: Python<'_>) -> u64 {
        sync::lock(py, &self.inner).len()
    }

    /// Exact heap bytes of the index (Pulsar's getBufferMemoryUsage).
    #[getter]
    fn buffer_memory_usage(&self, py: Python<'_>) -> usize {
        sync::lock(py, &self.inner).buffer_memory_usage()
    }

    /// The tick (ms): adds due within it are delivered at once.
    #[getter]
    fn tick_time_ms(&self, py: Python<'_>) -> i64 {
        sync::lock(py, &self.inner).tick_ms()
    }

    /// Whether delivery times are strict (never early; cutoff = now).
    #[getter]
    fn strict(&self, py: Python<'_>) -> bool {
        sync::lock(py, &self.inner).strict()
    }

    /// Fixed-delay detection lookahead (0: never pause).
    #[getter]
    fn fixed_delay_lookahead(&self, py: Python<'_>) -> i64 {
        sync::lock(py, &self.inner).lookahead()
    }

    /// Rounding precision of stored delivery times (ms, a power of two, fixed at construction).
    #[getter]
    fn precision_ms(&self, py: Python<'_>) -> i64 {
        sync::lock(py, &self.inner).precision_ms()
    }

    /// Highest deliver_at accepted since the tracker was last empty (0 when empty).
    #[getter]
    fn highest_delivery_time(&self, py: Python<'_>) -> i64 {
        sync::lock(py, &self.inner).highest_delivery_time()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Changes the tick (a topic policy); the rounding precision stays as constructed.
    fn reset_tick_time(&self, tick_time_ms: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = tick_time_ms.py();
        self.check_open()?;
        let tick = time_arg(tick_time_ms, "tick_time_ms")?;
        self.open(py)?.reset_tick_time(tick).py_err(py)
    }

    /// Forgets every message and releases the memory.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.open(py)?.clear();
        Ok(())
    }

    /// Releases the memory; every later call except the properties (and close) raises
    /// `TrackerClosed`. Closing twice is a no-op.
    fn close(&self, py: Python<'_>) {
        let mut t = sync::lock(py, &self.inner);
        t.clear();
        self.closed.store(true, Ordering::Release);
    }

    /// The clock's current reading (ms).
    fn now(&self, py: Python<'_>) -> PyResult<i64> {
        self.now_open(py)
    }

    /// Counts of added, duplicate, refused (due / negative) and delivered messages.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.open(py)?.counters();
        let d = PyDict::new(py);
        d.set_item("added", c.added)?;
        d.set_item("duplicates", c.duplicates)?;
        d.set_item("rejected_due", c.rejected_due)?;
        d.set_item("rejected_negative", c.rejected_negative)?;
        d.set_item("delivered", c.delivered)?;
        Ok(d)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let name = slf.get_type().name()?.to_string();
        let this = slf.get();
        let closed = this.closed.load(Ordering::Acquire);
        let t = sync::lock(py, &this.inner);
        Ok(format!(
            "<{name} delayed={} tick_time_ms={} strict={} closed={}>",
            t.len(),
            t.tick_ms(),
            if t.strict() { "True" } else { "False" },
            if closed { "True" } else { "False" },
        ))
    }
}
