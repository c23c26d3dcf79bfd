//! How the phases hand their events to the stream, one at a time.
//!
//! A phase awaits [`Emitter::emit`]; the future stays pending until the driver has taken
//! the event and yielded it, so the consumer sees every event before the phase goes on,
//! exactly as a `yield` inside the phase would behave. This matters for raw stream events
//! (the REPL renders them as they arrive) and for consumers that react to an event
//! before the loop moves on (the engine cancels on the usage that crosses the budget).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use crate::event::LoopEvent;

#[derive(Debug, Default)]
struct Slot {
    events: VecDeque<LoopEvent>,
    /// The phase waiting for its event to be taken.
    waiting: Option<Waker>,
}

/// The phases' end of the hand-off; the driver holds a clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Emitter {
    slot: Arc<Mutex<Slot>>,
}

/// What driving a phase future produced next.
#[derive(Debug)]
pub(crate) enum Progress<T> {
    /// The phase emitted this event and waits until the driver asks for more.
    Event(LoopEvent),
    /// The phase finished.
    Done(T),
}

impl Emitter {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `event` on; returns once the driver has taken it.
    pub(crate) async fn emit(&self, event: LoopEvent) {
        self.slot().events.push_back(event);
        std::future::poll_fn(|cx| {
            let mut slot = self.slot();
            if slot.events.is_empty() {
                Poll::Ready(())
            } else {
                slot.waiting = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }

    fn take(&self) -> Option<LoopEvent> {
        let mut slot = self.slot();
        let event = slot.events.pop_front();
        if slot.events.is_empty()
            && let Some(waker) = slot.waiting.take()
        {
            waker.wake();
        }
        event
    }

    /// Polls `phase` until it emits an event or finishes.
    pub(crate) async fn next<F: Future + Unpin>(&self, phase: &mut F) -> Progress<F::Output> {
        std::future::poll_fn(|cx| {
            if let Some(event) = self.take() {
                return Poll::Ready(Progress::Event(event));
            }
            match Pin::new(&mut *phase).poll(cx) {
                Poll::Ready(out) => Poll::Ready(Progress::Done(out)),
                Poll::Pending => self
                    .take()
                    .map_or(Poll::Pending, |event| Poll::Ready(Progress::Event(event))),
            }
        })
        .await
    }

    /// Events emitted by a phase that finished without waiting for them (none, when
    /// every `emit` was awaited).
    pub(crate) fn drain(&self) -> Vec<LoopEvent> {
        std::iter::from_fn(|| self.take()).collect()
    }
}

/// Runs `phase` to its end and returns what it emitted and what it returned.
#[cfg(test)]
pub(crate) async fn run_phase<T>(
    emitter: &Emitter,
    phase: impl Future<Output = T>,
) -> (Vec<LoopEvent>, T) {
    let mut phase = std::pin::pin!(phase);
    let mut events = Vec::new();
    loop {
        match emitter.next(&mut phase).await {
            Progress::Event(event) => events.push(event),
            Progress::Done(out) => {
                events.extend(emitter.drain());
                return (events, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_phase_waits_at_each_event_until_the_driver_took_it() {
        let emitter = Emitter::default();
        let reached = AtomicUsize::new(0);
        let phase = async {
            emitter.emit(LoopEvent::Tombstone).await;
            reached.store(1, Ordering::SeqCst);
            emitter.emit(LoopEvent::Tombstone).await;
            reached.store(2, Ordering::SeqCst);
            "done"
        };
        let mut phase = std::pin::pin!(phase);
        assert!(matches!(
            emitter.next(&mut phase).await,
            Progress::Event(LoopEvent::Tombstone)
        ));
        assert_eq!(reached.load(Ordering::SeqCst), 0);
        assert!(matches!(
            emitter.next(&mut phase).await,
            Progress::Event(LoopEvent::Tombstone)
        ));
        assert_eq!(reached.load(Ordering::SeqCst), 1);
        assert!(matches!(
            emitter.next(&mut phase).await,
            Progress::Done("done")
        ));
        assert_eq!(reached.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn run_phase_collects_the_events_in_order() {
        let emitter = Emitter::default();
        let (events, out) = run_phase(&emitter, async {
            emitter.emit(LoopEvent::Tombstone).await;
            emitter
                .emit(LoopEvent::Fallback {
                    original: "a".into(),
                    fallback: "b".into(),
                })
                .await;
            7
        })
        .await;
        assert_eq!(out, 7);
        assert!(matches!(
            events.as_slice(),
            [LoopEvent::Tombstone, LoopEvent::Fallback { .. }]
        ));
    }
}
