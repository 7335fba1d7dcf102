//! Maps core errors to the `cursorkit.errors` classes (imported once, lazily).

use cursorkit_core::CoreError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// A `cursorkit.errors.<name>` exception carrying `message`.
pub fn error(py: Python<'_>, name: &str, message: String) -> PyErr {
    let class = ERRORS_MODULE
        .get_or_try_init(py, || py.import("cursorkit.errors").map(Bound::unbind))
        .and_then(|m| m.bind(py).getattr(name))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(class) => PyErr::from_type(class, message),
        Err(import_failure) => import_failure,
    }
}

/// The Python exception for a core error.
pub fn to_py(py: Python<'_>, e: CoreError) -> PyErr {
    let name = match &e {
        CoreError::InvalidPosition(_) => "InvalidPosition",
        CoreError::InvalidArgument(_) => "InvalidArgument",
        CoreError::UnknownLedger(_) => "UnknownLedger",
        CoreError::LengthMismatch { .. } => "LengthMismatch",
        CoreError::Corrupt(_) => "CorruptSnapshot",
        CoreError::UnsupportedVersion { .. } => "UnsupportedVersion",
        CoreError::UnknownConsumer(_) => "UnknownConsumer",
        CoreError::ConsumerAssign(_) => "ConsumerAssignError",
        CoreError::Budget(_) => "BudgetExceeded",
        CoreError::Internal(_) => "InternalError",
    };
    error(py, name, e.to_string())
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
