//! PyTorch's `TCPStore` wire protocol (the key-value store behind
//! `torch.distributed` rendezvous and vLLM's `StatelessProcessGroup`), both
//! ends: [`StoreServer`] is the master a rank-0 process hosts, [`StoreClient`]
//! what the other ranks connect with.
//!
//! The protocol (torch 2.x, `use_libuv=False` and libuv servers alike): a
//! client opens with `VALIDATE` + magic number and `PING` + nonce, then sends
//! commands of one type byte followed by little-endian fields; strings and
//! byte vectors are a `u64` length and the bytes. Clients prefix user keys
//! with `/` (`store.get("k")` asks for `/k`); `init/` counts connected
//! workers. Only what rendezvous needs is implemented on the client side;
//! the server answers every command a torch client sends.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

/// torch's `validationMagicNumber`.
pub const VALIDATION_MAGIC: u32 = 0x3C85_F7CE;

/// The key a torch `TCPStore` with a world size increments once per client.
pub const INIT_KEY: &str = "init/";

/// `c10d::detail::QueryType`.
mod query {
    pub const VALIDATE: u8 = 0;
    pub const SET: u8 = 1;
    pub const COMPARE_SET: u8 = 2;
    pub const GET: u8 = 3;
    pub const ADD: u8 = 4;
    pub const CHECK: u8 = 5;
    pub const WAIT: u8 = 6;
    pub const GETNUMKEYS: u8 = 7;
    pub const DELETE_KEY: u8 = 8;
    pub const APPEND: u8 = 9;
    pub const MULTI_GET: u8 = 10;
    pub const MULTI_SET: u8 = 11;
    pub const CANCEL_WAIT: u8 = 12;
    pub const PING: u8 = 13;
}

/// `CheckResponseType` / `WaitResponseType` values.
const READY: u8 = 0;
const NOT_READY: u8 = 1;
const STOP_WAITING: u8 = 0;
const WAIT_CANCELED: u8 = 1;

/// Keys and values of a store, with a condition variable for waiters.
#[derive(Default)]
struct Shared {
    map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
    changed: Condvar,
}

impl Shared {
    fn set(&self, key: Vec<u8>, value: Vec<u8>) {
        self.map.lock().expect("store lock").insert(key, value);
        self.changed.notify_all();
    }

    fn has_all(&self, keys: &[Vec<u8>]) -> bool {
        let map = self.map.lock().expect("store lock");
        keys.iter().all(|k| map.contains_key(k))
    }
}

/// A `TCPStore` master: accepts torch clients on its own threads until dropped.
pub struct StoreServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl StoreServer {
    /// Listens on `addr` (port 0 picks a free one).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let shared = Arc::new(Shared::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (shared.clone(), stop.clone());
        let accept = std::thread::Builder::new()
            .name("skyrl-tcpstore".into())
            .spawn(move || accept_loop(listener, s, st))?;
        Ok(Self {
            addr,
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets `key` (the full key: torch clients read `store.get("k")` from `/k`).
    pub fn set(&self, key: &str, value: Vec<u8>) {
        self.shared.set(key.as_bytes().to_vec(), value);
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.shared
            .map
            .lock()
            .expect("store lock")
            .get(key.as_bytes())
            .cloned()
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                let (s, st) = (shared.clone(), stop.clone());
                let spawned = std::thread::Builder::new()
                    .name("skyrl-tcpstore-conn".into())
                    .spawn(move || {
                        if let Err(e) = serve_client(stream, &s, &st) {
                            if e.kind() != io::ErrorKind::UnexpectedEof {
                                debug!(%peer, "tcpstore client ended: {e}");
                            }
                        }
                    });
                if let Err(e) = spawned {
                    warn!("cannot start a tcpstore connection thread: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                warn!("tcpstore accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn read_u8(r: &mut impl Read) -> io::Result<u8> {
    let mut b = [0u8; 1];
    r.read_exact(&mut b)?;
    Ok(b[0])
}

fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// Longest key or value accepted (a bound against garbage lengths).
const MAX_FIELD: u64 = 1 << 30;

fn read_bytes(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let n = read_u64(r)?;
    if n > MAX_FIELD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("field of {n} bytes"),
        ));
    }
    let mut v = vec![0u8; n as usize];
    r.read_exact(&mut v)?;
    Ok(v)
}

fn read_keys(r: &mut impl Read) -> io::Result<Vec<Vec<u8>>> {
    let n = read_u64(r)?;
    if n > 1 << 20 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{n} keys"),
        ));
    }
    (0..n).map(|_| read_bytes(r)).collect()
}

fn put_bytes(out: &mut Vec<u8>, v: &[u8]) {
    out.extend_from_slice(&(v.len() as u64).to_le_bytes());
    out.extend_from_slice(v);
}

