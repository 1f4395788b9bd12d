//! The "holder" pause: a worker process armed by the coordinator stops itself (SIGSTOP) right
//! after one of its buyers acquires a lock, so the pause hits a lock holder exactly, freezing
//! its watchdog and keep-alive tasks with it, like a long GC pause.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static ARMED: AtomicBool = AtomicBool::new(false);
static HOOK: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Installs what to do when the armed point is reached (the worker: tell the coordinator, then
/// stop). Without a hook, arming does nothing.
pub fn set_hook(hook: Box<dyn Fn() + Send + Sync>) {
    let _ = HOOK.set(hook);
}

/// Arms (or disarms) the pause: the next lock acquired in this process triggers the hook once.
pub fn arm(on: bool) {
    ARMED.store(on, Ordering::SeqCst);
}

/// Called right after a lock is acquired.
pub fn lock_acquired() {
    if ARMED.load(Ordering::Relaxed)
        && ARMED.swap(false, Ordering::SeqCst)
        && let Some(hook) = HOOK.get()
    {
        hook();
    }
}
