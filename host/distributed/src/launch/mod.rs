//! Where this process sits in the job, read from the launcher's environment
//! variables (torchrun / `torch.distributed` env:// style, or SLURM's `srun`).
use crate::DistError;

/// Which set of variables described the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// No launcher: one process ([`LaunchEnv::single`]).
    Single,
    /// `RANK`/`WORLD_SIZE`/`MASTER_ADDR`/`MASTER_PORT` (torchrun or by hand).
    Env,
    /// SLURM's `SLURM_PROCID`/`SLURM_NTASKS`/... plus `MASTER_ADDR`/`MASTER_PORT`.
    Slurm,
}

/// This process's place in a distributed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Global rank, `0..world_size`.
    pub rank: usize,
    /// Number of processes in the job.
    pub world_size: usize,
    /// Rank on this node (selects the GPU for NCCL).
    pub local_rank: usize,
    /// Processes on this node.
    pub local_world_size: usize,
    /// Node index (`GROUP_RANK` / `SLURM_NODEID`).
    pub group_rank: usize,
    /// Host of the TCPStore (`MASTER_ADDR`).
    pub master_addr: String,
    /// Port of the TCPStore (`MASTER_PORT`; 0 picks a free one for a single process).
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: the torchrun agent hosts the
    /// TCPStore and every rank, rank 0 included, connects as a client.
    pub use_agent_store: bool,
    /// `TORCHELASTIC_RESTART_COUNT` (torchrun restarts so far).
    pub restart_count: u32,
    /// Which variables were read.
    pub launcher: Launcher,
}

impl LaunchEnv {
    /// One process alone: rank 0 of 1, store on 127.0.0.1 with a free port.
    pub fn single() -> Self {
        Self {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: 1,
            group_rank: 0,
            master_addr: "127.0.0.1".into(),
            master_port: 0,
            use_agent_store: false,
            restart_count: 0,
            launcher: Launcher::Single,
        }
    }

    /// Reads the process environment; `Ok(None)` when no launcher variable is
    /// set (a plain single process). See [`LaunchEnv::from_vars`].
    pub fn from_env() -> Result<Option<Self>, DistError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Parses launcher variables looked up through `var` (empty values count
    /// as unset). torchrun's `RANK`/`WORLD_SIZE` win over SLURM's; without
    /// them `SLURM_PROCID` selects SLURM. `MASTER_ADDR`/`MASTER_PORT` are
    /// required when the world has more than one rank; `LOCAL_RANK` and
    /// `LOCAL_WORLD_SIZE` default to `RANK` and `WORLD_SIZE` (one node).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, DistError> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let rank = get("RANK");
        let world = get("WORLD_SIZE");
        match (rank, world) {
            (None, None) if get("SLURM_PROCID").is_some() => Self::slurm(&get).map(Some),
            (None, None) => Ok(None),
            (Some(_), None) => Err(env_err(
                "WORLD_SIZE",
                "RANK is set but WORLD_SIZE is not; set both",
            )),
            (None, Some(_)) => Err(env_err(
                "RANK",
                "WORLD_SIZE is set but RANK is not; set both",
            )),
            (Some(rank), Some(world)) => {
                let rank = parse_usize("RANK", &rank)?;
                let world_size = parse_world("WORLD_SIZE", &world)?;
                check_rank("RANK", rank, "WORLD_SIZE", world_size)?;
                let local_rank = get("LOCAL_RANK")
                    .map(|v| parse_usize("LOCAL_RANK", &v))
                    .transpose()?;
                let local_world_size = get("LOCAL_WORLD_SIZE")
                    .map(|v| parse_world("LOCAL_WORLD_SIZE", &v))
                    .transpose()?;
                let local_rank = local_rank.unwrap_or(rank);
                let local_world_size = local_world_size.unwrap_or(world_size);
                check_rank(
                    "LOCAL_RANK",
                    local_rank,
                    "LOCAL_WORLD_SIZE",
                    local_world_size,
                )?;
                let group_rank = get("GROUP_RANK")
                    .map(|v| parse_usize("GROUP_RANK", &v))
                    .transpose()?
                    .unwrap_or(0);
                let (master_addr, master_port) = master(&get, world_size, "")?;
                let restart_count = get("TORCHELASTIC_RESTART_COUNT")
                    .map(|v| {
                        v.trim().parse::<u32>().map_err(|_| {
                            env_err(
                                "TORCHELASTIC_RESTART_COUNT",
                                &format!("{v:?} is not a count"),
                            )
                        })
                    })
                    .transpose()?
                    .unwrap_or(0);
                Ok(Some(Self {
                    rank,
                    world_size,
                    local_rank,
                    local_world_size,
                    group_rank,
                    master_addr,
                    master_port,
                    use_agent_store: get("TORCHELASTIC_USE_AGENT_STORE").as_deref() == Some("True"),
                    restart_count,
                    launcher: Launcher::Env,
                }))
            }
        }
    }