/// Answers one client's commands until it disconnects (or the server stops).
fn serve_client(mut s: TcpStream, shared: &Shared, stop: &AtomicBool) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let cmd = read_u8(&mut s)?;
        match cmd {
            query::VALIDATE => {
                let magic = read_u32(&mut s)?;
                if magic != VALIDATION_MAGIC {
                    warn!("tcpstore client sent a bad validation number {magic:#x}");
                    let _ = s.shutdown(Shutdown::Both);
                    return Ok(());
                }
            }
            query::PING => {
                let nonce = read_u32(&mut s)?;
                s.write_all(&nonce.to_le_bytes())?;
            }
            query::SET => {
                let key = read_bytes(&mut s)?;
                let value = read_bytes(&mut s)?;
                shared.set(key, value);
            }
            query::COMPARE_SET => {
                let key = read_bytes(&mut s)?;
                let expected = read_bytes(&mut s)?;
                let desired = read_bytes(&mut s)?;
                let answer = {
                    let mut map = shared.map.lock().expect("store lock");
                    match map.get(&key) {
                        None if expected.is_empty() => {
                            map.insert(key, desired.clone());
                            desired
                        }
                        None => expected,
                        Some(cur) if *cur == expected => {
                            map.insert(key, desired.clone());
                            desired
                        }
                        Some(cur) => cur.clone(),
                    }
                };
                shared.changed.notify_all();
                let mut out = Vec::new();
                put_bytes(&mut out, &answer);
                s.write_all(&out)?;
            }
            query::GET => {
                let key = read_bytes(&mut s)?;
                let value = shared
                    .map
                    .lock()
                    .expect("store lock")
                    .get(&key)
                    .cloned()
                    .unwrap_or_default();
                let mut out = Vec::new();
                put_bytes(&mut out, &value);
                s.write_all(&out)?;
            }
            query::ADD => {
                let key = read_bytes(&mut s)?;
                let delta = read_u64(&mut s)? as i64;
                let value = {
                    let mut map = shared.map.lock().expect("store lock");
                    let cur = map
                        .get(&key)
                        .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                        .unwrap_or(0);
                    let next = cur.wrapping_add(delta);
                    map.insert(key, next.to_string().into_bytes());
                    next
                };
                shared.changed.notify_all();
                s.write_all(&value.to_le_bytes())?;
            }
            query::CHECK => {
                let keys = read_keys(&mut s)?;
                let ready = if shared.has_all(&keys) {
                    READY
                } else {
                    NOT_READY
                };
                s.write_all(&[ready])?;
            }
            query::WAIT => {
                let keys = read_keys(&mut s)?;
                wait_for(&mut s, shared, stop, &keys)?;
            }
            query::GETNUMKEYS => {
                let n = shared.map.lock().expect("store lock").len() as i64;
                s.write_all(&n.to_le_bytes())?;
            }
            query::DELETE_KEY => {
                let key = read_bytes(&mut s)?;
                let removed = shared.map.lock().expect("store lock").remove(&key);
                s.write_all(&(removed.is_some() as i64).to_le_bytes())?;
            }
            query::APPEND => {
                let key = read_bytes(&mut s)?;
                let value = read_bytes(&mut s)?;
                shared
                    .map
                    .lock()
                    .expect("store lock")
                    .entry(key)
                    .or_default()
                    .extend_from_slice(&value);
                shared.changed.notify_all();
            }
            query::MULTI_GET => {
                let keys = read_keys(&mut s)?;
                let map = shared.map.lock().expect("store lock");
                let mut out = Vec::new();
                for k in &keys {
                    put_bytes(&mut out, map.get(k).map(Vec::as_slice).unwrap_or(&[]));
                }
                drop(map);
                s.write_all(&out)?;
            }
            query::MULTI_SET => {
                let n = read_u64(&mut s)?;
                for _ in 0..n {
                    let key = read_bytes(&mut s)?;
                    let value = read_bytes(&mut s)?;
                    shared.map.lock().expect("store lock").insert(key, value);
                }
                shared.changed.notify_all();
            }
            query::CANCEL_WAIT => s.write_all(&[WAIT_CANCELED])?,
            other => {
                warn!("tcpstore client sent unknown command {other}; closing it");
                let _ = s.shutdown(Shutdown::Both);
                return Ok(());
            }
        }
    }
}

