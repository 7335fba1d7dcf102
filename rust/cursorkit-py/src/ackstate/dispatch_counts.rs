//! The columns a dispatcher's redelivery counts cross in (`SharedCore` and `DispatchCore`):
//! raises taken for a durable journal, and counts read back from one to seed a new dispatcher.

use cursorkit_core::{DispatchCounts, Position};
use numpy::PyArray1;
use pyo3::prelude::*;

use crate::ackstate::rangeset::columns;
use crate::args::column;
use crate::errors::{to_py, InvalidArgument};
use crate::keyshared::dispatcher::ids::Ids;

/// Three arrays of the raises since the last call: ledger ids, entry ids (int64), new counts (uint32).
pub(crate) type RaisedColumns<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u32>>,
);

/// The journal's raises as columns (a position raised twice appears twice, the later count last).
pub(crate) fn take_raised<'py>(py: Python<'py>, counts: &mut DispatchCounts) -> RaisedColumns<'py> {
    let raised = counts.take_raised();
    let ls = raised.iter().map(|(p, _)| p.ledger_id).collect();
    let es = raised.iter().map(|(p, _)| p.entry_id).collect();
    let ns = raised.iter().map(|&(_, n)| n).collect();
    (
        PyArray1::from_vec(py, ls),
        PyArray1::from_vec(py, es),
        PyArray1::from_vec(py, ns),
    )
}

/// Seeds from three columns, every row checked first (a bad row seeds nothing).
pub(crate) fn seeds(
    ledgers: &Bound<'_, PyAny>,
    entries: &Bound<'_, PyAny>,
    counts: &Bound<'_, PyAny>,
) -> PyResult<Vec<(Position, u32)>> {
    let py = ledgers.py();
    let (ls, es) = columns(ledgers, entries)?;
    let ns = column(counts, "counts")?;
    let (ls, es, ns) = (ls.as_slice(), es.as_slice(), ns.as_slice());
    if ls.len() != es.len() || ls.len() != ns.len() {
        return Err(InvalidArgument::new_err(format!(
            "ledger_ids, entry_ids and counts differ in length: {}, {}, {}",
            ls.len(),
            es.len(),
            ns.len()
        )));
    }
    let mut out = Vec::with_capacity(ls.len());
    for ((&l, &e), &n) in ls.iter().zip(es).zip(ns) {
        let p = Position::new(l, e).map_err(|err| to_py(py, err))?;
        let n = u32::try_from(n).map_err(|_| {
            InvalidArgument::new_err(format!("a count must fit 0..=2**32-1, got {n}"))
        })?;
        out.push((p, n));
    }
    Ok(out)
}

/// The `Position`s of a list (or any iterable) of them, every one checked first.
pub(crate) fn positions(positions: &Bound<'_, PyAny>) -> PyResult<Vec<Position>> {
    let mut ids = Ids::empty();
    ids.read(positions)?;
    let (ls, es) = ids.slices();
    ls.iter()
        .zip(es)
        .map(|(&l, &e)| Position::new(l, e))
        .collect::<Result<_, _>>()
        .map_err(|err| to_py(positions.py(), err))
}
