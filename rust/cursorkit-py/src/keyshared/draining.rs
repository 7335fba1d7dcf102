//! `cursorkit._core.DrainingHashes`: PIP-379's draining-hash state, a core value behind a mutex in
//! a frozen pyclass, and the row helpers the dispatch core's binding shares.
//!
//! Single calls keep the GIL (they are O(1) or O(log n)); bulk calls borrow numpy columns, release
//! the GIL and check every value before the core changes anything, so bad input changes nothing
//! (`should_block_many` then gates in chunks, without column-sized copies). Rows come back as
//! `(n, 4)` int64 arrays that take over the Rust buffer.

use std::sync::Mutex;

use cursorkit_core::{CoreError, DrainingHash, DrainingHashes};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args::{bool_arg, column, int_arg, u32_arg};
use crate::errors::{IntoPy, InvalidArgument, LengthMismatch};
use crate::sync::{self, Shared};

/// A sticky-key hash argument: an int in `1..=65535`, else `InvalidArgument` (or `InvalidInputType`).
fn hash_arg(obj: &Bound<'_, PyAny>) -> PyResult<u32> {
    let v = int_arg(obj, "hash")?;
    match u32::try_from(v) {
        Ok(h) if (1..=DrainingHashes::MAX_HASH).contains(&h) => Ok(h),
        _ => Err(InvalidArgument::new_err(hash_message(v))),
    }
}

/// An optional `closing` flag (default False); anything but a bool is `InvalidInputType`.
fn closing_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
    obj.filter(|o| !o.is_none())
        .map_or(Ok(false), |o| bool_arg(o, "closing"))
}

/// Long gate columns are converted and gated this many rows at a time (no column-sized copies).
const CHUNK: usize = 4096;

/// Checks that every value of a column lies in `range` (one vectorisable pass), else
/// `InvalidArgument` from `message` of the first value outside it.
fn check_range(
    values: &[i64],
    range: std::ops::RangeInclusive<i64>,
    message: impl Fn(i64) -> String,
) -> Result<(), CoreError> {
    let (lo, hi) = (*range.start(), *range.end());
    if values.iter().all(|&v| (v >= lo) & (v <= hi)) {
        return Ok(());
    }
    let bad = values.iter().copied().find(|v| !range.contains(v));
    Err(CoreError::InvalidArgument(message(bad.unwrap_or_default())))
}

/// The message of a hash outside `1..=65535` (the core's wording).
fn hash_message(v: i64) -> String {
    format!("sticky key hash {v} is outside 1..=65535 (0 means not set)")
}

/// Hash slots of a column, checked to lie in `1..=65535`.
fn hash_values(values: &[i64]) -> Result<Vec<u32>, CoreError> {
    check_range(
        values,
        1..=i64::from(DrainingHashes::MAX_HASH),
        hash_message,
    )?;
    Ok(values.iter().map(|&v| v as u32).collect())
}

/// Columns of one length, or `LengthMismatch` naming each length.
fn same_length(names: &[&str], lens: &[usize]) -> PyResult<()> {
    if lens.windows(2).all(|w| matches!(w, [a, b] if a == b)) {
        return Ok(());
    }
    let shown: Vec<String> = names
        .iter()
        .zip(lens)
        .map(|(n, l)| format!("{l} {n}"))
        .collect();
    Err(LengthMismatch::new_err(format!(
        "columns differ in length: {}",
        shown.join(", ")
    )))
}