/// Blocks until every key exists (answers `STOP_WAITING`), or until the client
/// cancels (answers `WAIT_CANCELED`) or the server stops.
fn wait_for(
    s: &mut TcpStream,
    shared: &Shared,
    stop: &AtomicBool,
    keys: &[Vec<u8>],
) -> io::Result<()> {
    let tick = Duration::from_millis(50);
    loop {
        {
            let map = shared.map.lock().expect("store lock");
            if keys.iter().all(|k| map.contains_key(k)) {
                drop(map);
                return s.write_all(&[STOP_WAITING]);
            }
            let _ = shared.changed.wait_timeout(map, tick).expect("store lock");
        }
        if stop.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "store stopped"));
        }
        // A client whose own timeout expired sends CANCEL_WAIT.
        s.set_nonblocking(true)?;
        let mut b = [0u8; 1];
        let peeked = s.peek(&mut b);
        s.set_nonblocking(false)?;
        match peeked {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {
                let cmd = read_u8(s)?;
                if cmd == query::CANCEL_WAIT {
                    return s.write_all(&[WAIT_CANCELED]);
                }
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("command {cmd} while waiting"),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// A `TCPStore` client (a non-master rank).
pub struct StoreClient {
    stream: TcpStream,
    timeout: Duration,
}

impl StoreClient {
    /// Connects to the master at `addr`, retrying until `timeout`, and
    /// validates the connection; with `world_size`, counts itself in `init/`
    /// as torch clients do.
    pub fn connect(
        addr: impl ToSocketAddrs,
        world_size: Option<usize>,
        timeout: Duration,
    ) -> io::Result<Self> {
        let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
        let start = Instant::now();
        let stream = loop {
            let left = timeout.saturating_sub(start.elapsed());
            let attempt = addrs.iter().find_map(|a| {
                TcpStream::connect_timeout(a, left.max(Duration::from_millis(1))).ok()
            });
            match attempt {
                Some(s) => break s,
                None if start.elapsed() >= timeout => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no tcpstore at {addrs:?} within {timeout:?}"),
                    ))
                }
                None => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let mut c = Self { stream, timeout };
        let mut hello = vec![query::VALIDATE];
        hello.extend_from_slice(&VALIDATION_MAGIC.to_le_bytes());
        let nonce = std::process::id() ^ 0x5eed;
        hello.push(query::PING);
        hello.extend_from_slice(&nonce.to_le_bytes());
        c.stream.write_all(&hello)?;
        if read_u32(&mut c.stream)? != nonce {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the tcpstore answered the ping with another nonce",
            ));
        }
        if world_size.is_some() {
            c.add(INIT_KEY, 1)?;
        }
        Ok(c)
    }

    /// Adds `delta` to the integer at `key` (full key); returns the new value.
    pub fn add(&mut self, key: &str, delta: i64) -> io::Result<i64> {
        let mut out = vec![query::ADD];
        put_bytes(&mut out, key.as_bytes());
        out.extend_from_slice(&delta.to_le_bytes());
        self.stream.write_all(&out)?;
        Ok(read_u64(&mut self.stream)? as i64)
    }

    /// Sets `key` (full key).
    pub fn set(&mut self, key: &str, value: &[u8]) -> io::Result<()> {
        let mut out = vec![query::SET];
        put_bytes(&mut out, key.as_bytes());
        put_bytes(&mut out, value);
        self.stream.write_all(&out)
    }

    /// Waits (up to the connect timeout) until `key` (full key) is set, then reads it.
    pub fn get(&mut self, key: &str) -> io::Result<Vec<u8>> {
        let mut out = vec![query::WAIT];
        out.extend_from_slice(&1u64.to_le_bytes());
        put_bytes(&mut out, key.as_bytes());
        self.stream.write_all(&out)?;
        match read_u8(&mut self.stream) {
            Ok(STOP_WAITING) => {}
            Ok(other) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected wait answer {other}"),
                ))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("`{key}` was not set within {:?}", self.timeout),
                ))
            }
            Err(e) => return Err(e),
        }
        let mut out = vec![query::GET];
        put_bytes(&mut out, key.as_bytes());
        self.stream.write_all(&out)?;
        read_bytes(&mut self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_server_rendezvous() {
        let server = StoreServer::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        let waiter = std::thread::spawn(move || {
            let mut c = StoreClient::connect(addr, Some(2), Duration::from_secs(5)).unwrap();
            c.get("/late").unwrap()
        });
        std::thread::sleep(Duration::from_millis(100));
        let mut c = StoreClient::connect(addr, Some(2), Duration::from_secs(5)).unwrap();
        c.set("/late", b"value").unwrap();
        assert_eq!(waiter.join().unwrap(), b"value");
        assert_eq!(server.get(INIT_KEY).unwrap(), b"2");
        assert_eq!(c.add("/n", 5).unwrap(), 5);
        assert_eq!(c.add("/n", -2).unwrap(), 3);
        server.set("/direct", vec![1, 2]);
        assert_eq!(c.get("/direct").unwrap(), vec![1, 2]);
    }

    #[test]
    fn a_missing_key_times_out() {
        let server = StoreServer::bind("127.0.0.1:0").unwrap();
        let mut c =
            StoreClient::connect(server.local_addr(), None, Duration::from_millis(300)).unwrap();
        let e = c.get("/never").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    }

    #[test]
    fn nobody_listening_times_out() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = StoreClient::connect(("127.0.0.1", port), None, Duration::from_millis(300))
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
