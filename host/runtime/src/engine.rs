//! The process-wide wasmtime engine, linker and compile cache.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

use crate::bindings::env_world::EnvironmentPlugin;
use crate::cache::ComponentCache;
use crate::error::{PluginError, Result};
use crate::limits::SandboxLimits;
use crate::state::HostState;

/// How often the engine's epoch advances; the granularity of call deadlines.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Bytes of each freed pooled memory and table kept resident (zeroed in
/// place) for the next instance of the slot. Measured with `--bench runtime`
/// on 2 cores: madvise resets (0) made 2 threads 0.56-0.66x as fast as one;
/// 1 MiB 0.84-1.13x; 4-64 MiB 1.9-2.0x, and one thread 20-30% faster. The
/// CPython tool (a larger memory) is fastest at 16 MiB. With PAGEMAP_SCAN
/// (below) a gsm8k create + drop went from 24.5 to 11.5 µs.
const KEEP_RESIDENT_BYTES: usize = 16 << 20;

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Default limits for instances created from this engine.
    pub limits: SandboxLimits,
    /// Use the pooling instance allocator when the OS allows it.
    pub pooling: bool,
    /// Maximum number of simultaneously live instances (sandboxes) with
    /// pooling; [`DEFAULT_POOL_SIZE`] by default. A run with more episodes in
    /// flight needs more ([`EngineOptions::for_live_instances`]).
    pub pool_size: u32,
    /// Where compiled components are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
}

/// Sandboxes live at once in an engine with default options.
pub const DEFAULT_POOL_SIZE: u32 = 256;

/// Core module instances per component the pool allows (a componentize-py
/// component links 14).
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            limits: SandboxLimits::default(),
            pooling: true,
            pool_size: DEFAULT_POOL_SIZE,
            cache_dir: ComponentCache::default_dir(),
        }
    }
}

impl EngineOptions {
    /// Default options (fuel metering when `metered`) with a pool holding
    /// `live` sandboxes at once (at least [`DEFAULT_POOL_SIZE`]), plus a
    /// third on top for env sandboxes kept idle between episodes.
    pub fn for_live_instances(live: usize, metered: bool) -> Self {
        let with_idle = live.saturating_add(live / 3);
        Self {
            limits: match metered {
                true => SandboxLimits::metered(),
                false => SandboxLimits::default(),
            },
            pool_size: u32::try_from(with_idle)
                .unwrap_or(u32::MAX)
                .max(DEFAULT_POOL_SIZE),
            ..Self::default()
        }
    }
}

/// A shared wasmtime engine with the skyrl host linked in.
///
/// Cheap to clone; one per process is the norm ([`PluginEngine::shared`]).
#[derive(Clone)]
pub struct PluginEngine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    engine: Engine,
    linker: Linker<HostState>,
    cache: ComponentCache,
    options: EngineOptions,
    pooled: bool,
    metered: bool,
}

impl PluginEngine {
    /// Build an engine. Falls back to on-demand allocation (with a warning)
    /// when the pooling allocator cannot reserve its memory.
    pub fn new(options: EngineOptions) -> Result<Self> {
        let (engine, pooled) = match options.pooling {
            true => match Engine::new(&engine_config(&options, true)) {
                Ok(engine) => (engine, true),
                Err(err) => {
                    tracing::warn!(
                        "pooling allocator unavailable ({err:#}); using on-demand allocation"
                    );
                    (build_engine(&options, false)?, false)
                }
            },
            false => (build_engine(&options, false)?, false),
        };
        let metered = options.limits.fuel_per_call.is_some();
        spawn_epoch_ticker(&engine);
        let linker = build_linker(&engine)?;
        let cache = ComponentCache::new(options.cache_dir.clone(), &engine);
        Ok(Self {
            inner: Arc::new(EngineInner {
                engine,
                linker,
                cache,
                options,
                pooled,
                metered,
            }),
        })
    }

