//! vLLM's NCCL rendezvous (`StatelessProcessGroup` + `PyNcclCommunicator`,
//! what `NCCLWeightTransferEngine.trainer_init` and vLLM's workers run for
//! `/init_weight_transfer_engine`), spoken from Rust.
//!
//! Rank 0 (the trainer) hosts a torch `TCPStore` at `master_address:master_port`
//! and publishes its NCCL unique id there, pickled as vLLM's ctypes
//! `ncclUniqueId`, under `/broadcast_from/0/0`. Every other rank connects,
//! reads and unpickles it, and all call `ncclCommInitRank` followed by a
//! one-element float32 sum all-reduce (PyNccl's warm-up), which every member
//! must join.
//!
//! Sources: `vllm/distributed/utils.py` (`StatelessProcessGroup.create`,
//! `broadcast_obj`), `vllm/distributed/device_communicators/pynccl.py`
//! (`PyNcclCommunicator.__init__`), vLLM 0.20.

use std::net::SocketAddr;
use std::time::Duration;

use super::store::{StoreClient, StoreServer};
use super::{NcclError, UNIQUE_ID_BYTES};

/// Store key of rank 0's first `broadcast_obj` (the unique id), as stored
/// (torch clients add the leading `/`).
pub const UNIQUE_ID_KEY: &str = "/broadcast_from/0/0";

/// Module and class pickle names vLLM's `ncclUniqueId` unpickles from.
const ID_MODULE: &str = "vllm.distributed.device_communicators.pynccl_wrapper";
const ID_CLASS: &str = "ncclUniqueId";

fn err(msg: impl Into<String>) -> NcclError {
    NcclError(msg.into())
}

/// `pickle.dumps(ncclUniqueId)` as vLLM's ranks load it: ctypes'
/// `_ctypes._unpickle(ncclUniqueId, ({}, <128 bytes>))`, protocol 4.
pub fn pickle_unique_id(id: &[u8; UNIQUE_ID_BYTES]) -> Vec<u8> {
    fn unicode(p: &mut Vec<u8>, s: &str) {
        p.push(0x8c); // SHORT_BINUNICODE
        p.push(s.len() as u8);
        p.extend_from_slice(s.as_bytes());
    }
    let mut p = vec![0x80, 4]; // PROTO 4
    unicode(&mut p, "_ctypes");
    unicode(&mut p, "_unpickle");
    p.push(0x93); // STACK_GLOBAL
    unicode(&mut p, ID_MODULE);
    unicode(&mut p, ID_CLASS);
    p.push(0x93); // STACK_GLOBAL
    p.push(b'}'); // EMPTY_DICT
    p.push(b'C'); // SHORT_BINBYTES
    p.push(UNIQUE_ID_BYTES as u8);
    p.extend_from_slice(id);
    p.push(0x86); // TUPLE2 (state)
    p.push(0x86); // TUPLE2 (args)
    p.push(b'R'); // REDUCE
    p.push(b'.'); // STOP
    p
}

/// The unique id inside a pickled `ncclUniqueId` (as [`pickle_unique_id`] or
/// Python's `pickle.dumps` write it): the 128-byte state of a reduce whose
/// class is `ncclUniqueId`.
pub fn unpickle_unique_id(bytes: &[u8]) -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
    let bad = |why: &str| err(format!("not a pickled ncclUniqueId: {why}"));
    let mut i = 0;
    let mut saw_class = false;
    let mut id: Option<[u8; UNIQUE_ID_BYTES]> = None;
    let take = |i: &mut usize, n: usize| -> Result<&[u8], NcclError> {
        let s = bytes.get(*i..*i + n).ok_or_else(|| bad("truncated"))?;
        *i += n;
        Ok(s)
    };
    loop {
        let op = *take(&mut i, 1)?.first().expect("one byte");
        match op {
            0x80 => drop(take(&mut i, 1)?), // PROTO
            0x95 => drop(take(&mut i, 8)?), // FRAME
            0x94 | b'0' | 0x93 | b'}' | b')' | b'(' | 0x85 | 0x86 | 0x87 | b't' | b'R' | b'b'
            | b'N' => {} // MEMOIZE, POP, STACK_GLOBAL, dict/tuple builders, REDUCE, BUILD, None
            b'q' | b'h' => drop(take(&mut i, 1)?), // BINPUT, BINGET
            b'r' | b'j' => drop(take(&mut i, 4)?), // LONG_BINPUT, LONG_BINGET
            0x8c => {
                // SHORT_BINUNICODE
                let n = take(&mut i, 1)?[0] as usize;
                if take(&mut i, n)? == ID_CLASS.as_bytes() {
                    saw_class = true;
                }
            }
            b'X' => {
                // BINUNICODE
                let n = u32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4 bytes"));
                if take(&mut i, n as usize)? == ID_CLASS.as_bytes() {
                    saw_class = true;
                }
            }
            b'c' => {
                // GLOBAL "module\nname\n"
                let rest = &bytes[i..];
                let end = rest
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b'\n')
                    .nth(1)
                    .map(|(k, _)| k + 1)
                    .ok_or_else(|| bad("truncated GLOBAL"))?;
                if rest[..end].ends_with(format!("\n{ID_CLASS}\n").as_bytes()) {
                    saw_class = true;
                }
                i += end;
            }
            b'C' | b'B' => {
                // SHORT_BINBYTES, BINBYTES
                let n = if op == b'C' {
                    take(&mut i, 1)?[0] as usize
                } else {
                    u32::from_le_bytes(take(&mut i, 4)?.try_into().expect("4 bytes")) as usize
                };
                let data = take(&mut i, n)?;
                if n == UNIQUE_ID_BYTES {
                    id = Some(data.try_into().expect("128 bytes"));
                }
            }
            b'.' => break, // STOP
            other => return Err(bad(&format!("unexpected opcode {other:#04x}"))),
        }
    }
    if !saw_class {
        return Err(bad("no ncclUniqueId class"));
    }
    id.ok_or_else(|| bad("no 128-byte id"))
}

