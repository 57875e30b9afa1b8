//! C plugins: the author's `*.c`, the embedded C SDK (`sdk/c`) and the
//! bindings `wit-bindgen c` generates for the world, compiled with clang for
//! wasm32-wasi (WASI preview 1, wasi-libc) into a reactor core module, which
//! [`componentize`] turns into a component.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use super::componentize::componentize;
use super::manifest::{GuestWorld, Manifest};
use super::staging::{write, write_output};
use super::{toolchain, WIT};

/// The wit-bindgen release the SDK is tested with.
pub const WIT_BINDGEN_VERSION: &str = "0.63.0";

/// `sdk/c`, embedded so an installed `skyrl` builds plugins without a
/// source checkout.
const SDK: &[(&str, &str)] = &[
    ("skyrl.h", include_str!("../../../../../sdk/c/skyrl.h")),
    ("skyrl.c", include_str!("../../../../../sdk/c/skyrl.c")),
];

/// The SDK's define selecting each world's glue.
fn world_define(world: GuestWorld) -> &'static str {
    match world {
        GuestWorld::Environment => "SKYRL_WORLD_ENVIRONMENT",
        GuestWorld::Tool => "SKYRL_WORLD_TOOL",
        GuestWorld::Reward => "SKYRL_WORLD_REWARD",
    }
}

/// Builds `dir` (its `*.c` files, `manifest.entry` among them) into `output`.
pub fn build(dir: &Path, manifest: &Manifest, output: &Path) -> anyhow::Result<()> {
    let guest = manifest.guest_world()?;
    let (world, define) = (guest.wit_name(), world_define(guest));
    let sources = sources(dir, &manifest.entry)?;

    let staging = tempfile::tempdir().context("cannot create a staging folder")?;
    let root = staging.path();
    write(&root.join("wit/plugin.wit"), WIT)?;
    for (name, text) in SDK {
        write(&root.join("sdk").join(name), text)?;
    }

    // The bindings. The component-type object is left out: `componentize`
    // embeds the world itself (the SDK satisfies the bindings' reference to it).
    let wit_bindgen = toolchain::find(
        "SKYRL_WIT_BINDGEN",
        "wit-bindgen",
        &format!("cargo install wit-bindgen-cli@{WIT_BINDGEN_VERSION} (scripts/setup installs it)"),
    )?;
    let bindings = root.join("bindings");
    let mut command = Command::new(&wit_bindgen);
    command
        .args(["c", "--no-object-file", "--world", world, "--out-dir"])
        .arg(&bindings)
        .arg(root.join("wit"));
    toolchain::run(&mut command, "wit-bindgen c")?;
    let glue = bindings.join(format!("{}.c", world.replace('-', "_")));
    anyhow::ensure!(
        glue.is_file(),
        "wit-bindgen c did not write {}",
        glue.display()
    );

    let clang = clang()?;
    let sysroot = std::env::var_os("SKYRL_WASI_SYSROOT").filter(|s| !s.is_empty());
    let objects = root.join("obj");
    std::fs::create_dir_all(&objects)
        .with_context(|| format!("cannot create {}", objects.display()))?;
    let mut units: Vec<(PathBuf, Unit)> = vec![
        (root.join("sdk/skyrl.c"), Unit::Sdk),
        (glue, Unit::Bindings),
    ];
    units.extend(sources.into_iter().map(|s| (s, Unit::Plugin)));
    let mut linked = Vec::new();
    for (index, (source, unit)) in units.iter().enumerate() {
        let stem = source
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let object = objects.join(format!("{index}_{stem}.o"));
        let mut command = Command::new(&clang);
        command.arg("--target=wasm32-wasi");
        if let Some(sysroot) = &sysroot {
            command.arg(format!("--sysroot={}", sysroot.to_string_lossy()));
        }
        command
            .args(["-O2", "-c"])
            .arg(format!("-D{define}"))
            .arg("-I")
            .arg(root.join("sdk"))
            .arg("-I")
            .arg(&bindings)
            .arg("-I")
            .arg(dir);
        if *unit == Unit::Plugin {
            command.arg("-Wall");
        } else {
            command.arg("-w");
        }
        command.arg(source).arg("-o").arg(&object);
        let what = format!("clang ({})", display(source, dir, root));
        compile(&mut command, &what, *unit)?;
        linked.push(object);
    }

    let core = root.join("core.wasm");
    let mut command = Command::new(&clang);
    command.arg("--target=wasm32-wasi");
    if let Some(sysroot) = &sysroot {
        command.arg(format!("--sysroot={}", sysroot.to_string_lossy()));
    }
    command
        .args(["-mexec-model=reactor", "-O2", "-Wl,--strip-debug"])
        .args(&linked)
        .arg("-o")
        .arg(&core);
    compile(&mut command, "linking with clang (wasm-ld)", Unit::Link)?;

    let module = std::fs::read(&core).with_context(|| format!("cannot read {}", core.display()))?;
    let component = componentize(&module, world)?;
    write_output(output, &component)
}

