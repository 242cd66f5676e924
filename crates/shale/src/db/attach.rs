//! Attaching and detaching write hooks ([`Db::attach`], [`Db::detach`]), finding one
//! ([`Db::hook`]), admitting a batch to them before it queues, and closing them with the
//! database. The contract a hook keeps, and when each of its methods runs, is `hook.rs`.
//!
//! Thread safety: the hooks live in `LogState::hooks`, under the `log` lock; `hook_list`
//! mirrors them for `admit`, which runs without that lock.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::hook::WriteHook;
use super::state::DbInner;
use super::Db;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::sync::lock;

impl DbInner {
    /// Admit `batch` to every attached hook ([`WriteHook::admit`]), before it queues.
    ///
    /// # Errors
    /// The first hook's refusal.
    pub(super) fn admit(&self, batch: &WriteBatch) -> Result<()> {
        if !self.has_hooks.load(Ordering::Acquire) {
            return Ok(());
        }
        let hooks = Arc::clone(&self.hook_list.read().unwrap_or_else(|e| e.into_inner()));
        hooks.iter().try_for_each(|hook| hook.admit(batch))
    }
}

impl Db {
    /// Install `hook` for every write committed from now on, and return a snapshot of
    /// exactly the writes committed before it (see the module documentation).
    ///
    /// # Errors
    /// `InvalidArgument` if a hook of that name is attached; `Closed`.
    pub fn attach(&self, hook: Arc<dyn WriteHook>) -> Result<crate::Snapshot> {
        self.inner.check_open()?;
        let mut log = lock(&self.inner.log);
        if log.hooks.iter().any(|h| h.name() == hook.name()) {
            return Err(Error::invalid(format!(
                "a write hook named {:?} is already attached",
                hook.name()
            )));
        }
        log.hooks.push(Arc::clone(&hook));
        *self
            .inner
            .hook_list
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::from(log.hooks.as_slice());
        self.inner.has_hooks.store(true, Ordering::Release);
        // Under the log lock every committed write is visible: the snapshot holds exactly
        // the writes before the hook.
        Ok(self.snapshot())
    }

    /// Detach the hook named `name` (a layer whose open failed after it attached): later
    /// writes no longer see it. Returns it, if it was attached.
    pub fn detach(&self, name: &str) -> Option<Arc<dyn WriteHook>> {
        let mut log = lock(&self.inner.log);
        let at = log.hooks.iter().position(|h| h.name() == name)?;
        let hook = log.hooks.remove(at);
        *self
            .inner
            .hook_list
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::from(log.hooks.as_slice());
        Some(hook)
    }

    /// The attached hook named `name`, if any.
    pub fn hook(&self, name: &str) -> Option<Arc<dyn WriteHook>> {
        lock(&self.inner.log)
            .hooks
            .iter()
            .find(|h| h.name() == name)
            .cloned()
    }

    /// Close every attached hook, first to last; the first failure is returned after all
    /// were closed. Detaches them: later writes (there are none after a close) see none.
    pub(super) fn close_hooks(&self) -> Result<()> {
        let hooks = std::mem::take(&mut lock(&self.inner.log).hooks);
        let mut result = Ok(());
        for hook in hooks {
            result = result.and(hook.close());
        }
        result
    }
}