    fn slurm(get: &dyn Fn(&str) -> Option<String>) -> Result<Self, DistError> {
        let require = |name: &str| {
            get(name).ok_or_else(|| {
                env_err(
                    name,
                    "SLURM_PROCID is set (an srun task) but this variable is not",
                )
            })
        };
        let rank = parse_usize("SLURM_PROCID", &require("SLURM_PROCID")?)?;
        let world_size = parse_world("SLURM_NTASKS", &require("SLURM_NTASKS")?)?;
        check_rank("SLURM_PROCID", rank, "SLURM_NTASKS", world_size)?;
        let local_rank = parse_usize("SLURM_LOCALID", &require("SLURM_LOCALID")?)?;
        let group_rank = get("SLURM_NODEID")
            .map(|v| parse_usize("SLURM_NODEID", &v))
            .transpose()?
            .unwrap_or(0);
        let local_world_size = if let Some(v) = get("SLURM_NTASKS_PER_NODE") {
            parse_world("SLURM_NTASKS_PER_NODE", &v)?
        } else if let Some(v) = get("SLURM_TASKS_PER_NODE") {
            tasks_on_node(&v, group_rank)?
        } else {
            return Err(env_err(
                "SLURM_TASKS_PER_NODE",
                "neither SLURM_NTASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set; cannot tell how many tasks share this node",
            ));
        };
        check_rank(
            "SLURM_LOCALID",
            local_rank,
            "the tasks per node",
            local_world_size,
        )?;
        let (master_addr, master_port) = master(
            get,
            world_size,
            " (SLURM does not set it: export MASTER_ADDR as the first host of \
             `scontrol show hostnames $SLURM_JOB_NODELIST` and MASTER_PORT as a free port before srun)",
        )?;
        Ok(Self {
            rank,
            world_size,
            local_rank,
            local_world_size,
            group_rank,
            master_addr,
            master_port,
            use_agent_store: false,
            restart_count: 0,
            launcher: Launcher::Slurm,
        })
    }

    /// `MASTER_ADDR:MASTER_PORT`.
    pub fn store_addr(&self) -> String {
        format!("{}:{}", self.master_addr, self.master_port)
    }

    /// Who hosts the TCPStore, for error messages.
    pub fn store_host(&self) -> String {
        if self.use_agent_store {
            format!("the torchrun agent at {}", self.store_addr())
        } else {
            format!("rank 0 at {}", self.store_addr())
        }
    }
}

fn env_err(var: &str, message: &str) -> DistError {
    DistError::Env {
        var: var.into(),
        message: message.into(),
    }
}

fn parse_usize(name: &str, value: &str) -> Result<usize, DistError> {
    value
        .trim()
        .parse::<usize>()
        .map_err(|_| env_err(name, &format!("{value:?} is not a non-negative integer")))
}

fn parse_world(name: &str, value: &str) -> Result<usize, DistError> {
    match parse_usize(name, value)? {
        0 => Err(env_err(name, "must be at least 1")),
        n => Ok(n),
    }
}

fn check_rank(
    rank_name: &str,
    rank: usize,
    world_name: &str,
    world: usize,
) -> Result<(), DistError> {
    if rank >= world {
        return Err(env_err(
            rank_name,
            &format!("{rank_name}={rank} must be below {world_name}={world} (ranks count from 0)"),
        ));
    }
    Ok(())
}

/// `MASTER_ADDR`/`MASTER_PORT`: required for more than one rank; a single
/// rank defaults to 127.0.0.1 and a free port.
fn master(
    get: &dyn Fn(&str) -> Option<String>,
    world: usize,
    hint: &str,
) -> Result<(String, u16), DistError> {
    let addr = get("MASTER_ADDR");
    let port = get("MASTER_PORT");
    if world == 1 {
        let port = port.map(|p| parse_port(&p)).transpose()?.unwrap_or(0);
        return Ok((addr.unwrap_or_else(|| "127.0.0.1".into()), port));
    }
    let addr = addr.ok_or_else(|| {
        env_err(
            "MASTER_ADDR",
            &format!("WORLD_SIZE={world} needs MASTER_ADDR, the host of rank 0's TCPStore{hint}"),
        )
    })?;
    let port = port.ok_or_else(|| {
        env_err(
            "MASTER_PORT",
            &format!("WORLD_SIZE={world} needs MASTER_PORT, the TCPStore's port{hint}"),
        )
    })?;
    let port = parse_port(&port)?;
    if port == 0 {
        return Err(env_err(
            "MASTER_PORT",
            "0 cannot be shared between ranks; pick a fixed free port",
        ));
    }
    Ok((addr.trim().to_string(), port))
}

fn parse_port(value: &str) -> Result<u16, DistError> {
    value.trim().parse::<u16>().map_err(|_| {
        env_err(
            "MASTER_PORT",
            &format!("{value:?} is not a port number (0..=65535)"),
        )
    })
}

/// Tasks on node `node` from SLURM's compressed list, e.g. `2(x3),1`.
fn tasks_on_node(list: &str, node: usize) -> Result<usize, DistError> {
    let bad = || {
        env_err(
            "SLURM_TASKS_PER_NODE",
            &format!("cannot parse {list:?} (expected e.g. \"2(x3),1\")"),
        )
    };
    let mut seen = 0usize;
    for item in list.split(',') {
        let (count, repeat) = match item.split_once("(x") {
            Some((c, r)) => (
                c,
                r.strip_suffix(')')
                    .ok_or_else(bad)?
                    .parse::<usize>()
                    .map_err(|_| bad())?,
            ),
            None => (item, 1),
        };
        let count = count.trim().parse::<usize>().map_err(|_| bad())?;
        seen += repeat;
        if node < seen {
            return Ok(count);
        }
    }
    Err(env_err(
        "SLURM_TASKS_PER_NODE",
        &format!("{list:?} lists {seen} nodes but SLURM_NODEID={node}"),
    ))
}

#[cfg(test)]
mod tests;
