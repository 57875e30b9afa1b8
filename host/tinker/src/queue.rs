//! The model thread's queue: one lane per client (a session, or a sampler),
//! served round-robin. A lane's jobs run in the order they arrived, so a
//! model's calls apply in the order its client sent them; a client that
//! queues a long backlog delays another client's next request by at most
//! one job per busy lane, not by its whole backlog.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};

/// A round-robin queue of `T` by lane.
pub struct FairQueue<T> {
    lanes: Mutex<Lanes<T>>,
    ready: Condvar,
}

struct Lanes<T> {
    queued: HashMap<String, VecDeque<T>>,
    /// Lanes with work, in the order they are served next.
    turn: VecDeque<String>,
    closed: bool,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        Self {
            lanes: Mutex::new(Lanes {
                queued: HashMap::new(),
                turn: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<T> FairQueue<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Lanes<T>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `item` at the back of `lane`; false once the queue is closed.
    pub fn push(&self, lane: &str, item: T) -> bool {
        let mut l = self.lock();
        if l.closed {
            return false;
        }
        let q = l.queued.entry(lane.to_string()).or_default();
        q.push_back(item);
        if q.len() == 1 {
            l.turn.push_back(lane.to_string());
        }
        drop(l);
        self.ready.notify_one();
        true
    }

    /// The next item (the front of the lane whose turn it is), waiting for
    /// one; `None` once closed and empty.
    pub fn pop(&self) -> Option<T> {
        let mut l = self.lock();
        loop {
            if let Some(lane) = l.turn.pop_front() {
                let q = l
                    .queued
                    .get_mut(&lane)
                    .expect("a lane with a turn has work");
                let item = q.pop_front().expect("a lane with a turn has work");
                if q.is_empty() {
                    l.queued.remove(&lane);
                } else {
                    l.turn.push_back(lane);
                }
                return Some(item);
            }
            if l.closed {
                return None;
            }
            l = self.ready.wait(l).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Refuses further pushes; `pop` drains what is queued, then ends.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_take_turns_and_keep_their_own_order() {
        let q = FairQueue::default();
        for i in 0..4 {
            q.push("busy", format!("busy{i}"));
        }
        q.push("quick", "quick0".to_string());
        q.push("quick", "quick1".to_string());
        q.close();
        assert!(!q.push("late", "x".to_string()));
        let order: Vec<String> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            ["busy0", "quick0", "busy1", "quick1", "busy2", "busy3"]
        );
    }

    #[test]
    fn pop_waits_for_a_push_from_another_thread() {
        let q = std::sync::Arc::new(FairQueue::default());
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || q2.pop());
        std::thread::sleep(std::time::Duration::from_millis(50));
        q.push("a", 7);
        assert_eq!(waiter.join().unwrap(), Some(7));
    }
}
