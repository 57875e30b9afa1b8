//! LoRA adapters as PEFT defines them: a projection `W x` becomes
//! `W x + (alpha / r) · B A dropout(x)` with `A [r, in]` and `B [out, r]`
//! trainable and `W` frozen. Which projections get one follows PEFT's
//! `target_modules` / `exclude_modules` matching (`all-linear`, a list of
//! names matched as the whole module name or its last components, or a
//! regular expression matched against the whole name); the adapters save and
//! load in PEFT's format (`adapter_config.json` + `adapter_model.safetensors`
//! with `base_model.model.<module>.lora_{A,B}.weight` keys).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

use crate::error::{ModelError, Result};

/// File name of the adapter weights in a PEFT adapter directory.
pub const ADAPTER_WEIGHTS: &str = "adapter_model.safetensors";
/// File name of the adapter config in a PEFT adapter directory.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";
/// Prefix PEFT puts before module names in saved adapter keys.
pub const PEFT_PREFIX: &str = "base_model.model.";

/// Which modules a LoRA config selects (PEFT's `target_modules` / `exclude_modules`).
#[derive(Debug, Clone, PartialEq)]
pub enum ModuleSelector {
    /// Every linear layer but the output layer (PEFT's `all-linear`).
    AllLinear,
    /// A module matches when its name equals an entry or ends with `.entry`.
    Names(Vec<String>),
    /// A regular expression the whole module name must match.
    Regex(String),
}

impl ModuleSelector {
    /// From the config value: `all-linear`, another string (a regex), or a list.
    pub fn from_json(value: &Value) -> Result<Self> {
        match value {
            Value::String(s) if s == "all-linear" => Ok(Self::AllLinear),
            Value::String(s) => Ok(Self::Regex(s.clone())),
            Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        ModelError::Lora(format!("module names must be strings, got {v}"))
                    })
                })
                .collect::<Result<Vec<_>>>()
                .map(Self::Names),
            other => Err(ModelError::Lora(format!(
                "modules must be `all-linear`, a regex string or a list of names, got {other}"
            ))),
        }
    }
}

/// A compiled [`ModuleSelector`].
enum Matcher {
    AllLinear,
    Names(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    fn new(selector: &ModuleSelector, role: &str) -> Result<Self> {
        Ok(match selector {
            ModuleSelector::AllLinear => Self::AllLinear,
            ModuleSelector::Names(n) => Self::Names(n.clone()),
            ModuleSelector::Regex(r) => Self::Regex(
                regex::Regex::new(&format!("^(?:{r})$"))
                    .map_err(|e| ModelError::Lora(format!("{role} `{r}` is not a regex: {e}")))?,
            ),
        })
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Self::AllLinear => true,
            Self::Names(names) => names.iter().any(|n| name_matches(n, name)),
            Self::Regex(r) => r.is_match(name),
        }
    }
}

/// PEFT's list matching: the whole name, or its last dot-separated components.
fn name_matches(entry: &str, name: &str) -> bool {
    name == entry || name.ends_with(&format!(".{entry}"))
}

/// How `A` is initialised (`B` starts at zero either way, so a fresh adapter
/// leaves the model unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoraInit {
    /// PEFT's default (`init_lora_weights=True`): Kaiming-uniform with
    /// `a = sqrt(5)`, i.e. uniform in `±1/sqrt(in_features)`.
    Kaiming,
    /// PEFT's `gaussian`: normal with std `1/r`.
    Gaussian,
}

impl LoraInit {
    /// From skyrl's `init_method` (`kaiming`, `gaussian`).
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "kaiming" => Ok(Self::Kaiming),
            "gaussian" => Ok(Self::Gaussian),
            other => Err(ModelError::Lora(format!(
                "init_method `{other}` is not supported (kaiming or gaussian)"
            ))),
        }
    }

    fn peft_value(self) -> Value {
        match self {
            Self::Kaiming => Value::Bool(true),
            Self::Gaussian => Value::String("gaussian".into()),
        }
    }
}

