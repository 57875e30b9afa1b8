//! Guest stdout/stderr forwarded line by line to `tracing`.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Which guest stream a writer serves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// A WASI output stream that logs each complete line of guest output.
#[derive(Clone)]
pub(crate) struct TracingOutput {
    plugin: Arc<str>,
    stream: Stream,
    pending: Arc<Mutex<Vec<u8>>>,
}

/// Lines longer than this are split, so a guest cannot grow host memory.
const MAX_LINE: usize = 16 * 1024;

impl TracingOutput {
    pub(crate) fn new(plugin: &str, stream: Stream) -> Self {
        Self {
            plugin: plugin.into(),
            stream,
            pending: Arc::default(),
        }
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let mut pending = self.pending.lock().expect("stdio lock");
        for &byte in bytes {
            if byte == b'\n' || pending.len() >= MAX_LINE {
                self.emit(&pending);
                pending.clear();
                if byte == b'\n' {
                    continue;
                }
            }
            pending.push(byte);
        }
    }

    fn emit(&self, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        match self.stream {
            Stream::Stdout => {
                tracing::info!(target: "skyrl::plugin", plugin = %self.plugin, "stdout: {text}")
            }
            Stream::Stderr => {
                tracing::warn!(target: "skyrl::plugin", plugin = %self.plugin, "stderr: {text}")
            }
        }
    }
}

impl Drop for TracingOutput {
    fn drop(&mut self) {
        if Arc::strong_count(&self.pending) == 1 {
            let pending = self.pending.lock().expect("stdio lock");
            if !pending.is_empty() {
                self.emit(&pending);
            }
        }
    }
}

impl IsTerminal for TracingOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for TracingOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for TracingOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
