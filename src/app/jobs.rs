//! Long solver jobs (CITO, training, sweeps, rollouts) on threads of their own.
//!
//! Bevy's async compute pool is sized from the core count: on a 2-core machine it has one
//! thread, which the simulation's step batches need every frame. A job that holds a pool thread
//! for seconds stalls the simulation on screen, so jobs run on a dedicated thread and hand their
//! result back through a [`Task`] that the usual `check_ready` polling reads.

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

/// Runs `job` on a new thread named `name`; the task yields its result, or `Err` with a
/// message if the thread could not start or panicked.
pub fn spawn<T, F>(name: &str, job: F) -> Task<Result<T, String>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    let slot = Arc::new(Mutex::new(Slot { value: None, waker: None, lost: false }));
    let delivery = Delivery(slot.clone());
    let started = std::thread::Builder::new().name(name.into()).spawn(move || {
        let v = job();
        delivery.0.lock().unwrap_or_else(|e| e.into_inner()).value = Some(v);
        drop(delivery);
    });
    let what = name.to_string();
    match started {
        Ok(_) => AsyncComputeTaskPool::get().spawn(async move {
            Pending(slot)
                .await
                .unwrap_or_else(|| Err(format!("the {what} job stopped unexpectedly (a panic; see the log)")))
        }),
        Err(e) => AsyncComputeTaskPool::get().spawn(async move { Err(format!("could not start the {what} job: {e}")) }),
    }
}