/// Rank 0's side: a store holding the pickled unique id for the other ranks.
/// Keep it alive until every rank has joined the communicator.
pub struct UniqueIdHost {
    server: StoreServer,
}

impl UniqueIdHost {
    /// Serves `id` on `bind` (port 0 picks a free one).
    pub fn start(bind: SocketAddr, id: &[u8; UNIQUE_ID_BYTES]) -> Result<Self, NcclError> {
        let server = StoreServer::bind(bind)
            .map_err(|e| err(format!("cannot host the rendezvous store on {bind}: {e}")))?;
        server.set(UNIQUE_ID_KEY, pickle_unique_id(id));
        Ok(Self { server })
    }

    /// The port the store listens on (the `master_port` to announce).
    pub fn port(&self) -> u16 {
        self.server.local_addr().port()
    }

    /// Ranks that have connected so far (torch clients count themselves in `init/`).
    pub fn joined(&self) -> usize {
        self.server
            .get(super::store::INIT_KEY)
            .and_then(|v| String::from_utf8(v).ok()?.parse().ok())
            .unwrap_or(0)
    }
}

/// A non-zero rank's side: reads rank 0's unique id from the store at
/// `master` (waiting up to `timeout`).
pub fn fetch_unique_id(
    master: (&str, u16),
    world_size: usize,
    timeout: Duration,
) -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
    let where_ = format!("{}:{}", master.0, master.1);
    let mut client = StoreClient::connect(master, Some(world_size), timeout).map_err(|e| {
        err(format!(
            "cannot reach the rendezvous store at {where_}: {e}"
        ))
    })?;
    let bytes = client
        .get(UNIQUE_ID_KEY)
        .map_err(|e| err(format!("no NCCL unique id from {where_}: {e}")))?;
    unpickle_unique_id(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_id() -> [u8; UNIQUE_ID_BYTES] {
        let mut id = [0u8; UNIQUE_ID_BYTES];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 31 + 7) as u8;
        }
        id
    }

    #[test]
    fn pickles_round_trip() {
        let id = sample_id();
        assert_eq!(unpickle_unique_id(&pickle_unique_id(&id)).unwrap(), id);
        assert!(unpickle_unique_id(b"\x80\x04N.").is_err());
    }

    /// What CPython 3.11's `pickle.dumps` writes for vLLM's ctypes id (protocol
    /// 4, with FRAME and MEMOIZE), with the id bytes cut out.
    #[test]
    fn reads_python_pickles() {
        let id = sample_id();
        let mut p = b"\x80\x04\x95\xec\x00\x00\x00\x00\x00\x00\x00\x8c\x07_ctypes\x94\x8c\t_unpickle\x94\x93\x94\x8c4vllm.distributed.device_communicators.pynccl_wrapper\x94\x8c\x0cncclUniqueId\x94\x93\x94}\x94C\x80".to_vec();
        p.extend_from_slice(&id);
        p.extend_from_slice(b"\x94\x86\x94\x86\x94R\x94.");
        assert_eq!(unpickle_unique_id(&p).unwrap(), id);
    }

    #[test]
    fn ranks_fetch_the_hosted_id() {
        let id = sample_id();
        let host = UniqueIdHost::start("127.0.0.1:0".parse().unwrap(), &id).unwrap();
        let port = host.port();
        let got = std::thread::spawn(move || {
            fetch_unique_id(("127.0.0.1", port), 2, Duration::from_secs(5)).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got, id);
        assert_eq!(host.joined(), 1);
    }
}
