//! `cursorkit.RangeSet`: a frozen pyclass around the core `RangeSet` behind a mutex.
//!
//! Bulk methods borrow their columns, release the GIL, and make one call into the core.

use std::sync::Mutex;

use cursorkit_core::{check_ledger, parse_message_ranges, Position, RangeSet, MAX_DECODED_CHUNKS};

/// Default `max_words` of `to_long_list_map` without `max_bytes`: 2^24 words (128 MiB).
const MAX_WORDS_UNBOUNDED: u64 = 1 << 24;
use numpy::{PyArray1, PyArrayMethods};
use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyMapping, PyTuple};

use crate::ackstate::position::PyPosition;
use crate::args::{bool_arg, bytes_arg, column, int_arg, ledger_sizes, limit_arg, Column};
use crate::errors::{IntoPy, InvalidInputType};
use crate::sync::{self, Shared};

/// Acknowledged (ledger, entry) positions as per-ledger roaring bitmaps, reported as open-closed ranges.
#[pyclass(name = "RangeSet", module = "cursorkit", frozen)]
pub struct PyRangeSet {
    inner: Mutex<RangeSet>,
}

impl PyRangeSet {
    pub(crate) fn from_core(rs: RangeSet) -> Self {
        Self {
            inner: Mutex::new(rs),
        }
    }
}

crate::shared!(PyRangeSet, RangeSet, "RangeSet");

fn pair<'py>(
    py: Python<'py>,
    range: Option<(Position, Position)>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    range
        .map(|(a, b)| PyTuple::new(py, [PyPosition::wrap(py, a)?, PyPosition::wrap(py, b)?]))
        .transpose()
}

/// `(ledger_id, entry_id)` arguments.
fn position_args(
    ledger_id: &Bound<'_, PyAny>,
    entry_id: &Bound<'_, PyAny>,
) -> PyResult<(i64, i64)> {
    Ok((
        int_arg(ledger_id, "ledger_id")?,
        int_arg(entry_id, "entry_id")?,
    ))
}

/// `(lower_ledger, lower_entry, upper_ledger, upper_entry)` arguments of a range.
fn bounds(
    lower_ledger: &Bound<'_, PyAny>,
    lower_entry: &Bound<'_, PyAny>,
    upper_ledger: &Bound<'_, PyAny>,
    upper_entry: &Bound<'_, PyAny>,
) -> PyResult<[i64; 4]> {
    Ok([
        int_arg(lower_ledger, "lower_ledger")?,
        int_arg(lower_entry, "lower_entry")?,
        int_arg(upper_ledger, "upper_ledger")?,
        int_arg(upper_entry, "upper_entry")?,
    ])
}

pub(crate) fn columns<'py>(
    ledger_ids: &Bound<'py, PyAny>,
    entry_ids: &Bound<'py, PyAny>,
) -> PyResult<(Column<'py>, Column<'py>)> {
    Ok((
        column(ledger_ids, "ledger_ids")?,
        column(entry_ids, "entry_ids")?,
    ))
}

