//! `cursorkit._core.InMemoryTrackerState`: Pulsar's in-memory tracker rules behind a mutex in a
//! frozen pyclass.
//!
//! The tracker reads its clock here (a Python callable, or the system clock when none is given),
//! once per call that needs `now`, before taking the lock, so a clock may call back into the
//! tracker. `cursorkit.delayed.InMemoryDelayedDeliveryTracker` subclasses `InMemoryTrackerState`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use cursorkit_core::{check_entry, InMemoryTracker};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt};

use super::delay_queue::{count_arg, same_length, time_arg, time_column, SMALL_POP};
use crate::args::{bool_arg, column, int_arg};
use crate::errors::{IntoPy, InvalidArgument, InvalidInputType, TrackerClosed};
use crate::sync;

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
