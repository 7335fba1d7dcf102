//! `cursorkit._core`: the PyO3 binding of `cursorkit-core`. It converts types, maps errors to
//! `cursorkit.errors`, takes numpy/Arrow columns without copying, and releases the GIL for bulk work.

mod alloc;
mod args;
mod cursor;
mod errors;
mod position;
mod rangeset;
mod sync;

use pyo3::prelude::*;

/// The native module; the public API is re-exported by the `cursorkit` package.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<position::PyPosition>()?;
    m.add_class::<rangeset::PyRangeSet>()?;
    m.add_class::<cursor::PyCursorState>()?;
    m.add_function(wrap_pyfunction!(alloc::heap_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(alloc::heap_peak, m)?)?;
    m.add_function(wrap_pyfunction!(alloc::reset_heap_peak, m)?)?;
    Ok(())
}