/// An `(n, 4)` int64 array over a flat row-major buffer, without copying it.
pub(crate) fn rows_array(py: Python<'_>, flat: Vec<i64>) -> PyResult<Bound<'_, PyAny>> {
    let n = flat.len() / 4;
    Ok(PyArray1::from_vec(py, flat).reshape([n, 4])?.into_any())
}

/// `(hash, owner, unacked, blocked_attempts)` rows, flat.
pub(crate) fn draining_rows(entries: &[DrainingHash]) -> Vec<i64> {
    entries
        .iter()
        .flat_map(|e| {
            [
                i64::from(e.hash),
                i64::from(e.owner),
                i64::from(e.unacked),
                i64::try_from(e.blocked_attempts).unwrap_or(i64::MAX),
            ]
        })
        .collect()
}

/// PIP-379's draining hashes of a Key_Shared subscription: hash → (owner, references, blocked).
#[pyclass(name = "DrainingHashes", module = "cursorkit._core", frozen)]
pub struct PyDrainingHashes {
    inner: Mutex<DrainingHashes>,
}

crate::shared!(PyDrainingHashes, DrainingHashes, "DrainingHashes");

#[pymethods]
impl PyDrainingHashes {
    #[new]
    fn new() -> Self {
        Self {
            inner: Mutex::new(DrainingHashes::new()),
        }
    }

    /// Registers one pending message of `hash` on `consumer` (creates the entry or adds a
    /// reference); a hash draining on another consumer is `InvalidArgument`.
    fn add_entry(&self, consumer: &Bound<'_, PyAny>, hash: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let h = hash_arg(hash)?;
        self.call(py, "add_entry", |d| d.add_entry(c, h))
    }

    /// `add_entry` for every hash of a column (repeats add references); all or nothing.
    fn add_entries(&self, consumer: &Bound<'_, PyAny>, hashes: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let hs = column(hashes, "hashes")?;
        let hs = hs.as_slice();
        sync::detached(py, &self.inner, |d| d.add_entries(c, &hash_values(hs)?)).py_err(py)
    }

    /// Drops one reference (an ack; `closing`: a leaving consumer's redelivery). True when the
    /// entry went and had blocked another consumer (not while closing): Pulsar's unblock signal.
    #[pyo3(signature = (consumer, hash, closing = None), text_signature = "($self, consumer, hash, closing=False)")]
    fn reduce_ref(
        &self,
        consumer: &Bound<'_, PyAny>,
        hash: &Bound<'_, PyAny>,
        closing: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let h = hash_arg(hash)?;
        let closing = closing_arg(closing)?;
        self.call(py, "reduce_ref", |d| d.reduce_ref(c, h, closing))
    }

    /// `reduce_ref` for every hash of a column; returns the unblocked hashes (int64 array).
    #[pyo3(signature = (consumer, hashes, closing = None), text_signature = "($self, consumer, hashes, closing=False)")]
    fn reduce_refs<'py>(
        &self,
        consumer: &Bound<'py, PyAny>,
        hashes: &Bound<'py, PyAny>,
        closing: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let closing = closing_arg(closing)?;
        let hs = column(hashes, "hashes")?;
        let hs = hs.as_slice();
        let unblocked = sync::detached(py, &self.inner, |d| {
            d.reduce_refs(c, &hash_values(hs)?, closing)
        })
        .py_err(py)?;
        let out: Vec<i64> = unblocked.into_iter().map(i64::from).collect();
        Ok(PyArray1::from_vec(py, out).into_any())
    }

    /// PIP-379's gate: True blocks dispatching `hash` to `target` (it drains on another consumer;
    /// counted). The owner itself reclaims the hash: its entry goes, False.
    fn should_block(&self, target: &Bound<'_, PyAny>, hash: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = target.py();
        let t = u32_arg(target, "target")?;
        let h = hash_arg(hash)?;
        self.call(py, "should_block", |c| c.should_block(t, h))
    }

    /// `should_block` for each `(targets[i], hashes[i])` in order, as a bool array.
    fn should_block_many<'py>(
        &self,
        targets: &Bound<'py, PyAny>,
        hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = targets.py();
        let ts = column(targets, "targets")?;
        let hs = column(hashes, "hashes")?;
        let (ts, hs) = (ts.as_slice(), hs.as_slice());
        same_length(&["targets", "hashes"], &[ts.len(), hs.len()])?;
        let out = sync::detached(py, &self.inner, |d| {
            check_range(ts, 0..=i64::from(u32::MAX), |v| {
                format!("targets holds {v}, outside 0..2^32")
            })?;
            check_range(hs, 1..=i64::from(DrainingHashes::MAX_HASH), hash_message)?;
            let mut out = Vec::with_capacity(hs.len());
            let (mut tb, mut hb) = (Vec::with_capacity(CHUNK), Vec::with_capacity(CHUNK));
            for (tc, hc) in ts.chunks(CHUNK).zip(hs.chunks(CHUNK)) {
                tb.clear();
                tb.extend(tc.iter().map(|&v| v as u32));
                hb.clear();
                hb.extend(hc.iter().map(|&v| v as u32));
                d.should_block_into(&tb, &hb, &mut out)?;
            }
            Ok::<_, CoreError>(out)
        })
        .py_err(py)?;
        Ok(PyArray1::from_vec(py, out).into_any())
    }

    /// The consumer a hash drains on, or None.
    fn owner(&self, hash: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
        let py = hash.py();
        let h = hash_arg(hash)?;
        self.call(py, "owner", |c| c.owner(h))
    }

    /// `(owner, unacked, blocked_attempts)` of a draining hash, or None.
    fn entry(&self, hash: &Bound<'_, PyAny>) -> PyResult<Option<(u32, u32, u64)>> {
        let py = hash.py();
        let h = hash_arg(hash)?;
        let e = self.call(py, "entry", |c| c.entry(h))?;
        Ok(e.map(|e| (e.owner, e.unacked, e.blocked_attempts)))
    }

    /// Drops a consumer's draining hashes and statistics; returns `(hashes, unblocked)`: an int64
    /// array ascending and a bool array marking those that had blocked others (never if closing).
    #[pyo3(signature = (consumer, closing = None), text_signature = "($self, consumer, closing=True)")]
    fn remove_consumer<'py>(
        &self,
        consumer: &Bound<'py, PyAny>,
        closing: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let closing = match closing.filter(|o| !o.is_none()) {
            None => true,
            Some(o) => bool_arg(o, "closing")?,
        };
        let removed = sync::detached(py, &self.inner, |d| d.remove_consumer(c, closing));
        let hashes: Vec<i64> = removed.hashes.into_iter().map(i64::from).collect();
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, hashes).into_any(),
                PyArray1::from_vec(py, removed.unblocked).into_any(),
            ],
        )
    }

    /// Forgets every hash and consumer statistic (all consumers gone); counters stay.
    fn clear(&self, py: Python<'_>) {
        self.lock(py).clear();
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).len()
    }

    /// One consumer's Pulsar 4 statistics: `draining_hashes_count` (drainingHashesCount),
    /// `draining_hashes_cleared_total`, `draining_hashes_unacked_messages`; zeros if unknown.
    fn consumer_stats<'py>(&self, consumer: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let py = consumer.py();
        let c = u32_arg(consumer, "consumer")?;
        let s = self.lock(py).consumer_stats(c);
        stats_dict(py, s)
    }

    /// `{consumer: consumer_stats(consumer)}` for every consumer with a record.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let all = self.lock(py).consumers_stats();
        let d = PyDict::new(py);
        for (c, s) in all {
            d.set_item(c, stats_dict(py, s)?)?;
        }
        Ok(d)
    }

    /// Draining hashes as an `(n, 4)` int64 array of `(hash, owner, unacked, blocked_attempts)`
    /// rows, ascending by hash; only `consumer`'s when given (Pulsar's `drainingHashes`).
    #[pyo3(signature = (consumer = None))]
    fn draining_hashes<'py>(
        &self,
        py: Python<'py>,
        consumer: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let owner = match consumer.filter(|o| !o.is_none()) {
            None => None,
            Some(o) => Some(u32_arg(o, "consumer")?),
        };
        let flat = sync::detached(py, &self.inner, |d| draining_rows(&d.entries(owner)));
        rows_array(py, flat)
    }

    /// Lifetime counts: `blocked_attempts`, `unblocked`, `cleared`, `stale_reductions`.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.lock(py).counters();
        let d = PyDict::new(py);
        d.set_item("blocked_attempts", c.blocked_attempts)?;
        d.set_item("unblocked", c.unblocked)?;
        d.set_item("cleared", c.cleared)?;
        d.set_item("stale_reductions", c.stale_reductions)?;
        Ok(d)
    }

    /// Exact heap bytes held (capacities, not lengths).
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let d = self.lock(py);
        format!(
            "<DrainingHashes hashes={} consumers={} memory={} B>",
            d.len(),
            d.consumers_stats().len(),
            d.memory_usage()
        )
    }
}

fn stats_dict(
    py: Python<'_>,
    s: cursorkit_core::ConsumerDrainingStats,
) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("draining_hashes_count", s.draining_hashes_count)?;
    d.set_item(
        "draining_hashes_cleared_total",
        s.draining_hashes_cleared_total,
    )?;
    d.set_item(
        "draining_hashes_unacked_messages",
        s.draining_hashes_unacked_messages,
    )?;
    Ok(d)
}
