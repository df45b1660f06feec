//! The async API's hooks when the `tokio` feature is off: the commit path calls the same
//! methods either way (no `cfg` in the core), and here they do nothing.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::commit::Inner;
use crate::error::Result;

/// No futures wait on a log built without `tokio`.
#[derive(Default)]
pub(crate) struct Waiters;

impl Waiters {
    #[inline]
    pub(crate) fn wake_filled(&self, _value: u64) {}
    #[inline]
    pub(crate) fn wake_durable(&self, _value: u64) {}
    #[inline]
    pub(crate) fn wake_all(&self) {}
    #[inline]
    pub(crate) fn shutdown(&self) {}
}

/// No sync service either: blocking committers sync for themselves.
pub(crate) fn start_sync_service(_: &Arc<Inner>, _: &mut Vec<JoinHandle<()>>) -> Result<()> {
    Ok(())
}