/// What to adapt and how.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraSpec {
    pub rank: i64,
    pub alpha: f64,
    pub dropout: f64,
    pub target_modules: ModuleSelector,
    pub exclude_modules: Option<ModuleSelector>,
    pub init: LoraInit,
    /// Seed of `A`'s initialisation (every rank draws the same adapters).
    pub seed: u64,
    /// Written into `adapter_config.json` (the base model's path or hub id).
    pub base_model_name_or_path: Option<String>,
}

impl LoraSpec {
    /// `alpha / r`, PEFT's scaling without rsLoRA.
    pub fn scaling(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    /// Checks the numbers (rank, alpha, dropout).
    pub fn validate(&self) -> Result<()> {
        if self.rank <= 0 {
            return Err(ModelError::Lora(format!(
                "rank must be positive, got {}",
                self.rank
            )));
        }
        match scale_problems(self.alpha, self.dropout).into_iter().next() {
            Some((key, message)) => Err(ModelError::Lora(format!("{key} {message}"))),
            None => Ok(()),
        }
    }
}

/// What is wrong with `alpha` and `dropout`, as `(key, message)` pairs
/// (`("alpha", "must be positive, got 0")`); empty when both are usable.
pub fn scale_problems(alpha: f64, dropout: f64) -> Vec<(&'static str, String)> {
    let mut problems = Vec::new();
    if !alpha.is_finite() || alpha <= 0.0 {
        problems.push(("alpha", format!("must be positive, got {alpha}")));
    }
    if !(0.0..1.0).contains(&dropout) {
        problems.push(("dropout", format!("must be in [0, 1), got {dropout}")));
    }
    problems
}

/// One projection's adapter, as the decoder layer runs it.
#[derive(Debug)]
pub struct LoraAdapter {
    /// `[r, in]`.
    pub a: Tensor,
    /// `[out, r]`.
    pub b: Tensor,
    scaling: f64,
    dropout: f64,
    training: Arc<AtomicBool>,
}

impl LoraAdapter {
    /// `scaling · B A dropout(x)` for `x [.., in]`.
    pub fn delta(&self, x: &Tensor) -> Tensor {
        let x = if self.dropout > 0.0 && self.training.load(Ordering::Relaxed) {
            x.dropout(self.dropout, true)
        } else {
            x.shallow_clone()
        };
        x.matmul(&self.a.tr()).matmul(&self.b.tr()) * self.scaling
    }

    /// The merged weight `W + scaling · B A` (no grad), in `weight`'s dtype.
    pub fn merge(&self, weight: &Tensor) -> Tensor {
        let _g = tch::no_grad_guard();
        let delta = self
            .b
            .to_kind(Kind::Float)
            .matmul(&self.a.to_kind(Kind::Float))
            * self.scaling;
        (weight.to_kind(Kind::Float) + delta.to_device(weight.device())).to_kind(weight.kind())
    }
}

/// A linear layer of the decoder that LoRA may adapt.
pub struct LinearSite<'a> {
    /// Module name as in the Hugging Face model (`model.layers.0.self_attn.q_proj`).
    pub name: String,
    pub in_features: i64,
    pub out_features: i64,
    /// Where the adapter goes.
    pub slot: &'a mut Option<LoraAdapter>,
}

/// The adapters attached to a model: their tensors (PEFT key names), the
/// spec, and the train/eval switch their dropout follows.
#[derive(Debug)]
pub struct LoraState {
    pub spec: LoraSpec,
    /// `(PEFT key, tensor)` of every `lora_A` / `lora_B`, sorted by key.
    tensors: Vec<(String, Tensor)>,
    /// Adapted module names, sorted.
    modules: Vec<String>,
    /// Every linear layer LoRA could adapt.
    sites: Vec<String>,
    training: Arc<AtomicBool>,
}

