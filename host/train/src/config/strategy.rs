//! How the policy is distributed over the ranks (`trainer.strategy`).

/// A distribution strategy of the policy's training state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Every rank holds all parameters, gradients and optimizer state;
    /// gradients are all-reduced (in buckets) before each optimizer step.
    Ddp,
    /// Parameters replicated; gradients reduce-scattered and optimizer state
    /// (fp32 master weights, moments) sharded over the ranks, the updated
    /// shards all-gathered after the step (ZeRO-2). `fsdp` and `fsdp2`.
    Sharded,
}

impl Strategy {
    /// Reads `trainer.strategy`, refusing names this trainer does not run.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "fsdp" | "fsdp2" => Ok(Self::Sharded),
            "ddp" | "tch" => Ok(Self::Ddp),
            "deepspeed" | "megatron" => Err(format!(
                "trainer.strategy={name} is not supported; use fsdp2 or fsdp (sharded optimizer \
                 state and gradients) or ddp (replicated)"
            )),
            other => Err(format!(
                "trainer.strategy=`{other}` is unknown; use fsdp2, fsdp or ddp"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skyrl_names_are_accepted_and_others_refused_by_name() {
        assert_eq!(Strategy::parse("fsdp2"), Ok(Strategy::Sharded));
        assert_eq!(Strategy::parse("fsdp"), Ok(Strategy::Sharded));
        assert_eq!(Strategy::parse("ddp"), Ok(Strategy::Ddp));
        assert!(Strategy::parse("megatron")
            .unwrap_err()
            .contains("not supported"));
        assert!(Strategy::parse("megatron_xl")
            .unwrap_err()
            .contains("unknown"));
    }
}
