//! Engine errors as Python exceptions, and the one gate every engine call goes through.
//!
//! The exception classes live in `python/shale/_errors.py` (plain Python, so that
//! `InvalidArgumentError` can also be a `ValueError` and `IoError` an `OSError`); this file
//! looks them up when it raises. [`run`] releases the GIL around an engine call and turns
//! a panic inside it into `shale.Error` instead of letting it unwind into the interpreter.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Why an engine call failed, carried across the GIL release as plain Rust data.
pub(crate) enum Failure {
    Engine(shale::Error),
    /// A call to a replicated cluster (`shale.Cluster`).
    Client(shale_client::ClientError),
    /// A panic inside the engine or the bindings: a bug, reported as `shale.Error`.
    Panic(String),
}

impl From<shale::Error> for Failure {
    fn from(e: shale::Error) -> Self {
        Failure::Engine(e)
    }
}

/// Run `f` with the GIL released (other Python threads run meanwhile) and any panic
/// caught; map its failure to the matching `shale` exception.
pub(crate) fn run<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T, Failure> + Send,
{
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|panic| Err(Failure::Panic(panic_message(panic.as_ref()))))
    })
    .map_err(|failure| to_py(py, failure))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// The `shale` exception for `failure`, with the error's fields as attributes.
pub(crate) fn to_py(py: Python<'_>, failure: Failure) -> PyErr {
    match build(py, failure) {
        Ok(err) | Err(err) => err,
    }
}

/// Raise `shale.<class>(message)` from code that has no engine error (a bad argument
/// found by the bindings themselves).
pub(crate) fn new_err(py: Python<'_>, class: &str, message: String) -> PyErr {
    match exception_class(py, class).and_then(|cls| cls.call1((message,))) {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("shale._errors")?.getattr(name)
}

fn build(py: Python<'_>, failure: Failure) -> PyResult<PyErr> {
    use shale::Error as E;
    let error = match failure {
        Failure::Engine(e) => e,
        Failure::Panic(why) => {
            return Ok(new_err(
                py,
                "Error",
                format!("internal error (a panic in shale, please report it): {why}"),
            ));
        }
        Failure::Client(e) => return Ok(client_error(py, &e)),
    };
    let message = error.to_string();
    let exc = match &error {
        E::Io { op, path, source } => {
            // OSError(errno, strerror, filename) fills .errno, .strerror and .filename.
            let cls = exception_class(py, "IoError")?;
            let exc = match source.raw_os_error() {
                Some(errno) => cls.call1((errno, message, path_str(path)))?,
                None => cls.call1((message,))?,
            };
            exc.setattr("op", *op)?;
            exc.setattr("path", path_str(path))?;
            exc
        }
        E::Corruption {
            file,
            offset,
            reason,
        } => {
            let exc = exception_class(py, "CorruptionError")?.call1((message,))?;
            exc.setattr("file", path_str(file))?;
            exc.setattr("offset", *offset)?;
            exc.setattr("reason", reason.as_str())?;
            exc
        }
        E::InvalidArgument(_) => exception_class(py, "InvalidArgumentError")?.call1((message,))?,
        E::InvalidOptions(problems) => {
            let exc = exception_class(py, "InvalidArgumentError")?.call1((message,))?;
            exc.setattr("problems", problems.clone())?;
            exc
        }
        E::Locked(path) => {
            let exc = exception_class(py, "LockedError")?.call1((message,))?;
            exc.setattr("path", path_str(path))?;
            exc
        }
        E::Poisoned(_) => exception_class(py, "PoisonedError")?.call1((message,))?,
        E::Closed => exception_class(py, "ClosedError")?.call1((message,))?,
        E::Conflict(_) => exception_class(py, "ConflictError")?.call1((message,))?,
        E::Index(_) => exception_class(py, "EmbeddingError")?.call1((message,))?,
        // A variant added to the engine after these bindings were written.
        _ => exception_class(py, "Error")?.call1((message,))?,
    };
    Ok(PyErr::from_value(exc))
}

/// The `shale` exception for a cluster's answer.
fn client_error(py: Python<'_>, error: &shale_client::ClientError) -> PyErr {
    use shale_client::ClientError as E;
    let class = match error {
        E::Refused(_) | E::Config(_) => "InvalidArgumentError",
        E::NotFound(_) => "NotFoundError",
        E::Unauthenticated(_) | E::PermissionDenied(_) => "PermissionDeniedError",
        E::Timeout { .. } => "DeadlineError",
        E::Ambiguous(_) | E::SessionExpired(_) => "AmbiguousError",
        E::CrossShard { .. } => "CrossShardError",
        _ => "ServerError",
    };
    new_err(py, class, error.to_string())
}

/// Paths in exceptions are `str`, as in `OSError.filename`.
fn path_str(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

/// A `KeyError` carrying the key as the caller passed it.
pub(crate) fn key_error(py: Python<'_>, key: &[u8]) -> PyErr {
    pyo3::exceptions::PyKeyError::new_err(PyBytes::new(py, key).unbind())
}
