//! Small control messages (bytes: metrics, JSON) and the key-value store.
use tch::{Device, Kind, Tensor};

use crate::{ProcessGroup, Result};

impl ProcessGroup {
    /// Gathers one byte string per rank (lengths may differ); entry `r` of
    /// the result is rank `r`'s. Two collectives: the lengths, then the
    /// strings padded to the longest.
    pub fn all_gather_bytes(&self, bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
        const OP: &str = "all_gather_bytes";
        let world = self.world_size();
        let dev = self.control_device();
        let len = Tensor::from_slice(&[bytes.len() as i64]).to_device(dev);
        let mut lens = Tensor::zeros([world as i64], (Kind::Int64, dev));
        self.all_gather_raw(OP, &mut lens, &len)?;
        let lens = to_vec::<i64>(&lens);
        let longest = lens.iter().copied().max().unwrap_or(0).max(0) as usize;
        if longest == 0 {
            return Ok(vec![Vec::new(); world]);
        }
        let mut padded = bytes.to_vec();
        padded.resize(longest, 0);
        let input = Tensor::from_slice(&padded).to_device(dev);
        let mut all = Tensor::zeros([(world * longest) as i64], (Kind::Uint8, dev));
        self.all_gather_raw(OP, &mut all, &input)?;
        let all = to_vec::<u8>(&all);
        Ok(all
            .chunks(longest)
            .zip(lens)
            .map(|(chunk, n)| chunk[..n as usize].to_vec())
            .collect())
    }

    /// Sends `bytes` from rank `root` to every rank and returns them. The
    /// root passes `Some`; the others' argument is ignored (pass `None`).
    pub fn broadcast_bytes(&self, bytes: Option<Vec<u8>>, root: usize) -> Result<Vec<u8>> {
        const OP: &str = "broadcast_bytes";
        self.check_root(OP, root)?;
        let dev = self.control_device();
        let payload = if self.rank() == root {
            bytes.ok_or_else(|| {
                self.invalid(
                    OP,
                    format!("rank {root} is the root and must pass Some(bytes)"),
                )
            })?
        } else {
            Vec::new()
        };
        let mut len = Tensor::from_slice(&[payload.len() as i64]).to_device(dev);
        self.broadcast(&mut len, root)?;
        let n = to_vec::<i64>(&len)[0];
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut buffer = if self.rank() == root {
            Tensor::from_slice(&payload).to_device(dev)
        } else {
            Tensor::zeros([n], (Kind::Uint8, dev))
        };
        self.broadcast(&mut buffer, root)?;
        Ok(to_vec::<u8>(&buffer))
    }

    /// `all_gather` without the public size checks (internal callers size
    /// the tensors themselves).
    fn all_gather_raw(&self, op: &'static str, output: &mut Tensor, input: &Tensor) -> Result<()> {
        self.in_place(op, output, |pg, out| pg.allgather(out, input))
    }

    /// Sets `key` in the job's store (visible to every rank).
    pub fn store_set(&self, key: &str, value: &[u8]) -> Result<()> {
        self.store
            .set(key, value)
            .map_err(|e| self.store_error("store_set", key, e))
    }

    /// Reads `key`, waiting up to the group's timeout for some rank to set it.
    pub fn store_get(&self, key: &str) -> Result<Vec<u8>> {
        self.store
            .get(key)
            .map_err(|e| self.store_error("store_get", key, e))
    }

    /// Atomically adds `delta` to the integer at `key` (missing = 0) and
    /// returns the new value.
    pub fn store_add(&self, key: &str, delta: i64) -> Result<i64> {
        self.store
            .add(key, delta)
            .map_err(|e| self.store_error("store_add", key, e))
    }

    /// Whether all `keys` are set (does not wait).
    pub fn store_check(&self, keys: &[&str]) -> Result<bool> {
        self.store
            .check(keys)
            .map_err(|e| self.store_error("store_check", &keys.join(","), e))
    }
}

/// Copies a 1-D tensor to a host `Vec`.
fn to_vec<T: tch::kind::Element>(t: &Tensor) -> Vec<T> {
    let t = t.to_device(Device::Cpu).contiguous();
    let mut out = vec![T::ZERO; t.numel()];
    t.copy_data(&mut out, t.numel());
    out
}
