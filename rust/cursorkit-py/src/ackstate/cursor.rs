//! `cursorkit._core.CursorState`: the core `Cursor` behind a mutex, as a subclassable frozen
//! pyclass. `cursorkit.Cursor` subclasses it, so an ack is one call straight into Rust.
//!
//! Errors name the cursor. State for persistence leaves in one locked step (`flush_state`), so
//! what a store writes is always a consistent cut.

use std::collections::BTreeMap;
use std::sync::Mutex;

use cursorkit_core::{check_bound, check_entry, BatchAcks, CoreError, Cursor, Position, RangeSet};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::ackstate::position::{position_arg, PyPosition};
use crate::ackstate::rangeset::{columns, PyRangeSet};
use crate::args::{
    bool_arg, bytes_arg, column, int_arg, ledger_sizes, limit_arg, str_arg, u32_arg,
};
use crate::errors::{to_py, CorruptSnapshot, InvalidArgument, InvalidInputType};
use crate::sync::{self, Shared};

/// Rows `(ledger, entry, batch_size, unacked-index words as little-endian bytes)`.
type BatchRow<'py> = (i64, i64, u32, Bound<'py, PyBytes>);

/// A subscription's ack state (mark-delete, individual acks, partial batches).
#[pyclass(name = "CursorState", module = "cursorkit._core", frozen, subclass)]
pub struct PyCursorState {
    name: String,
    inner: Mutex<Cursor>,
}

crate::shared!(PyCursorState, Cursor, "Cursor");

impl PyCursorState {
    /// The Python exception for a core error, naming this cursor.
    fn err(&self, py: Python<'_>, e: CoreError) -> PyErr {
        let named = match e {
            CoreError::InvalidPosition(m) => CoreError::InvalidPosition(self.named(m)),
            CoreError::InvalidArgument(m) => CoreError::InvalidArgument(self.named(m)),
            CoreError::UnknownLedger(m) => CoreError::UnknownLedger(self.named(m)),
            CoreError::Corrupt(m) => CoreError::Corrupt(self.named(m)),
            other => other,
        };
        to_py(py, named)
    }

    fn named(&self, message: String) -> String {
        format!("cursor {:?}: {message}", self.name)
    }

    fn ok<T>(&self, py: Python<'_>, r: Result<T, CoreError>) -> PyResult<T> {
        r.map_err(|e| self.err(py, e))
    }
}

/// An `(n, 2)` int64 array taking over a flat `[ledger, entry, …]` buffer.
fn pairs_array(py: Python<'_>, flat: Vec<i64>) -> PyResult<Bound<'_, PyAny>> {
    let n = flat.len() / 2;
    Ok(PyArray1::from_vec(py, flat).reshape([n, 2])?.into_any())
}

fn words_le(b: &BatchAcks) -> Vec<u8> {
    b.words().iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn words_bytes<'py>(py: Python<'py>, b: &BatchAcks) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &words_le(b))
}

/// The partial batches as owned rows (taken under the cursor lock, turned into Python later).
fn batch_data(c: &Cursor) -> Vec<(i64, i64, u32, Vec<u8>)> {
    c.batches()
        .map(|(p, b)| (p.ledger_id, p.entry_id, b.size(), words_le(b)))
        .collect()
}

fn batch_rows<'py>(py: Python<'py>, rows: Vec<(i64, i64, u32, Vec<u8>)>) -> Vec<BatchRow<'py>> {
    rows.into_iter()
        .map(|(l, e, n, w)| (l, e, n, PyBytes::new(py, &w)))
        .collect()
}

/// Parses `(ledger, entry, batch_size, words)` rows (`batch_size` 0 = unknown).
fn parse_batches(rows: &Bound<'_, PyAny>) -> PyResult<Vec<(Position, BatchAcks)>> {
    let py = rows.py();
    let mut out = Vec::new();
    for row in rows.try_iter()? {
        let row = row?;
        let t = row.cast::<PyTuple>().map_err(|_| {
            InvalidInputType::new_err(
                "batches must be (ledger, entry, batch_size, words) tuples".to_owned(),
            )
        })?;
        if t.len() != 4 {
            return Err(InvalidInputType::new_err(format!(
                "a batch row has 4 fields, got {}",
                t.len()
            )));
        }
        let l = int_arg(&t.get_item(0)?, "batch ledger id")?;
        let e = int_arg(&t.get_item(1)?, "batch entry id")?;
        check_entry(l, e).map_err(|e| to_py(py, e))?;
        let p = Position::new(l, e).map_err(|e| to_py(py, e))?;
        let size = u32_arg(&t.get_item(2)?, "batch size")?;
        let raw = bytes_arg(&t.get_item(3)?, "batch words")?;
        if raw.len() % 8 != 0 {
            return Err(CorruptSnapshot::new_err(format!(
                "batch {p}: word bytes of length {} (not a multiple of 8)",
                raw.len()
            )));
        }
        let words: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| c.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b)))
            .collect();
        let b = BatchAcks::from_words(size, &words).map_err(|e| to_py(py, e))?;
        out.push((p, b));
    }
    Ok(out)
}

