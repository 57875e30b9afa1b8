//! The vLLM NCCL rendezvous against PyTorch's own `TCPStore`, both ways: a
//! torch client (what vLLM's `StatelessProcessGroup.create` makes for the
//! ranks after 0) reads and unpickles the unique id our rank 0 hosts, and our
//! client reads the id a torch master (vLLM's trainer side) publishes.
//!
//! Needs a Python with torch (`$SKYRL_PYTHON`, else the project venv); it
//! fails rather than skips without one, as the parity tests do.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use skyrl_inference::nccl::stateless::{fetch_unique_id, pickle_unique_id, UniqueIdHost};
use skyrl_inference::nccl::UNIQUE_ID_BYTES;

fn python() -> PathBuf {
    let path = std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    assert!(
        path.exists(),
        "Python {} not found; set SKYRL_PYTHON to a Python with torch",
        path.display()
    );
    path
}

/// Makes `vllm.distributed.device_communicators.pynccl_wrapper.ncclUniqueId`
/// importable (vLLM's exact ctypes definition) without vLLM installed.
const STUB_VLLM: &str = r#"
import sys, types, ctypes
name = "vllm.distributed.device_communicators.pynccl_wrapper"
parts = name.split(".")
for i in range(1, len(parts) + 1):
    sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
class ncclUniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]
ncclUniqueId.__module__ = name
sys.modules[name].ncclUniqueId = ncclUniqueId
"#;

fn sample_id() -> [u8; UNIQUE_ID_BYTES] {
    let mut id = [0u8; UNIQUE_ID_BYTES];
    for (i, b) in id.iter_mut().enumerate() {
        *b = (255 - i * 3) as u8;
    }
    id
}

#[test]
fn a_torch_rank_reads_the_id_our_rank_zero_hosts() {
    let id = sample_id();
    let host = UniqueIdHost::start("127.0.0.1:0".parse().unwrap(), &id).unwrap();
    // As vLLM's StatelessProcessGroup.create + broadcast_obj do on rank 1.
    let script = format!(
        r#"{STUB_VLLM}
import pickle
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore(host_name="127.0.0.1", port={port}, world_size=2, is_master=False,
                 timeout=timedelta(seconds=20), use_libuv=False)
obj = pickle.loads(store.get("broadcast_from/0/0"))
print(bytes(obj.internal).hex())
"#,
        port = host.port()
    );
    let out = Command::new(python())
        .args(["-c", &script])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), hex);
    assert_eq!(host.joined(), 1, "the torch client counted itself in init/");
}

#[test]
fn our_rank_reads_the_id_a_torch_master_publishes() {
    let id = sample_id();
    // As vLLM's trainer_init does on rank 0: a master store and pickle.dumps(id).
    let script = format!(
        r#"{STUB_VLLM}
import pickle, sys, time
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore(host_name="127.0.0.1", port=0, world_size=2, is_master=True,
                 timeout=timedelta(seconds=20), use_libuv=False, wait_for_workers=False)
u = ncclUniqueId()
for i, b in enumerate(bytes.fromhex("{hex}")):
    u.internal[i] = b - 256 if b > 127 else b
store.set("broadcast_from/0/0", pickle.dumps(u))
print(store.port, flush=True)
sys.stdin.read()
"#,
        hex = id.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let mut child = Command::new(python())
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run python");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().parse().expect("the master prints its port");
    let got = fetch_unique_id(("127.0.0.1", port), 2, Duration::from_secs(20));
    drop(child.stdin.take());
    let _ = child.wait();
    assert_eq!(got.unwrap(), id);
    // Our pickle is what Python writes, modulo framing and memo opcodes.
    assert!(pickle_unique_id(&id).len() > UNIQUE_ID_BYTES);
}
