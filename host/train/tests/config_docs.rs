//! docs/config.md against the config types: every key its tables document
//! (the RL sections, before `## SFT`) is a key of `SkyrlConfig`, and every key
//! of `SkyrlConfig` is named in the document.

use std::path::PathBuf;

use serde_json::Value;
use skyrl_train::config::{load_config, SkyrlConfig};

fn docs() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
    let text = std::fs::read_to_string(&path).unwrap();
    text.split("\n## SFT").next().unwrap().to_string()
}

/// The default config as a JSON tree (every key, `null` for unset options).
fn tree() -> Value {
    let cfg: SkyrlConfig = load_config(None, &[]).unwrap();
    serde_json::to_value(cfg).unwrap()
}

fn lookup<'a>(tree: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(tree, |node, part| node.as_object()?.get(part))
}

/// Backticked spans of `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The section a heading documents: its first backticked dotted name (`*.`
/// standing for the policy's section), or `None` (the parent's section).
fn heading_prefix(heading: &str) -> Option<String> {
    let first = backticked(heading).into_iter().next()?;
    let first = first.replace("*.", "trainer.policy.");
    first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        .then_some(first)
}

/// The keys one table cell names: `a`, `a`, `b`; `x_low/high`; `s.*`;
/// `map.<name>.field` (a map keyed by the user: the map itself).
fn cell_keys(cell: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for k in backticked(cell) {
        let k = k.split(".<").next().unwrap();
        let k = k.trim_end_matches(".*").to_string();
        match k.split_once('/') {
            Some((low, high)) => {
                let stem = low.rsplit_once('_').map_or("", |(s, _)| s);
                keys.push(low.to_string());
                keys.push(format!("{stem}_{high}"));
            }
            None => keys.push(k),
        }
    }
    keys
}

/// The config key a documented `key` under section `prefix` is: the first
/// of `prefix.key`, `parent(prefix).key`, ... that exists.
fn resolve(tree: &Value, prefix: &str, key: &str) -> Option<String> {
    let mut p = prefix.to_string();
    loop {
        let full = if p.is_empty() {
            key.to_string()
        } else {
            format!("{p}.{key}")
        };
        if lookup(tree, &full).is_some() {
            return Some(full);
        }
        if p.is_empty() {
            return None;
        }
        p = p
            .rsplit_once('.')
            .map_or(String::new(), |(a, _)| a.to_string());
    }
}

#[test]
fn every_documented_key_exists_and_every_key_is_documented() {
    let tree = tree();
    let docs = docs();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let (mut documented, mut missing) = (Vec::new(), Vec::new());
    for line in docs.lines() {
        if line.starts_with('#') {
            let level = line.chars().take_while(|&c| c == '#').count();
            stack.retain(|(l, _)| *l < level);
            let parent = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
            stack.push((level, heading_prefix(line).unwrap_or(parent)));
            continue;
        }
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = format!("`{}", cell.split('|').next().unwrap());
        let prefix = stack.last().map(|(_, p)| p.clone()).unwrap_or_default();
        for key in cell_keys(&cell) {
            match resolve(&tree, &prefix, &key) {
                Some(full) => documented.push(full),
                None => missing.push(format!("{key} (under `{prefix}`)")),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/config.md documents keys the config does not have: {missing:?}"
    );
    assert!(
        documented.len() > 150,
        "only {} keys found",
        documented.len()
    );

    // Every leaf of the config is named in the document (by its full path,
    // a documented section above it, or its name in backticks).
    let names = backticked(&docs);
    let mut undocumented = Vec::new();
    let mut leaves = Vec::new();
    collect_leaves(&tree, String::new(), &mut leaves);
    for leaf in leaves {
        let last = leaf.rsplit('.').next().unwrap();
        let covered = documented
            .iter()
            .any(|d| leaf == *d || leaf.starts_with(&format!("{d}.")))
            || names
                .iter()
                .any(|n| n == last || leaf.ends_with(&format!(".{n}")));
        if !covered {
            undocumented.push(leaf);
        }
    }
    assert!(
        undocumented.is_empty(),
        "config keys docs/config.md does not name: {undocumented:?}"
    );
}

fn collect_leaves(node: &Value, path: String, out: &mut Vec<String>) {
    match node.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect_leaves(v, p, out);
            }
        }
        _ => out.push(path),
    }
}