#[pymethods]
impl PyCursorState {
    #[new]
    #[pyo3(signature = (mark_delete = None, *, name = None, pulsar_quirks = None, ledger_sizes = None, **_config))]
    fn new(
        py: Python<'_>,
        mark_delete: Option<&Bound<'_, PyAny>>,
        name: Option<&Bound<'_, PyAny>>,
        pulsar_quirks: Option<&Bound<'_, PyAny>>,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
        _config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let md = match mark_delete.filter(|m| !m.is_none()) {
            Some(m) => position_arg(m, "mark_delete")?,
            None => Position::new(0, -1).map_err(|e| to_py(py, e))?,
        };
        check_bound(md.ledger_id, md.entry_id).map_err(|e| to_py(py, e))?;
        let name = name
            .filter(|n| !n.is_none())
            .map_or(Ok("cursor".to_owned()), |n| str_arg(n, "name"))?;
        let quirks = pulsar_quirks
            .filter(|q| !q.is_none())
            .map_or(Ok(false), |q| bool_arg(q, "pulsar_quirks"))?;
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let mut cursor = Cursor::new(md, quirks);
        let r = cursor.set_ledger_sizes(sizes);
        let state = Self {
            name,
            inner: Mutex::new(cursor),
        };
        state.ok(py, r)?;
        Ok(state)
    }

    /// The cursor's name (used in errors and stats).
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether the ack ranges reproduce Pulsar's quirks.
    #[getter]
    fn pulsar_quirks(&self, py: Python<'_>) -> bool {
        self.lock(py).acked().pulsar_quirks()
    }

    /// The last entry of the acknowledged prefix.
    #[getter]
    fn mark_delete_position(&self, py: Python<'_>) -> PyPosition {
        PyPosition(self.lock(py).mark_delete())
    }

    /// A copy of the individually acknowledged entries after mark-delete.
    #[getter]
    fn individually_deleted(&self, py: Python<'_>) -> PyRangeSet {
        PyRangeSet::from_core(self.detached_if_large(
            py,
            |c| c.acked().len(),
            |c| c.acked().clone(),
        ))
    }

    /// Number of ack ranges (Pulsar's nonContiguousDeletedMessagesRanges), in O(1).
    #[getter]
    fn non_contiguous_deleted_ranges(&self, py: Python<'_>) -> u64 {
        self.lock(py).acked().len()
    }

    /// Number of partially acknowledged batch entries.
    #[getter]
    fn batch_count(&self, py: Python<'_>) -> usize {
        self.lock(py).batch_count()
    }

    /// Number of state changes so far.
    #[getter]
    fn mutations(&self, py: Python<'_>) -> u64 {
        self.lock(py).mutations()
    }

    /// Known ledger sizes, or None.
    #[getter]
    fn ledger_sizes(&self, py: Python<'_>) -> Option<BTreeMap<i64, u64>> {
        self.lock(py).ledger_sizes().cloned()
    }

    /// Sets (None: forgets) the ledger sizes; acks are then checked against them and mark-delete
    /// rolls across ledger boundaries.
    fn set_ledger_sizes(&self, sizes: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = sizes.py();
        let sizes = ledger_sizes(Some(sizes))?;
        let r = self.run(py, "set_ledger_sizes", |c| c.set_ledger_sizes(sizes));
        self.ok(py, r)
    }

    /// Records that a ledger holds `entries` entries (a new or growing ledger).
    fn set_ledger_size(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entries: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let n = limit_arg(Some(entries), "entries")?.unwrap_or(0);
        let r = self.run(py, "set_ledger_size", |c| c.set_ledger_size(l, n));
        self.ok(py, r)
    }

