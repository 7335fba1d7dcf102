//! `cursorkit.Position`: a frozen, ordered, hashable `(ledger_id, entry_id)`.

use std::fmt;

use cursorkit_core::Position;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::args::{int_arg, str_arg, wrong_type};
use crate::errors::IntoPy;

/// An immutable (ledger_id, entry_id) pair, ordered by ledger then entry; ``str`` is ``"L:E"``.
#[pyclass(name = "Position", module = "cursorkit", frozen, eq, ord, hash, str)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyPosition(pub Position);

/// A new `Position` object left out of the cyclic GC: it holds two integers and can never be part
/// of a cycle, so tracking it only makes every collection walk it (brokers make millions).
pub fn untracked_position(py: Python<'_>, p: Position) -> PyResult<Bound<'_, PyPosition>> {
    let obj = Bound::new(py, PyPosition(p))?;
    // SAFETY: `obj` is a live object of a GC type; untracking an object that holds no references
    // is always sound (CPython untracks tuples of atoms the same way), and dealloc untracks only
    // what is tracked.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr().cast()) };
    Ok(obj)
}

impl fmt::Display for PyPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PyPosition {
    /// A Python `Position` for a core one.
    pub fn wrap(py: Python<'_>, p: Position) -> PyResult<Bound<'_, Self>> {
        Bound::new(py, Self(p))
    }
}

#[pymethods]
impl PyPosition {
    #[new]
    fn new(ledger_id: &Bound<'_, PyAny>, entry_id: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = ledger_id.py();
        let (l, e) = (
            int_arg(ledger_id, "ledger_id")?,
            int_arg(entry_id, "entry_id")?,
        );
        Position::new(l, e).py_err(py).map(Self)
    }

    /// Parses ``"L:E"``.
    #[staticmethod]
    fn parse(text: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = text.py();
        str_arg(text, "text")?
            .parse::<Position>()
            .py_err(py)
            .map(Self)
    }

    #[getter]
    fn ledger_id(&self) -> i64 {
        self.0.ledger_id
    }

    #[getter]
    fn entry_id(&self) -> i64 {
        self.0.entry_id
    }

    fn __repr__(&self) -> String {
        format!("Position({}, {})", self.0.ledger_id, self.0.entry_id)
    }

    /// Pickles (every protocol) as `Position(ledger_id, entry_id)`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, (i64, i64)) {
        let p = slf.get().0;
        (slf.get_type(), (p.ledger_id, p.entry_id))
    }
}

/// A `cursorkit.Position` argument; anything else is `InvalidInputType`.
#[inline]
pub fn position_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Position> {
    match obj.cast::<PyPosition>() {
        Ok(p) => Ok(p.get().0),
        Err(_) => Err(wrong_type(obj, what, "a cursorkit.Position")),
    }
}
