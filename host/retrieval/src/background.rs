//! A retrieval server on a thread of its own, for synchronous callers (other
//! crates' tests): bind, get the address, drop to stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::index::Index;
use crate::server::serve;

/// A running server; dropping it stops it.
pub struct BackgroundServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundServer {
    /// Binds `addr` (port 0 picks a free one) and serves `index` there.
    pub fn start(
        addr: SocketAddr,
        index: Arc<Index>,
        default_topk: usize,
    ) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("skyrl-retrieval".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let served = async {
                        serve(
                            tokio::net::TcpListener::from_std(listener)?,
                            index,
                            default_topk,
                        )
                        .await
                    };
                    tokio::select! {
                        result = served => {
                            if let Err(e) = result {
                                tracing::warn!(error = %e, "retrieval server stopped");
                            }
                        }
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Self {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its `/retrieve` URL, as the search environment's `search_url` takes.
    pub fn retrieve_url(&self) -> String {
        format!("http://{}/retrieve", self.addr)
    }
}

impl Drop for BackgroundServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