    /// Acknowledges one entry, given as a `Position` or as `(ledger_id, entry_id)` ints (the
    /// per-call path that makes no `Position`); returns whether it was new (a no-op ack is counted).
    #[pyo3(signature = (position, entry_id = None))]
    fn ack(
        &self,
        position: &Bound<'_, PyAny>,
        entry_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let py = position.py();
        let (l, e) = match entry_id {
            None => {
                let p = position_arg(position, "position")?;
                (p.ledger_id, p.entry_id)
            }
            Some(entry) => (int_arg(position, "ledger_id")?, int_arg(entry, "entry_id")?),
        };
        let r = self.run(py, "ack", |c| c.ack(l, e));
        self.ok(py, r)
    }

    /// Acknowledges many entries given as ledger and entry columns; returns how many were new.
    fn ack_many(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let r = self.bulk(py, "ack_many", |c| c.ack_many(ls, es));
        self.ok(py, r)
    }

    /// Acknowledges everything up to the position; with `batch_index` (and `batch_size`), only
    /// indexes `0..=batch_index` of that entry. Returns whether anything new was acknowledged.
    #[pyo3(signature = (position, batch_index = None, batch_size = None))]
    fn ack_cumulative(
        &self,
        position: &Bound<'_, PyAny>,
        batch_index: Option<&Bound<'_, PyAny>>,
        batch_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let py = position.py();
        let p = position_arg(position, "position")?;
        let batch_index = batch_index.filter(|b| !b.is_none());
        let batch_size = batch_size.filter(|b| !b.is_none());
        let r = match (batch_index, batch_size) {
            (None, None) => self.lock(py).ack_cumulative(p.ledger_id, p.entry_id),
            (Some(i), Some(n)) => {
                let (i, n) = (u32_arg(i, "batch_index")?, u32_arg(n, "batch_size")?);
                self.lock(py)
                    .ack_cumulative_batch(p.ledger_id, p.entry_id, i, n)
            }
            _ => {
                return Err(InvalidArgument::new_err(
                    self.named("batch_index and batch_size go together".to_owned()),
                ))
            }
        };
        self.ok(py, r)
    }

    /// Acknowledges one index of a batch entry; the entry is acknowledged with its last index.
    fn ack_batch_index(
        &self,
        position: &Bound<'_, PyAny>,
        index: &Bound<'_, PyAny>,
        batch_size: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = position.py();
        let p = position_arg(position, "position")?;
        let (i, n) = (u32_arg(index, "index")?, u32_arg(batch_size, "batch_size")?);
        let r = self.run(py, "ack_batch_index", |c| {
            c.ack_batch_index(p.ledger_id, p.entry_id, i, n)
        });
        self.ok(py, r)
    }

    /// Applies Pulsar's `ack_set` (int64 words, a set bit = index still unacked) to a batch entry
    /// of `batch_size` messages, word by word; returns how many indexes were newly acknowledged.
    /// Only the words a batch of `batch_size` holds are read (the rest are ignored).
    fn ack_batch_set(
        &self,
        position: &Bound<'_, PyAny>,
        words: &Bound<'_, PyAny>,
        batch_size: &Bound<'_, PyAny>,
    ) -> PyResult<u32> {
        let py = position.py();
        let p = position_arg(position, "position")?;
        let n = u32_arg(batch_size, "batch_size")?;
        let given = column(words, "words")?;
        let given: Vec<u64> = given
            .as_slice()
            .iter()
            .take(n.div_ceil(64) as usize)
            .map(|&w| w as u64)
            .collect();
        let r = self.run(py, "ack_batch_set", |c| {
            c.ack_batch_set(p.ledger_id, p.entry_id, &given, n)
        });
        self.ok(py, r)
    }

    /// Whether the entry is acknowledged (at or below mark-delete, or individually).
    #[pyo3(signature = (position, entry_id = None))]
    fn is_acked(
        &self,
        position: &Bound<'_, PyAny>,
        entry_id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let py = position.py();
        let p = match entry_id {
            None => position_arg(position, "position")?,
            Some(entry) => Position {
                ledger_id: int_arg(position, "ledger_id")?,
                entry_id: int_arg(entry, "entry_id")?,
            },
        };
        let r = self.run(py, "is_acked", |c| c.is_acked(p.ledger_id, p.entry_id));
        self.ok(py, r)
    }

