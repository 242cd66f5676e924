//! [`Pending`]: a value that a Python handle uses until it ends it once (a write batch until
//! written or discarded, a transaction until committed or discarded), and the `with`-block
//! exit both handles share: finish the value if the block ended normally, drop it if it
//! raised.
//!
//! Threads: the value sits behind a mutex, so Python threads may share the handle; a
//! poisoned mutex is taken over (the value holds no invariant a panic could break halfway).

use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;

use crate::errors::new_err;

pub(crate) struct Pending<T> {
    /// `None` once ended.
    slot: Mutex<Option<T>>,
    /// The message of the `InvalidArgumentError` a call raises after the end.
    ended: &'static str,
}

impl<T> Pending<T> {
    pub(crate) fn new(value: T, ended: &'static str) -> Self {
        Pending {
            slot: Mutex::new(Some(value)),
            ended,
        }
    }

    /// The error of a call after the end.
    pub(crate) fn ended(&self, py: Python<'_>) -> PyErr {
        new_err(py, "InvalidArgumentError", self.ended.to_string())
    }

    /// Run `f` on the value, or raise if it has ended.
    pub(crate) fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut T) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_mut() {
            Some(value) => f(value),
            None => Err(self.ended(py)),
        }
    }

    /// End it: the value, or `None` if it had ended already.
    pub(crate) fn take(&self) -> Option<T> {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// `f` of the value, `None` once ended.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref())
    }

    /// A `with` block's `__exit__`: `finish` the value if the block ended normally and
    /// nothing ended it inside, drop it if the block raised. Never swallows the exception.
    pub(crate) fn exit(
        &self,
        exc_type: &Bound<'_, PyAny>,
        finish: impl FnOnce(T) -> PyResult<()>,
    ) -> PyResult<bool> {
        match self.take() {
            Some(value) if exc_type.is_none() => finish(value)?,
            _ => {}
        }
        Ok(false)
    }
}
