//! Maps core errors to the `cursorkit.errors` classes: each class is a Rust type here, its Python
//! class imported once (lazily, at its first use).

use cursorkit_core::CoreError;
use pyo3::prelude::*;

pyo3::import_exception!(cursorkit.errors, BudgetExceeded);
pyo3::import_exception!(cursorkit.errors, ConsumerAssignError);
pyo3::import_exception!(cursorkit.errors, CorruptSnapshot);
pyo3::import_exception!(cursorkit.errors, InternalError);
pyo3::import_exception!(cursorkit.errors, InvalidArgument);
pyo3::import_exception!(cursorkit.errors, InvalidInputType);
pyo3::import_exception!(cursorkit.errors, InvalidPosition);
pyo3::import_exception!(cursorkit.errors, LengthMismatch);
pyo3::import_exception!(cursorkit.errors, ProtocolError);
pyo3::import_exception!(cursorkit.errors, TrackerClosed);
pyo3::import_exception!(cursorkit.errors, UnknownConsumer);
pyo3::import_exception!(cursorkit.errors, UnknownLedger);
pyo3::import_exception!(cursorkit.errors, UnsupportedVersion);

/// The Python exception for a core error.
pub fn to_py(_py: Python<'_>, e: CoreError) -> PyErr {
    let message = e.to_string();
    match e {
        CoreError::InvalidPosition(_) => InvalidPosition::new_err(message),
        CoreError::InvalidArgument(_) => InvalidArgument::new_err(message),
        CoreError::UnknownLedger(_) => UnknownLedger::new_err(message),
        CoreError::LengthMismatch { .. } => LengthMismatch::new_err(message),
        CoreError::Corrupt(_) => CorruptSnapshot::new_err(message),
        CoreError::UnsupportedVersion { .. } => UnsupportedVersion::new_err(message),
        CoreError::UnknownConsumer(_) => UnknownConsumer::new_err(message),
        CoreError::ConsumerAssign(_) => ConsumerAssignError::new_err(message),
        CoreError::Budget(_) => BudgetExceeded::new_err(message),
        CoreError::Internal(_) => InternalError::new_err(message),
        CoreError::Protocol(_) => ProtocolError::new_err(message),
    }
}

/// `Result` with core errors lifted into Python ones.
pub trait IntoPy<T> {
    /// Maps the error through [`to_py`].
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, CoreError> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