    /// The process-wide engine with default options: calls are bounded by
    /// their wall-clock deadline (epoch interruption), without fuel metering.
    pub fn shared() -> Result<Self> {
        static SHARED: OnceLock<PluginEngine> = OnceLock::new();
        Self::shared_in(&SHARED, EngineOptions::default())
    }

    /// The process-wide engine with fuel metering ([`SandboxLimits::metered`]
    /// by default), for runs that set `fuel_per_call`: slower guest code,
    /// deterministic instruction limits.
    pub fn shared_metered() -> Result<Self> {
        static SHARED: OnceLock<PluginEngine> = OnceLock::new();
        let options = EngineOptions {
            limits: SandboxLimits::metered(),
            ..EngineOptions::default()
        };
        Self::shared_in(&SHARED, options)
    }

    fn shared_in(cell: &OnceLock<PluginEngine>, options: EngineOptions) -> Result<Self> {
        if let Some(engine) = cell.get() {
            return Ok(engine.clone());
        }
        let engine = Self::new(options)?;
        Ok(cell.get_or_init(|| engine).clone())
    }

    /// The underlying wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.inner.linker
    }

    /// The compiled-component cache.
    pub fn cache(&self) -> &ComponentCache {
        &self.inner.cache
    }

    /// Default limits for new instances.
    pub fn limits(&self) -> &SandboxLimits {
        &self.inner.options.limits
    }

    /// Whether compiled plugins count fuel (the engine's default limits set
    /// `fuel_per_call`); only then may instances have a fuel limit.
    pub fn is_metered(&self) -> bool {
        self.inner.metered
    }

    /// Most env sandboxes one plugin keeps idle between episodes: a quarter
    /// of the pooled instance slots.
    pub(crate) fn max_idle_per_plugin(&self) -> usize {
        (self.inner.options.pool_size / 4).max(1) as usize
    }

    /// Whether the pooling allocator is in use.
    pub fn is_pooled(&self) -> bool {
        self.inner.pooled
    }
}

fn build_engine(options: &EngineOptions, pooling: bool) -> Result<Engine> {
    Engine::new(&engine_config(options, pooling))
        .map_err(|e| PluginError::Host(format!("cannot create wasmtime engine: {e:#}")))
}

fn engine_config(options: &EngineOptions, pooling: bool) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true)
        .consume_fuel(options.limits.fuel_per_call.is_some())
        .epoch_interruption(true)
        .max_wasm_stack(options.limits.max_stack_bytes);
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(options.pool_size)
            .total_core_instances(
                options
                    .pool_size
                    .saturating_mul(CORE_INSTANCES_PER_COMPONENT),
            )
            .total_memories(options.pool_size.saturating_mul(2))
            .total_tables(options.pool_size.saturating_mul(4))
            .total_stacks(options.pool_size)
            .max_core_instances_per_component(2 * CORE_INSTANCES_PER_COMPONENT)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .max_memory_size(options.limits.memory_bytes)
            // Reset the memories and tables of freed slots by zeroing in
            // place rather than by madvise: no page faults on the next
            // instance, and no process-wide mmap lock or TLB shootdowns
            // between threads creating instances side by side.
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES)
            // Linux >= 6.7: reset only the pages an instance touched (found
            // with the PAGEMAP_SCAN ioctl) instead of memset over the whole
            // kept-resident prefix; off where the kernel lacks it.
            .pagemap_scan(Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

fn build_linker(engine: &Engine) -> Result<Linker<HostState>> {
    let link_err =
        |e: wasmtime::Error| PluginError::Host(format!("cannot build host linker: {e:#}"));
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(link_err)?;
    // Outbound HTTP: linked for every plugin, denied unless its policy grants hosts.
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker).map_err(link_err)?;
    EnvironmentPlugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
        .map_err(link_err)?;
    // Generator plugins also import `llm` and `envs`.
    use crate::bindings::generator_world::skyrl::plugin::{envs, llm};
    llm::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(link_err)?;
    envs::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(link_err)?;
    Ok(linker)
}

/// Advance the epoch on a background thread until the engine is dropped.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("skyrl-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch thread");
}
