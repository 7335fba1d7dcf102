//! PIP-195 snapshot segment functions of `cursorkit._core`: cut, sort, encode, decode and the
//! per-ledger bitmaps. Columns are borrowed (zero-copy for int64 numpy) and the GIL is released
//! for the work.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::ackstate::rangeset::columns;
use crate::args::{bytes_arg, column, int_arg, Column};
use crate::errors::{IntoPy, LengthMismatch};
use crate::sync;

/// The three index columns, checked for equal lengths (`LengthMismatch` names all three).
fn index_columns<'py>(
    timestamps: &Bound<'py, PyAny>,
    ledger_ids: &Bound<'py, PyAny>,
    entry_ids: &Bound<'py, PyAny>,
) -> PyResult<(Column<'py>, Column<'py>, Column<'py>)> {
    let at = column(timestamps, "timestamps")?;
    let (ls, es) = columns(ledger_ids, entry_ids)?;
    let lens = (
        at.as_slice().len(),
        ls.as_slice().len(),
        es.as_slice().len(),
    );
    if lens.0 != lens.1 || lens.0 != lens.2 {
        return Err(LengthMismatch::new_err(format!(
            "timestamps, ledger ids and entry ids differ in length: {}, {} and {}",
            lens.0, lens.1, lens.2
        )));
    }
    Ok((at, ls, es))
}

/// Three owned columns as a tuple of int64 numpy arrays (the vectors are taken over, not copied).
fn array_triple(
    py: Python<'_>,
    (at, ls, es): (Vec<i64>, Vec<i64>, Vec<i64>),
) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(
        py,
        [
            PyArray1::from_vec(py, at).into_any(),
            PyArray1::from_vec(py, ls).into_any(),
            PyArray1::from_vec(py, es).into_any(),
        ],
    )
}

/// End offsets (exclusive) of the segments PIP-195 cuts from sorted deliver-at timestamps.
#[pyfunction]
pub fn cut_segments<'py>(
    timestamps: &Bound<'py, PyAny>,
    max_time_step_ms: &Bound<'py, PyAny>,
    max_indexes_per_segment: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = timestamps.py();
    let at = column(timestamps, "timestamps")?;
    let step = int_arg(max_time_step_ms, "max_time_step_ms")?;
    let max = int_arg(max_indexes_per_segment, "max_indexes_per_segment")?;
    let at = at.as_slice();
    let ends = py
        .detach(|| cursorkit_core::cut_segments(at, step, max))
        .py_err(py)?;
    let ends: Vec<i64> = ends.into_iter().map(|e| e as i64).collect();
    Ok(PyArray1::from_vec(py, ends).into_any())
}

/// The indexes sorted by (timestamp, ledger, entry), each position once (its earliest timestamp).
#[pyfunction]
pub fn sort_indexes<'py>(
    timestamps: &Bound<'py, PyAny>,
    ledger_ids: &Bound<'py, PyAny>,
    entry_ids: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = timestamps.py();
    let (at, ls, es) = index_columns(timestamps, ledger_ids, entry_ids)?;
    let (at, ls, es) = (at.as_slice(), ls.as_slice(), es.as_slice());
    let sorted = py
        .detach(|| cursorkit_core::sort_indexes(at, ls, es))
        .py_err(py)?;
    array_triple(py, sorted)
}

/// SnapshotSegment bytes for the indexes in the given order, exactly as protobuf writes them.
#[pyfunction]
pub fn encode_segment<'py>(
    timestamps: &Bound<'py, PyAny>,
    ledger_ids: &Bound<'py, PyAny>,
    entry_ids: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let py = timestamps.py();
    let (at, ls, es) = index_columns(timestamps, ledger_ids, entry_ids)?;
    let (at, ls, es) = (at.as_slice(), ls.as_slice(), es.as_slice());
    let bytes = py
        .detach(|| cursorkit_core::encode_segment(at, ls, es))
        .py_err(py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// (timestamps, ledger_ids, entry_ids) of SnapshotSegment bytes; damage raises CorruptSnapshot.
#[pyfunction]
pub fn decode_segment<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let py = data.py();
    let data = bytes_arg(data, "data")?;
    let decoded = sync::guarded(py, "decode_segment", || {
        cursorkit_core::decode_segment(&data)
    })
    .py_err(py)?;
    array_triple(py, decoded)
}

/// Per ledger (ascending), the entry ids as a run-optimised 32-bit roaring portable bitmap.
#[pyfunction]
pub fn segment_bitmaps<'py>(
    ledger_ids: &Bound<'py, PyAny>,
    entry_ids: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let py = ledger_ids.py();
    let (ls, es) = columns(ledger_ids, entry_ids)?;
    let (ls, es) = (ls.as_slice(), es.as_slice());
    let maps = py
        .detach(|| cursorkit_core::segment_bitmaps(ls, es))
        .py_err(py)?;
    let items = maps
        .iter()
        .map(|(id, bytes)| (*id, PyBytes::new(py, bytes)))
        .collect::<Vec<_>>();
    PyList::new(py, items)
}

/// Number of entries in a 32-bit roaring portable bitmap; damage raises CorruptSnapshot.
#[pyfunction]
pub fn bitmap_cardinality(data: &Bound<'_, PyAny>) -> PyResult<u64> {
    let py = data.py();
    let data = bytes_arg(data, "data")?;
    sync::guarded(py, "bitmap_cardinality", || {
        cursorkit_core::bitmap_cardinality(&data)
    })
    .py_err(py)
}