    /// `is_acked` for ledger and entry columns, as a numpy bool array.
    fn is_acked_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let r = self.bulk(py, "is_acked_many", |c| c.is_acked_many(ls, es));
        Ok(PyArray1::from_vec(py, self.ok(py, r)?).into_any())
    }

    /// Whether one index of a batch entry is acknowledged.
    fn is_batch_index_acked(
        &self,
        position: &Bound<'_, PyAny>,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = position.py();
        let p = position_arg(position, "position")?;
        let i = u32_arg(index, "index")?;
        let r = self
            .lock(py)
            .is_batch_index_acked(p.ledger_id, p.entry_id, i);
        self.ok(py, r)
    }

    /// Unacknowledged entries after mark-delete, given ledger sizes (or the cursor's own).
    #[pyo3(signature = (ledger_sizes = None))]
    fn backlog(&self, py: Python<'_>, ledger_sizes: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let r = self.bulk(py, "backlog", |c| c.backlog(sizes.as_ref()));
        self.ok(py, r)
    }

    /// Up to `limit` (default 1000) entries after `after` (and mark-delete) not fully
    /// acknowledged, as an `(n, 2)` int64 array of (ledger, entry) rows.
    #[pyo3(signature = (after = None, limit = None, ledger_sizes = None))]
    fn next_unacked<'py>(
        &self,
        py: Python<'py>,
        after: Option<&Bound<'py, PyAny>>,
        limit: Option<&Bound<'py, PyAny>>,
        ledger_sizes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let after = after
            .filter(|a| !a.is_none())
            .map(|a| position_arg(a, "after"))
            .transpose()?;
        let limit = limit_arg(limit, "limit")?.unwrap_or(1000);
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let r = self.bulk(py, "next_unacked", |c| {
            c.next_unacked(after, limit, sizes.as_ref())
        });
        pairs_array(py, self.ok(py, r)?)
    }

    /// Acknowledges the next `count` unacknowledged entries; returns how many were skipped.
    #[pyo3(signature = (count, ledger_sizes = None))]
    fn skip(
        &self,
        count: &Bound<'_, PyAny>,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let py = count.py();
        let n = limit_arg(Some(count), "count")?.unwrap_or(0);
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let r = self.bulk(py, "skip", |c| c.skip(n, sizes.as_ref()));
        self.ok(py, r)
    }

    /// Acknowledges everything up to the last entry of the last ledger; returns whether it moved.
    #[pyo3(signature = (ledger_sizes = None))]
    fn clear_backlog(
        &self,
        py: Python<'_>,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let r = self.bulk(py, "clear_backlog", |c| c.clear_backlog(sizes.as_ref()));
        self.ok(py, r)
    }

    /// Moves the cursor so that `read_position` is delivered next, forgetting every ack after it.
    fn reset(&self, read_position: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = read_position.py();
        let p = position_arg(read_position, "read_position")?;
        let r = self.bulk(py, "reset", |c| c.reset(p.ledger_id, p.entry_id));
        self.ok(py, r)
    }

    /// O(1) upper estimate of the compact encoding's bytes (exact form: `encode("compact")`).
    fn compact_size_estimate(&self, py: Python<'_>) -> u64 {
        self.lock(py).compact_size_estimate()
    }

    /// Counts of applied and no-op acknowledgements by kind.
    fn counters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.lock(py).counters();
        let d = PyDict::new(py);
        d.set_item("acks", c.acks)?;
        d.set_item("duplicate_acks", c.duplicate_acks)?;
        d.set_item("batch_index_acks", c.batch_index_acks)?;
        d.set_item("duplicate_batch_index_acks", c.duplicate_batch_index_acks)?;
        d.set_item("cumulative_acks", c.cumulative_acks)?;
        d.set_item("stale_cumulative_acks", c.stale_cumulative_acks)?;
        d.set_item("skipped", c.skipped)?;
        d.set_item("resets", c.resets)?;
        Ok(d)
    }

    /// Partial batches as `(ledger, entry, batch_size, words)` rows; `words` holds the unacked
    /// indexes as little-endian u64 words (Pulsar's deleteSet); `batch_size` 0 = unknown.
    fn batches<'py>(&self, py: Python<'py>) -> Vec<BatchRow<'py>> {
        let rows = batch_data(&self.lock(py));
        batch_rows(py, rows)
    }

    /// The unacked-index words of one batch entry, or None.
    fn batch<'py>(
        &self,
        position: &Bound<'py, PyAny>,
    ) -> PyResult<Option<(u32, Bound<'py, PyBytes>)>> {
        let py = position.py();
        let p = position_arg(position, "position")?;
        let c = self.lock(py);
        Ok(c.batch(p.ledger_id, p.entry_id)
            .map(|b| (b.size(), words_bytes(py, b))))
    }

    /// Ledgers whose acks changed since the last flush.
    fn dirty_ledgers(&self, py: Python<'_>) -> Vec<i64> {
        self.lock(py).acked().dirty_ledgers()
    }

    /// Forgets which ledgers changed (the state now matches what a store holds).
    fn clear_dirty(&self, py: Python<'_>) {
        self.lock(py).clear_dirty();
    }

    /// Marks ledgers dirty again (after a flush that failed).
    fn mark_dirty(&self, py: Python<'_>, ledger_ids: Vec<i64>) {
        self.lock(py).mark_dirty(&ledger_ids);
    }

    /// One consistent cut for a store, taken under the lock: `(mark_delete, ledgers, live,
    /// batches, mutations)`, where `ledgers` holds `(ledger, roaring portable bytes)` for the
    /// dirty ledgers (every ledger when `dirty_only` is false) and `live` every ledger id held.
    /// With `clear_dirty`, the dirty set is forgotten in the same step.
    #[pyo3(signature = (dirty_only = true, clear_dirty = true))]
    fn flush_state<'py>(
        &self,
        py: Python<'py>,
        dirty_only: bool,
        clear_dirty: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let (md, blobs, live, batches, mutations) = self.detached(py, |c| {
            let ids = if dirty_only {
                c.acked().dirty_ledgers()
            } else {
                c.acked().ledger_ids()
            };
            let blobs: Vec<(i64, Option<Vec<u8>>)> = ids
                .into_iter()
                .map(|l| (l, c.acked().ledger_to_bytes(l)))
                .collect();
            let live = c.acked().ledger_ids();
            let batches = batch_data(c);
            if clear_dirty {
                c.clear_dirty();
            }
            (c.mark_delete(), blobs, live, batches, c.mutations())
        });
        let batches = batch_rows(py, batches);
        let ledgers = PyList::empty(py);
        for (l, b) in blobs {
            let b = b.map(|b| PyBytes::new(py, &b));
            ledgers.append((l, b))?;
        }
        (PyPosition(md), ledgers, live, batches, mutations).into_pyobject(py)
    }

    /// Replaces the whole state: mark-delete, the acked entries and the partial batches
    /// (`(ledger, entry, batch_size, words)` rows); mark-delete is then rolled forward.
    fn restore(
        &self,
        mark_delete: &Bound<'_, PyAny>,
        acked: &Bound<'_, PyRangeSet>,
        batches: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = mark_delete.py();
        let md = position_arg(mark_delete, "mark_delete")?;
        let batches = parse_batches(batches).map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyValueError>(py) {
                CorruptSnapshot::new_err(self.named(e.value(py).to_string()))
            } else {
                e
            }
        })?;
        let rs: RangeSet = acked.get().lock(py).clone();
        let r = sync::guarded_on(py, &self.inner, "Cursor.restore", |c| {
            c.restore(md, rs, batches)
        });
        self.ok(py, r)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let c = self.lock(py);
        format!(
            "<{} {:?} mark_delete={} ranges={} batches={}>",
            "Cursor",
            self.name,
            c.mark_delete(),
            c.acked().len(),
            c.batch_count()
        )
    }
}

