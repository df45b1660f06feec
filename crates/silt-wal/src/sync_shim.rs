//! Synchronization primitives, swapped for `loom`'s under `--cfg loom` so the commit path's
//! lock-free parts can be model-checked (`RUSTFLAGS="--cfg loom" cargo test -p silt-wal
//! --lib --release loom`).

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub(crate) use shim::{Condvar, Mutex};

#[cfg(not(loom))]
pub(crate) fn yield_now() {
    std::thread::yield_now();
}
#[cfg(loom)]
pub(crate) fn yield_now() {
    loom::thread::yield_now();
}

#[cfg(loom)]
mod shim {
    /// parking_lot's API over loom's mutex.
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);
    pub(crate) struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

    impl<T> Mutex<T> {
        pub(crate) fn new(v: T) -> Self {
            Mutex(loom::sync::Mutex::new(v))
        }
        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(self.0.lock().unwrap()))
        }
    }

    impl<T> std::ops::Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_ref().unwrap()
        }
    }
    impl<T> std::ops::DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_mut().unwrap()
        }
    }

    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }
        pub(crate) fn wait<T>(&self, g: &mut MutexGuard<'_, T>) {
            let inner = g.0.take().unwrap();
            g.0 = Some(self.0.wait(inner).unwrap());
        }
        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }
}
