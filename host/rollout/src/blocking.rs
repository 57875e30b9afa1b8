//! Running plugin calls off the async threads: guest code makes WASI host
//! calls (files, clocks) that block on tokio, so env and reward calls go to
//! tokio's blocking pool, all of a batch at once.

use std::sync::Arc;

/// Runs `f` on every item concurrently on tokio's blocking pool and collects the results.
pub(crate) async fn on_blocking_pool<T, R, F>(items: Vec<T>, f: F) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> R + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let handles: Vec<_> = items
        .into_iter()
        .map(|item| {
            let f = f.clone();
            tokio::task::spawn_blocking(move || f(item))
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("env task panicked"));
    }
    out
}