/// A `cursorkit.Cursor` argument, or `InvalidInputType`.
pub(crate) fn cursor_arg<'a, 'py>(
    cursor: &'a Bound<'py, PyAny>,
) -> PyResult<&'a Bound<'py, PyCursorState>> {
    cursor.cast::<PyCursorState>().map_err(|_| {
        InvalidInputType::new_err(format!(
            "cursor must be a cursorkit.Cursor, got {}",
            cursor
                .get_type()
                .name()
                .map_or_else(|_| "?".to_owned(), |n| n.to_string())
        ))
    })
}

/// Runs `f` on a dispatcher's core and a cursor, locked in that order (every dispatcher takes
/// them so); with `large` the GIL is released. A panic becomes `InternalError`.
pub(crate) fn with_cursor<S: Shared, R: Send>(
    this: &S,
    cursor: &Bound<'_, PyAny>,
    method: &'static str,
    large: bool,
    f: impl FnOnce(&mut S::Core, &mut Cursor) -> Result<R, CoreError> + Send,
) -> PyResult<R> {
    let py = cursor.py();
    let c = cursor_arg(cursor)?.get();
    let r = if large {
        let (mine, theirs) = (this.cell(), c.cell());
        sync::guarded(py, method, || {
            let mut d = mine.lock().unwrap_or_else(|p| p.into_inner());
            let mut k = theirs.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut d, &mut k)
        })
    } else {
        let mut d = this.lock(py);
        let mut k = c.lock(py);
        sync::catching(|| format!("{}.{method}", S::NAME), || f(&mut d, &mut k))
    };
    r.map_err(|e| to_py(py, e))
}
