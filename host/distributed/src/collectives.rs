//! Tensor collectives on [`ProcessGroup`]. Each call blocks until done.
//!
//! c10d entry points (the same for ProcessGroupGloo and ProcessGroupNCCL):
//! * `all_reduce`, `all_reduce_many` → `allreduce` (one per dtype for `_many`);
//! * `reduce_scatter` → `_reduce_scatter_base` (Python's
//!   `reduce_scatter_tensor`). Gloo 2.13 has it, but runs it as an allreduce of
//!   a copy of the whole input followed by a copy of this rank's chunk, so it
//!   moves as many bytes as `all_reduce`; NCCL runs a real reduce-scatter;
//! * `all_gather` → `_allgather_base` (`all_gather_into_tensor`). Gloo 2.13
//!   chunks the output and runs its list `allgather`;
//! * `broadcast` → `broadcast`, `barrier` → `barrier`.
use tch::{Device, Kind, Tensor};

use crate::ffi::op_code;
use crate::{ProcessGroup, ReduceOp, Result};

impl ProcessGroup {
    /// Reduces `t` in place across all ranks.
    pub fn all_reduce(&self, t: &mut Tensor, op: ReduceOp) -> Result<()> {
        self.check_device("all_reduce", t)?;
        self.check_op("all_reduce", t, op)?;
        self.in_place("all_reduce", t, |pg, c| pg.allreduce(c, op_code(op)))
    }

    /// Reduces many tensors (e.g. gradients) with one collective per dtype
    /// and device: they are flattened into one buffer, reduced, and copied back.
    pub fn all_reduce_many(&self, ts: &mut [Tensor], op: ReduceOp) -> Result<()> {
        let mut groups: Vec<((Kind, Device), Vec<usize>)> = Vec::new();
        for (i, t) in ts.iter().enumerate() {
            self.check_device("all_reduce_many", t)?;
            self.check_op("all_reduce_many", t, op)?;
            let key = (t.kind(), t.device());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, idx)) => idx.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        for (_, idx) in groups {
            let flat: Vec<Tensor> = idx.iter().map(|&i| ts[i].reshape([-1])).collect();
            let mut buffer = Tensor::cat(&flat, 0);
            self.in_place("all_reduce_many", &mut buffer, |pg, c| {
                pg.allreduce(c, op_code(op))
            })?;
            let mut offset = 0i64;
            for &i in &idx {
                let n = ts[i].numel() as i64;
                let chunk = buffer.narrow(0, offset, n).view_as(&ts[i]);
                ts[i].copy_(&chunk);
                offset += n;
            }
        }
        Ok(())
    }

    /// Reduces `input` (`world_size * output.numel()` elements, any shape,
    /// read as flat) across ranks and leaves chunk `rank` in `output`.
    pub fn reduce_scatter(&self, output: &mut Tensor, input: &Tensor, op: ReduceOp) -> Result<()> {
        const OP: &str = "reduce_scatter";
        self.check_pair(
            OP,
            input,
            output,
            input.numel(),
            output.numel() * self.world_size(),
        )?;
        self.check_op(OP, input, op)?;
        let input = input.reshape([-1]).contiguous();
        self.in_place(OP, output, |pg, out| {
            pg.reduce_scatter(&mut out.view([-1]), &input, op_code(op))
        })
    }

    /// Gathers every rank's `input` into `output` (`world_size *
    /// input.numel()` elements, any shape, filled as flat): chunk `r` comes
    /// from rank `r`.
    pub fn all_gather(&self, output: &mut Tensor, input: &Tensor) -> Result<()> {
        const OP: &str = "all_gather";
        self.check_pair(
            OP,
            input,
            output,
            output.numel(),
            input.numel() * self.world_size(),
        )?;
        let input = input.reshape([-1]).contiguous();
        self.in_place(OP, output, |pg, out| {
            pg.allgather(&mut out.view([-1]), &input)
        })
    }

    /// Copies `t` from rank `root` to every other rank, in place.
    pub fn broadcast(&self, t: &mut Tensor, root: usize) -> Result<()> {
        self.check_root("broadcast", root)?;
        self.check_device("broadcast", t)?;
        self.in_place("broadcast", t, |pg, c| pg.broadcast(c, root))
    }

    /// Blocks until every rank reached the barrier.
    pub fn barrier(&self) -> Result<()> {
        let result = self.lock().barrier();
        result.map_err(|e| self.collective_error("barrier", e))
    }

    /// Avg divides, so it needs floating point (NCCL has the same rule).
    fn check_op(&self, op_name: &'static str, t: &Tensor, op: ReduceOp) -> Result<()> {
        if op == ReduceOp::Avg && !t.is_floating_point() {
            return Err(self.invalid(
                op_name,
                format!(
                    "ReduceOp::Avg needs a floating-point tensor, got {:?}; use Sum and divide",
                    t.kind()
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn check_root(&self, op: &'static str, root: usize) -> Result<()> {
        if root >= self.world_size() {
            return Err(self.invalid(
                op,
                format!(
                    "root {root} is not a rank of a world of {}",
                    self.world_size()
                ),
            ));
        }
        Ok(())
    }

    /// Device, dtype and size checks for the two-tensor collectives.
    fn check_pair(
        &self,
        op: &'static str,
        input: &Tensor,
        output: &Tensor,
        big: usize,
        expected: usize,
    ) -> Result<()> {
        self.check_device(op, input)?;
        self.check_device(op, output)?;
        if input.kind() != output.kind() || input.device() != output.device() {
            return Err(self.invalid(
                op,
                format!(
                    "input ({:?} on {:?}) and output ({:?} on {:?}) must share dtype and device",
                    input.kind(),
                    input.device(),
                    output.kind(),
                    output.device()
                ),
            ));
        }
        if big != expected {
            return Err(self.invalid(
                op,
                format!(
                    "input has {} elements and output {}: the flat side must hold world_size ({}) times the other",
                    input.numel(),
                    output.numel(),
                    self.world_size()
                ),
            ));
        }
        Ok(())
    }
}
