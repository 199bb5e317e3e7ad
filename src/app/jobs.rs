//! Long solver jobs (CITO, training, sweeps, rollouts, policy loading) and native file dialogs
//! on threads of their own.
//!
//! Bevy's async compute pool is sized from the core count: on a 2-core machine it has one
//! thread, which the simulation's step batches need every frame. A job that holds a pool thread
//! for seconds (or a file dialog waiting for the user) stalls the simulation on screen, so jobs
//! run on a dedicated thread and hand their result back through a [`Task`] that the usual
//! `check_ready` polling reads; the pool only holds the waiting future, which does not block it.

use bevy::tasks::{AsyncComputeTaskPool, Task};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// The thread ended without a value (it panicked).
    lost: bool,
}

struct Pending<T>(Arc<Mutex<Slot<T>>>);

impl<T> Future for Pending<T> {
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.lost {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Sets `lost` if the job's thread unwinds before it delivers.
struct Delivery<T>(Arc<Mutex<Slot<T>>>);

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if s.value.is_none() {
            s.lost = true;
        }
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

/// Starts `job` on a thread named `name`; the future yields `None` if the thread could not
/// start or ended without a value (a panic).
fn start<T, F>(name: &str, job: F) -> Result<Pending<T>, std::io::Error>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Slot { value: None, waker: None, lost: false }));
    let delivery = Delivery(slot.clone());
    std::thread::Builder::new().name(name.into()).spawn(move || {
        let v = job();
        delivery.0.lock().unwrap_or_else(|e| e.into_inner()).value = Some(v);
        drop(delivery);
    })?;
    Ok(Pending(slot))
}

/// Runs `job` on a new thread named `name`; the task yields its result, or `Err` with a
/// message if the thread could not start or panicked.
pub fn spawn<T, F>(name: &str, job: F) -> Task<Result<T, String>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    let what = name.to_string();
    let started = start(name, job);
    AsyncComputeTaskPool::get().spawn(async move {
        match started {
            Ok(p) => {
                p.await.unwrap_or_else(|| Err(format!("the {what} job stopped unexpectedly (a panic; see the log)")))
            }
            Err(e) => Err(format!("could not start the {what} job: {e}")),
        }
    })
}

/// A native file dialog (which blocks its thread until the user answers) on a thread of its
/// own; `None` if cancelled or if no dialog could be shown.
pub fn dialog<T, F>(job: F) -> Task<Option<T>>
where
    T: Send + 'static,
    F: FnOnce() -> Option<T> + Send + 'static,
{
    let started = start("file dialog", job);
    AsyncComputeTaskPool::get().spawn(async move {
        match started {
            Ok(p) => p.await.flatten(),
            Err(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::tasks::{block_on, TaskPool};

    #[test]
    fn results_errors_and_panics_come_back_without_holding_the_pool() {
        AsyncComputeTaskPool::get_or_init(TaskPool::new);
        // A job that waits for a later one: both must run at once, whatever the pool's size.
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let waiting = spawn("waiting", move || rx.recv().map_err(|e| e.to_string()));
        let sending = spawn("sending", move || tx.send(7).map_err(|e| e.to_string()));
        assert_eq!(block_on(sending), Ok(()));
        assert_eq!(block_on(waiting), Ok(7));
        assert_eq!(block_on(spawn("failing", || Err::<(), _>("bad input".to_string()))), Err("bad input".into()));
        let panicked = block_on(spawn("exploding", || -> Result<(), String> { panic!("boom") }));
        assert!(panicked.unwrap_err().contains("the exploding job stopped unexpectedly"));
        assert_eq!(block_on(dialog(|| Some(3))), Some(3));
        assert_eq!(block_on(dialog(|| -> Option<u8> { panic!("no display") })), None);
    }
}
