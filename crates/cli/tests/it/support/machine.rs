//! The machine, shared by the tests of this binary, which the harness runs at once on its
//! threads. Most tests only need it not to be swamped; a few measure the machine itself
//! and must have it [`alone`]: while one does, every other test waits at its next binary,
//! server or load (each of which holds the machine [`shared`] while it lives).
//!
//! A reader-writer lock: `alone` takes it to write, `shared` to read. A thread takes the
//! read side once however many shared holds it nests (a Puma, then a binary run beside
//! it), so a waiting writer cannot deadlock a thread against itself; on the thread that
//! holds the machine alone, `shared` takes nothing.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

thread_local! {
    static ALONE_HERE: Cell<bool> = const { Cell::new(false) };
    static SHARED_DEPTH: Cell<usize> = const { Cell::new(0) };
    static SHARED_GUARD: RefCell<Option<RwLockReadGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// The machine held for one test alone, until dropped.
pub struct Alone {
    _guard: RwLockWriteGuard<'static, ()>,
}

impl Drop for Alone {
    fn drop(&mut self) {
        ALONE_HERE.with(|a| a.set(false));
    }
}

/// Waits until no other test holds the machine, then holds it alone.
pub fn alone() -> Alone {
    let guard = MACHINE.write().unwrap_or_else(|e| e.into_inner());
    ALONE_HERE.with(|a| a.set(true));
    Alone { _guard: guard }
}

/// The machine held beside other tests, until dropped. Not `Send`: it is released on the
/// thread that took it.
pub struct Shared {
    taken: bool,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !self.taken {
            return;
        }
        let depth = SHARED_DEPTH.with(|d| {
            d.set(d.get() - 1);
            d.get()
        });
        if depth == 0 {
            SHARED_GUARD.with(|g| g.borrow_mut().take());
        }
    }
}

/// Holds the machine beside other tests; waits while a test holds it alone.
pub fn shared() -> Shared {
    if ALONE_HERE.with(Cell::get) {
        return Shared {
            taken: false,
            _not_send: PhantomData,
        };
    }
    let depth = SHARED_DEPTH.with(Cell::get);
    if depth == 0 {
        let guard = MACHINE.read().unwrap_or_else(|e| e.into_inner());
        SHARED_GUARD.with(|g| *g.borrow_mut() = Some(guard));
    }
    SHARED_DEPTH.with(|d| d.set(depth + 1));
    Shared {
        taken: true,
        _not_send: PhantomData,
    }
}

#[test]
fn shared_holds_nest_and_alone_waits_for_them() {
    use std::sync::mpsc;
    use std::time::Duration;
    let outer = shared();
    let inner = shared();
    let (tx, rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let _alone = alone();
        tx.send(()).unwrap();
    });
    drop(inner);
    assert!(
        rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "alone got the machine while a shared hold was still held"
    );
    drop(outer);
    // Other tests of the binary may hold the machine shared (a run of minutes): alone
    // waits for them too.
    rx.recv_timeout(Duration::from_secs(900))
        .expect("alone never got the machine after the last shared hold");
    other.join().unwrap();
}