/// An `(n, 4)` int64 array that takes over a flat row-major buffer without copying it.
fn rows_array(py: Python<'_>, flat: Vec<i64>) -> PyResult<Bound<'_, PyAny>> {
    let n = flat.len() / 4;
    Ok(PyArray1::from_vec(py, flat).reshape([n, 4])?.into_any())
}

#[pymethods]
impl PyRangeSet {
    #[new]
    #[pyo3(signature = (pulsar_quirks = None))]
    fn new(pulsar_quirks: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let quirks = pulsar_quirks.map_or(Ok(false), |q| bool_arg(q, "pulsar_quirks"))?;
        Ok(Self::from_core(RangeSet::new(quirks)))
    }

    /// Whether Pulsar's test-asserted quirks are reproduced.
    #[getter]
    fn pulsar_quirks(&self, py: Python<'_>) -> bool {
        self.lock(py).pulsar_quirks()
    }

    /// Acknowledges one entry; returns whether it was new.
    fn add(&self, ledger_id: &Bound<'_, PyAny>, entry_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = ledger_id.py();
        let (l, e) = position_args(ledger_id, entry_id)?;
        self.call(py, "add", |c| c.add(l, e))
    }

    /// Acknowledges many entries (numpy/Arrow columns or sequences); returns how many were new.
    fn add_many(
        &self,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        self.bulk(py, "add_many", |rs| rs.add_many(ls, es))
            .py_err(py)
    }

    /// Adds the open-closed range (lower..upper] with Pulsar's cross-ledger rule.
    #[pyo3(signature = (lower_ledger, lower_entry, upper_ledger, upper_entry, ledger_sizes = None))]
    fn add_open_closed(
        &self,
        lower_ledger: &Bound<'_, PyAny>,
        lower_entry: &Bound<'_, PyAny>,
        upper_ledger: &Bound<'_, PyAny>,
        upper_entry: &Bound<'_, PyAny>,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = lower_ledger.py();
        let [lk, lv, uk, uv] = bounds(lower_ledger, lower_entry, upper_ledger, upper_entry)?;
        let sizes = self::ledger_sizes(ledger_sizes)?;
        self.lock(py)
            .add_open_closed(lk, lv, uk, uv, sizes.as_ref())
            .py_err(py)
    }

    /// Adds many open-closed ranges given as an (n, 4) array of (lk, lv, uk, uv) rows.
    #[pyo3(signature = (rows, ledger_sizes = None))]
    fn add_ranges(
        &self,
        rows: &Bound<'_, PyAny>,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = rows.py();
        let np = py.import("numpy")?;
        let flat = np.call_method1("asarray", (rows,)).map_err(|e| {
            InvalidInputType::new_err(format!("rows must be an (n, 4) integer array ({e})"))
        })?;
        let shape: Vec<usize> = flat.getattr("shape")?.extract()?;
        let ok_shape = matches!(shape.as_slice(), [_, 4]) || matches!(shape.as_slice(), [0]);
        if !ok_shape {
            return Err(InvalidInputType::new_err(format!(
                "rows must have shape (n, 4), got {shape:?}"
            )));
        }
        let col = column(&flat.call_method1("reshape", (-1,))?, "rows")?;
        let values = col.as_slice();
        let parsed: Vec<[i64; 4]> = values
            .chunks_exact(4)
            .filter_map(|c| <[i64; 4]>::try_from(c).ok())
            .collect();
        let sizes = self::ledger_sizes(ledger_sizes)?;
        self.bulk(py, "add_ranges", |rs| {
            rs.add_ranges(&parsed, sizes.as_ref())
        })
        .py_err(py)
    }

    /// Removes one entry; returns whether it was held.
    fn remove(&self, ledger_id: &Bound<'_, PyAny>, entry_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = ledger_id.py();
        let (l, e) = position_args(ledger_id, entry_id)?;
        self.call(py, "remove", |c| c.remove(l, e))
    }

    /// Removes many positions; a numpy bool array of which were held (Pulsar's untrack).
    fn remove_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let out = self
            .bulk(py, "remove_many", |rs| rs.remove_many(ls, es))
            .py_err(py)?;
        Ok(PyArray1::from_vec(py, out).into_any())
    }

    /// ORs a 32-bit roaring portable bitmap into one ledger; returns how many entries were new.
    fn union_ledger_bytes(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let data = bytes_arg(data, "data")?;
        sync::guarded_on(py, &self.inner, "RangeSet.union_ledger_bytes", |rs| {
            rs.union_ledger_bytes(l, &data)
        })
        .py_err(py)
    }

    /// Whether the entry is held (entry -1 never is).
    fn contains(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let py = ledger_id.py();
        let (l, e) = position_args(ledger_id, entry_id)?;
        // The hottest read (a checked lookup): direct, as the guard's unwinding frame costs ~8% here.
        self.lock(py).contains(l, e).py_err(py)
    }

    /// Membership of many positions as a numpy bool array.
    fn contains_many<'py>(
        &self,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = ledger_ids.py();
        let (ls, es) = columns(ledger_ids, entry_ids)?;
        let (ls, es) = (ls.as_slice(), es.as_slice());
        let out = self
            .detached(py, |rs| rs.contains_many(ls, es))
            .py_err(py)?;
        Ok(PyArray1::from_vec(py, out).into_any())
    }

    /// The CLOSED run [L:first, L:last] holding the entry, or None.
    fn range_containing<'py>(
        &self,
        ledger_id: &Bound<'py, PyAny>,
        entry_id: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let py = ledger_id.py();
        let (l, e) = position_args(ledger_id, entry_id)?;
        let found = self.call(py, "range_containing", |c| c.range_containing(l, e))?;
        pair(py, found)
    }

    /// Removes every position <= (ledger_id, entry_id).
    fn remove_at_most(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = ledger_id.py();
        let (l, e) = position_args(ledger_id, entry_id)?;
        self.call(py, "remove_at_most", |c| c.remove_at_most(l, e))
    }

    /// Removes the positions p with (lower) < p <= (upper), across ledgers.
    fn remove_open_closed(
        &self,
        lower_ledger: &Bound<'_, PyAny>,
        lower_entry: &Bound<'_, PyAny>,
        upper_ledger: &Bound<'_, PyAny>,
        upper_entry: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = lower_ledger.py();
        let [lk, lv, uk, uv] = bounds(lower_ledger, lower_entry, upper_ledger, upper_entry)?;
        self.call(py, "remove_open_closed", |c| {
            c.remove_open_closed(lk, lv, uk, uv)
        })
    }

    /// First range of the first ledger, open-closed, or None.
    fn first_range<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let r = self.lock(py).first_range();
        pair(py, r)
    }

    /// Last range of the last ledger, open-closed, or None.
    fn last_range<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let r = self.lock(py).last_range();
        pair(py, r)
    }

    /// (first ledger:first entry-1, last ledger:last entry), possibly across ledgers, or None.
    fn span<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let r = self.lock(py).span();
        pair(py, r)
    }

    /// Every range as an open-closed `(lower_ledger, lower_entry, upper_ledger, upper_entry)` tuple.
    fn ranges<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let flat = self.detached(py, |rs| rs.ranges_flat(None));
        // One int object per ledger, shared by all of its rows: half the allocations.
        let mut ledger: Option<(i64, Bound<'py, PyAny>)> = None;
        let mut rows = Vec::with_capacity(flat.len() / 4);
        for &[lk, lv, _, uv] in flat
            .chunks_exact(4)
            .filter_map(|c| <&[i64; 4]>::try_from(c).ok())
        {
            let id = match &ledger {
                Some((l, obj)) if *l == lk => obj.clone(),
                _ => {
                    let obj = lk.into_pyobject(py)?.into_any();
                    ledger = Some((lk, obj.clone()));
                    obj
                }
            };
            let lower = lv.into_pyobject(py)?.into_any();
            let upper = uv.into_pyobject(py)?.into_any();
            rows.push(PyTuple::new(py, [id.clone(), lower, id, upper])?);
        }
        let list = PyList::new(py, rows)?;
        Ok(list)
    }

    /// The first max_ranges ranges as an (n, 4) int64 array of (L, first-1, L, last) rows.
    #[pyo3(signature = (max_ranges = None))]
    fn ranges_array<'py>(
        &self,
        py: Python<'py>,
        max_ranges: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let limit = limit_arg(max_ranges, "max_ranges")?;
        let flat = self.detached(py, |rs| rs.ranges_flat(limit));
        rows_array(py, flat)
    }

    /// Same rows as ranges_array: the MessageRange list Pulsar persists.
    #[pyo3(signature = (max_ranges = None))]
    fn to_message_ranges<'py>(
        &self,
        py: Python<'py>,
        max_ranges: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.ranges_array(py, max_ranges)
    }

    /// Acked entries p with (lower) <= p <= (upper), inclusive at both ends.
    fn cardinality(
        &self,
        lower_ledger: &Bound<'_, PyAny>,
        lower_entry: &Bound<'_, PyAny>,
        upper_ledger: &Bound<'_, PyAny>,
        upper_entry: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let py = lower_ledger.py();
        let [lk, lv, uk, uv] = bounds(lower_ledger, lower_entry, upper_ledger, upper_entry)?;
        self.call(py, "cardinality", |c| c.cardinality(lk, lv, uk, uv))
    }

    /// Number of held entries.
    fn total_cardinality(&self, py: Python<'_>) -> u64 {
        self.lock(py).total_cardinality()
    }

    /// Ids of the ledgers holding entries, ascending.
    fn ledgers(&self, py: Python<'_>) -> Vec<i64> {
        self.lock(py).ledger_ids()
    }

    /// True when no position is held.
    fn is_empty(&self, py: Python<'_>) -> bool {
        self.lock(py).is_empty()
    }

    /// Drops every position (each ledger that held one becomes dirty).
    fn clear(&self, py: Python<'_>) {
        self.lock(py).clear();
    }

    /// An independent copy.
    fn copy(&self, py: Python<'_>) -> Self {
        Self::from_core(self.detached(py, |rs| rs.clone()))
    }

    fn __copy__(&self, py: Python<'_>) -> Self {
        self.copy(py)
    }

    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> Self {
        self.copy(py)
    }

    /// Heap bytes held by the native structure.
    fn memory_usage(&self, py: Python<'_>) -> usize {
        self.lock(py).memory_usage()
    }

    /// Run-optimises every bitmap (also done automatically as mutations accumulate).
    fn compact(&self, py: Python<'_>) {
        self.detached(py, RangeSet::compact);
    }

    /// Ledgers whose entries changed since the last clear_dirty(), ascending.
    fn dirty_ledgers(&self, py: Python<'_>) -> Vec<i64> {
        self.lock(py).dirty_ledgers()
    }

    /// Forgets which ledgers changed (call after persisting them).
    fn clear_dirty(&self, py: Python<'_>) {
        self.lock(py).clear_dirty();
    }

    /// The compact, versioned, CRC-checked byte form.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let bytes = self.detached(py, |rs| rs.to_bytes());
        PyBytes::new(py, &bytes)
    }

    /// Decodes to_bytes(); damaged bytes raise CorruptSnapshot, foreign versions UnsupportedVersion.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = data.py();
        let data = bytes_arg(data, "data")?;
        let rs =
            sync::guarded(py, "RangeSet.from_bytes", || RangeSet::from_bytes(&data)).py_err(py)?;
        Ok(Self::from_core(rs))
    }

    /// One ledger as a run-optimised 32-bit roaring portable bitmap, or None.
    fn ledger_to_bytes<'py>(
        &self,
        ledger_id: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        check_ledger(l).py_err(py)?;
        let bytes = self.detached(py, |rs| rs.ledger_to_bytes(l));
        Ok(bytes.map(|b| PyBytes::new(py, &b)))
    }

    /// Replaces one ledger's entries with a portable bitmap's (empty removes the ledger).
    fn set_ledger_bytes(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = ledger_id.py();
        let l = int_arg(ledger_id, "ledger_id")?;
        let data = bytes_arg(data, "data")?;
        sync::guarded_on(py, &self.inner, "RangeSet.set_ledger_bytes", |rs| {
            rs.set_ledger_bytes(l, &data)
        })
        .py_err(py)
    }

    /// Pulsar's toRanges(max): {ledger: int64 BitSet words}, whole ledgers in ascending order;
    /// with max_bytes, also stops before the ledger that would take field 6 past that many bytes.
    /// Without max_bytes, more than max_words words in all (8 B each; one ack near entry 2^32
    /// alone needs 2^26) is refused with BudgetExceeded.
    #[pyo3(signature = (max_entries = None, max_bytes = None, max_words = MAX_WORDS_UNBOUNDED))]
    fn to_long_list_map<'py>(
        &self,
        py: Python<'py>,
        max_entries: Option<&Bound<'py, PyAny>>,
        max_bytes: Option<&Bound<'py, PyAny>>,
        max_words: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let limit = limit_arg(max_entries, "max_entries")?;
        let budget = limit_arg(max_bytes, "max_bytes")?;
        let map = self
            .detached(py, |rs| {
                rs.to_long_list_map_budgeted(limit, budget, max_words)
            })
            .py_err(py)?;
        let out = PyDict::new(py);
        for (id, words) in map {
            out.set_item(id, PyArray1::from_vec(py, words))?;
        }
        Ok(out)
    }

    /// The MessageRange list (field `field`: 3 of PositionInfo, 4 of ManagedCursorInfo) of a
    /// serialised message, parsed in Rust; cross-ledger ranges are expanded with ledger_sizes.
    #[staticmethod]
    #[pyo3(signature = (data, field = 3, ledger_sizes = None, pulsar_quirks = false, max_chunks = MAX_DECODED_CHUNKS))]
    fn from_message_range_field(
        data: &Bound<'_, PyAny>,
        field: u64,
        ledger_sizes: Option<&Bound<'_, PyAny>>,
        pulsar_quirks: bool,
        max_chunks: u64,
    ) -> PyResult<Self> {
        let py = data.py();
        let bytes = bytes_arg(data, "data")?;
        let sizes = self::ledger_sizes(ledger_sizes)?;
        let rs = sync::guarded(py, "RangeSet.from_message_range_field", || {
            let rows = parse_message_ranges(&bytes, field)?;
            let mut rs = RangeSet::new(pulsar_quirks);
            rs.add_ranges_within(&rows, sizes.as_ref(), max_chunks)?;
            Ok(rs)
        })
        .py_err(py)?;
        Ok(Self::from_core(rs))
    }

    /// Rebuilds a set from {ledger: BitSet words}.
    #[staticmethod]
    #[pyo3(signature = (words, pulsar_quirks = false))]
    fn from_long_list_map(words: &Bound<'_, PyAny>, pulsar_quirks: bool) -> PyResult<Self> {
        let py = words.py();
        let mapping = words.cast::<PyMapping>().map_err(|_| {
            InvalidInputType::new_err("words must be a mapping {ledger_id: words}".to_owned())
        })?;
        let mut parsed = Vec::new();
        for item in mapping.items()?.try_iter()? {
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
            let ledger = int_arg(&k, "ledger id")?;
            parsed.push((ledger, column(&v, "words")?.as_slice().to_vec()));
        }
        let rs = sync::guarded(py, "RangeSet.from_long_list_map", || {
            RangeSet::from_long_list_map(&parsed, pulsar_quirks)
        })
        .py_err(py)?;
        Ok(Self::from_core(rs))
    }

    /// Exact bytes of the first max_ranges ranges as PositionInfo's MessageRange list (field 3).
    #[pyo3(signature = (max_ranges = None))]
    fn message_range_wire_size(
        &self,
        py: Python<'_>,
        max_ranges: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let limit = limit_arg(max_ranges, "max_ranges")?;
        Ok(self.detached_if_large(py, |rs| rs.len(), |rs| rs.message_range_wire_size(limit)))
    }

    /// Exact bytes of to_long_list_map(max_entries) as PositionInfo's LongListMap list (field 6).
    #[pyo3(signature = (max_entries = None))]
    fn long_list_map_wire_size(
        &self,
        py: Python<'_>,
        max_entries: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let limit = limit_arg(max_entries, "max_entries")?;
        Ok(self.detached(py, |rs| rs.long_list_map_wire_size(limit)))
    }

    /// The first max_ranges ranges as field `field` bytes (what protobuf would write): 3 is
    /// PositionInfo's, 4 ManagedCursorInfo's.
    #[pyo3(signature = (max_ranges = None, field = None))]
    fn message_range_field_bytes<'py>(
        &self,
        py: Python<'py>,
        max_ranges: Option<&Bound<'py, PyAny>>,
        field: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let limit = limit_arg(max_ranges, "max_ranges")?;
        let field = match field {
            None => 3,
            Some(f) => int_arg(f, "field")?,
        };
        let bytes = self
            .detached_if_large(
                py,
                |rs| rs.len(),
                |rs| rs.message_range_field_bytes_as(limit, field),
            )
            .py_err(py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// to_long_list_map(max_entries) as PositionInfo field 6 bytes (what protobuf would write).
    #[pyo3(signature = (max_entries = None))]
    fn long_list_map_field_bytes<'py>(
        &self,
        py: Python<'py>,
        max_entries: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let limit = limit_arg(max_entries, "max_entries")?;
        let bytes = self.detached(py, |rs| rs.long_list_map_field_bytes(limit));
        Ok(PyBytes::new(py, &bytes))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.lock(py).len() as usize
    }

    fn __str__(&self, py: Python<'_>) -> String {
        self.detached(py, |rs| rs.to_string())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (text, n) = self.detached(py, |rs| {
            let n = rs.len();
            if n <= 20 {
                (rs.to_string(), n)
            } else {
                let head: Vec<String> = rs
                    .ranges_rows(Some(10))
                    .iter()
                    .map(|r| format!("({}:{}..{}:{}]", r[0], r[1], r[2], r[3]))
                    .collect();
                (format!("[{},...]", head.join(",")), n)
            }
        });
        if n <= 20 {
            format!("RangeSet({text})")
        } else {
            format!("RangeSet({text}, {n} ranges)")
        }
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Py<PyAny>> {
        let py = other.py();
        let Ok(other) = other.cast::<PyRangeSet>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let equal = if std::ptr::eq(self, other) {
            true
        } else {
            // Lock in address order so two threads comparing a == b and b == a cannot deadlock.
            let (first, second) = if (self as *const Self) < (other as *const Self) {
                (self, other)
            } else {
                (other, self)
            };
            py.detach(|| {
                let a = first.inner.lock().unwrap_or_else(|p| p.into_inner());
                let b = second.inner.lock().unwrap_or_else(|p| p.into_inner());
                *a == *b
            })
        };
        match op {
            CompareOp::Eq => Ok(equal.into_pyobject(py)?.to_owned().into_any().unbind()),
            CompareOp::Ne => Ok((!equal).into_pyobject(py)?.to_owned().into_any().unbind()),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let py = slf.py();
        let ctor = py.get_type::<PyRangeSet>().getattr("from_bytes")?;
        Ok((ctor, (slf.get().to_bytes(py),)))
    }
}