impl LoraState {
    /// Puts adapters on the sites `spec` selects. Errors when a listed
    /// target matches no site (PEFT's `lm_head` / `embed_tokens` included:
    /// only the decoder's linear layers are supported) or nothing is selected.
    pub fn attach(
        spec: LoraSpec,
        sites: Vec<LinearSite<'_>>,
        all_modules: &[String],
        device: Device,
        kind: Kind,
    ) -> Result<Self> {
        spec.validate()?;
        let target = Matcher::new(&spec.target_modules, "target_modules")?;
        let exclude = spec
            .exclude_modules
            .as_ref()
            .map(|e| Matcher::new(e, "exclude_modules"))
            .transpose()?;
        if let ModuleSelector::Names(names) = &spec.target_modules {
            check_names_exist(names, &sites, all_modules)?;
        }
        let training = Arc::new(AtomicBool::new(false));
        let mut tensors = Vec::new();
        let mut modules = Vec::new();
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
        let site_names: Vec<String> = sites.iter().map(|s| s.name.clone()).collect();
        for site in sites {
            let excluded = exclude.as_ref().is_some_and(|m| m.matches(&site.name));
            if excluded || !target.matches(&site.name) {
                continue;
            }
            let a = init_a(&mut rng, &spec, site.in_features)
                .to_kind(kind)
                .to_device(device)
                .set_requires_grad(true);
            let b = Tensor::zeros([site.out_features, spec.rank], (kind, device))
                .set_requires_grad(true);
            let key = format!("{PEFT_PREFIX}{}", site.name);
            tensors.push((format!("{key}.lora_A.weight"), a.shallow_clone()));
            tensors.push((format!("{key}.lora_B.weight"), b.shallow_clone()));
            modules.push(site.name.clone());
            *site.slot = Some(LoraAdapter {
                a,
                b,
                scaling: spec.scaling(),
                dropout: spec.dropout,
                training: training.clone(),
            });
        }
        if modules.is_empty() {
            return Err(ModelError::Lora(format!(
                "target_modules {:?} (minus exclude_modules {:?}) select none of the model's linear layers (e.g. {})",
                spec.target_modules,
                spec.exclude_modules,
                all_modules.iter().take(7).cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        tensors.sort_by(|x, y| x.0.cmp(&y.0));
        modules.sort();
        Ok(Self {
            spec,
            tensors,
            modules,
            sites: site_names,
            training,
        })
    }

    /// `(PEFT key, tensor)` of every adapter tensor, sorted; they share storage
    /// with the model (an optimizer updates them in place).
    pub fn parameters(&self) -> Vec<(String, Tensor)> {
        self.tensors
            .iter()
            .map(|(n, t)| (n.clone(), t.shallow_clone()))
            .collect()
    }

    /// The adapted module names.
    pub fn modules(&self) -> &[String] {
        &self.modules
    }

    /// Dropout on (training forward) or off (log-probs, generation).
    pub(crate) fn set_training(&self, on: bool) {
        self.training.store(on, Ordering::Relaxed);
    }

    /// PEFT's `adapter_config.json` for these adapters.
    pub fn peft_config(&self) -> Value {
        let s = &self.spec;
        let target_modules = match &s.target_modules {
            ModuleSelector::Regex(r) => Value::String(r.clone()),
            _ => Value::from(self.target_names()),
        };
        let exclude_modules = match &s.exclude_modules {
            None => Value::Null,
            Some(ModuleSelector::Regex(r)) => Value::String(r.clone()),
            Some(ModuleSelector::Names(n)) => Value::from(n.clone()),
            Some(ModuleSelector::AllLinear) => Value::String("all-linear".into()),
        };
        json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": s.base_model_name_or_path,
            "revision": null,
            "inference_mode": true,
            "r": s.rank,
            "lora_alpha": s.alpha,
            "lora_dropout": s.dropout,
            "target_modules": target_modules,
            "exclude_modules": exclude_modules,
            "fan_in_fan_out": false,
            "bias": "none",
            "use_rslora": false,
            "use_dora": false,
            "modules_to_save": null,
            "init_lora_weights": s.init.peft_value(),
            "layers_to_transform": null,
            "layers_pattern": null,
            "rank_pattern": {},
            "alpha_pattern": {},
        })
    }

    /// The shortest list PEFT reads back as exactly the adapted modules: the
    /// last name components when every layer ending in them is adapted,
    /// otherwise the full module names.
    fn target_names(&self) -> Vec<String> {
        let last = |m: &str| m.rsplit('.').next().unwrap_or(m).to_string();
        let suffixes: BTreeSet<String> = self.modules.iter().map(|m| last(m)).collect();
        let exact = self
            .sites
            .iter()
            .filter(|s| suffixes.contains(&last(s)))
            .all(|s| self.modules.binary_search(s).is_ok());
        if exact {
            suffixes.into_iter().collect()
        } else {
            self.modules.clone()
        }
    }

    /// Writes `adapter_config.json` and `adapter_model.safetensors` into `dir`.
    pub fn save_peft(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
        let path = dir.join(ADAPTER_CONFIG);
        let text = serde_json::to_string_pretty(&self.peft_config()).expect("json");
        std::fs::write(&path, text).map_err(|e| ModelError::io(&path, e))?;
        crate::weights::write_file(&dir.join(ADAPTER_WEIGHTS), &self.tensors)
    }

    /// Copies `saved` (`(PEFT key, tensor)`, as [`LoraState::save_peft`] or
    /// PEFT writes them, `.default` adapter names accepted) into the adapters:
    /// every adapter tensor must be there with its shape.
    pub fn load_tensors(&self, saved: Vec<(String, Tensor)>) -> Result<()> {
        let _g = tch::no_grad_guard();
        let mut seen = BTreeSet::new();
        for (name, t) in saved {
            let key = name.replace(".default.weight", ".weight");
            let (_, var) = self
                .tensors
                .iter()
                .find(|(n, _)| *n == key)
                .ok_or_else(|| ModelError::Lora(format!("unknown adapter tensor `{name}`")))?;
            if var.size() != t.size() {
                return Err(ModelError::Lora(format!(
                    "adapter tensor `{name}` has shape {:?}, the model's {:?}",
                    t.size(),
                    var.size()
                )));
            }
            var.shallow_clone().f_copy_(&t)?;
            seen.insert(key);
        }
        if seen.len() != self.tensors.len() {
            let missing: Vec<_> = self
                .tensors
                .iter()
                .map(|(n, _)| n)
                .filter(|n| !seen.contains(*n))
                .take(4)
                .collect();
            return Err(ModelError::Lora(format!(
                "{} of {} adapter tensors given; missing e.g. {missing:?}",
                seen.len(),
                self.tensors.len()
            )));
        }
        Ok(())
    }
}

/// Reads a PEFT adapter directory: its spec (rank, alpha, dropout, targets)
/// and tensors.
pub fn read_peft_adapter(dir: &Path) -> Result<(LoraSpec, Vec<(String, Tensor)>)> {
    let path = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
    let config: Value = serde_json::from_str(&text)
        .map_err(|e| ModelError::Lora(format!("{}: {e}", path.display())))?;
    let field = |k: &str| {
        config
            .get(k)
            .ok_or_else(|| ModelError::Lora(format!("{}: no `{k}`", path.display())))
    };
    if field("peft_type")?.as_str() != Some("LORA") {
        return Err(ModelError::Lora(format!(
            "{}: peft_type is not LORA",
            path.display()
        )));
    }
    for (key, plain) in [
        ("use_dora", Value::Bool(false)),
        ("use_rslora", Value::Bool(false)),
        ("fan_in_fan_out", Value::Bool(false)),
    ] {
        if config.get(key).is_some_and(|v| *v != plain) {
            return Err(ModelError::Lora(format!(
                "{}: `{key}` is not supported",
                path.display()
            )));
        }
    }
    let number = |k: &str| {
        field(k)?
            .as_f64()
            .ok_or_else(|| ModelError::Lora(format!("{}: `{k}` is not a number", path.display())))
    };
    let exclude = match config.get("exclude_modules") {
        None | Some(Value::Null) => None,
        Some(v) => Some(ModuleSelector::from_json(v)?),
    };
    let spec = LoraSpec {
        rank: number("r")? as i64,
        alpha: number("lora_alpha")?,
        dropout: config
            .get("lora_dropout")
            .and_then(Value::as_f64)
            .unwrap_or(0.0),
        target_modules: ModuleSelector::from_json(field("target_modules")?)?,
        exclude_modules: exclude,
        init: LoraInit::Kaiming,
        seed: 0,
        base_model_name_or_path: config
            .get("base_model_name_or_path")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let mut tensors = Vec::new();
    crate::weights::read_file(&dir.join(ADAPTER_WEIGHTS), &mut tensors)?;
    Ok((spec, tensors))
}

/// Names given in `target_modules` must each select a decoder linear layer.
fn check_names_exist(
    names: &[String],
    sites: &[LinearSite<'_>],
    all_modules: &[String],
) -> Result<()> {
    for entry in names {
        if sites.iter().any(|s| name_matches(entry, &s.name)) {
            continue;
        }
        let other = all_modules.iter().find(|m| name_matches(entry, m));
        return Err(ModelError::Lora(match other {
            Some(m) => format!(
                "target module `{entry}` matches `{m}`, which LoRA does not adapt here \
                 (only the decoder's linear layers: q/k/v/o_proj, gate/up/down_proj)"
            ),
            None => format!(
                "target module `{entry}` matches no module of the model (its linear layers are \
                 q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; or `all-linear`)"
            ),
        }));
    }
    Ok(())
}

/// `A [r, in]` drawn as PEFT draws it, from `rng`.
fn init_a(rng: &mut ChaCha8Rng, spec: &LoraSpec, in_features: i64) -> Tensor {
    let n = (spec.rank * in_features) as usize;
    let values: Vec<f32> = match spec.init {
        LoraInit::Kaiming => {
            let bound = 1.0 / (in_features as f64).sqrt();
            (0..n)
                .map(|_| rng.random_range(-bound..bound) as f32)
                .collect()
        }
        LoraInit::Gaussian => crate::seeded_init::normal_values(rng, n, 1.0 / spec.rank as f64),
    };
    Tensor::from_slice(&values).view([spec.rank, in_features])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_whole_names_or_last_components() {
        assert!(name_matches("q_proj", "model.layers.0.self_attn.q_proj"));
        assert!(name_matches(
            "self_attn.q_proj",
            "model.layers.0.self_attn.q_proj"
        ));
        assert!(!name_matches("proj", "model.layers.0.self_attn.q_proj"));
        let m = Matcher::new(&ModuleSelector::Regex(r".*\.(q|v)_proj".into()), "t").unwrap();
        assert!(m.matches("model.layers.3.self_attn.v_proj"));
        assert!(!m.matches("model.layers.3.self_attn.k_proj"));
    }

    #[test]
    fn selectors_parse_from_config_values() {
        assert_eq!(
            ModuleSelector::from_json(&json!("all-linear")).unwrap(),
            ModuleSelector::AllLinear
        );
        assert_eq!(
            ModuleSelector::from_json(&json!(["q_proj"])).unwrap(),
            ModuleSelector::Names(vec!["q_proj".into()])
        );
        assert!(ModuleSelector::from_json(&json!(3)).is_err());
        assert!(LoraInit::parse("pissa").is_err());
    }
}