/// What a compiler step works on (for the hints on failure).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Sdk,
    Bindings,
    Plugin,
    Link,
}

/// `$SKYRL_CLANG`, else `clang-19`, else `clang` on `PATH`.
fn clang() -> anyhow::Result<PathBuf> {
    const HINT: &str = "apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 \
                        (scripts/setup installs them)";
    if std::env::var_os("SKYRL_CLANG").is_some_and(|v| !v.is_empty()) {
        return toolchain::find("SKYRL_CLANG", "clang-19", HINT);
    }
    toolchain::find("SKYRL_CLANG", "clang-19", HINT)
        .or_else(|_| toolchain::find("SKYRL_CLANG", "clang", HINT))
}

/// The folder's `*.c` files (sorted), the entry among them.
fn sources(dir: &Path, entry: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for item in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = item?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "c") {
            sources.push(path);
        }
    }
    let entry = dir.join(entry);
    if entry.extension().is_none_or(|e| e != "c") {
        bail!("entry `{}` is not a C source file", entry.display());
    }
    if !sources
        .iter()
        .any(|s| s.canonicalize().ok() == entry.canonicalize().ok())
    {
        sources.push(entry);
    }
    sources.sort();
    Ok(sources)
}

/// Runs a compiler step: a failure carries its stderr (and a hint when the
/// cause is a missing toolchain part); warnings on success are logged.
fn compile(command: &mut Command, what: &str, unit: Unit) -> anyhow::Result<()> {
    tracing::debug!(?command, "running {what}");
    let out = command
        .output()
        .with_context(|| format!("cannot start {what}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        if !stderr.trim().is_empty() {
            tracing::warn!("{what}:\n{}", stderr.trim_end());
        }
        return Ok(());
    }
    // wasm-ld repeats an undefined symbol once per reference.
    let mut lines: Vec<&str> = stderr.lines().collect();
    lines.dedup();
    let shown = lines[lines.len().saturating_sub(60)..].join("\n");
    let hint = if unit != Unit::Plugin && stderr.contains(".h' file not found") {
        "\nhint: the wasi-libc headers are missing (apt-get install wasi-libc, or point \
         $SKYRL_WASI_SYSROOT at a WASI sysroot)"
    } else if stderr.contains("libclang_rt.builtins") {
        "\nhint: clang's wasm32 runtime is missing (apt-get install libclang-rt-19-dev-wasm32)"
    } else if (stderr.contains("wasm-ld") && stderr.contains("not found"))
        || stderr.contains("unable to execute command")
    {
        "\nhint: the wasm linker is missing (apt-get install lld-19)"
    } else if stderr.contains("cannot find -lc") || stderr.contains("crt1-reactor.o") {
        "\nhint: wasi-libc is missing (apt-get install wasi-libc, or set $SKYRL_WASI_SYSROOT)"
    } else if unit == Unit::Link && stderr.contains("undefined symbol: skyrl_") {
        "\nhint: a C plugin defines the functions its kind needs (see skyrl.h in sdk/c) and \
         describes itself with SKYRL_PLUGIN_INFO(name, version, description)"
    } else {
        ""
    };
    bail!("{what} failed ({}):\n{shown}{hint}", out.status)
}

/// `source` relative to the plugin folder (or the staging folder).
fn display(source: &Path, dir: &Path, root: &Path) -> String {
    source
        .strip_prefix(dir)
        .or_else(|_| source.strip_prefix(root))
        .unwrap_or(source)
        .display()
        .to_string()
}
