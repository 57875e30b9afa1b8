//! Compile the c10d C++ shim against the libtorch that torch-sys links, and
//! make this crate's binaries and tests find libtorch at run time.
//!
//! * torch-sys exports the libtorch library directory as
//!   `DEP_TCH_LIBTORCH_LIB`; the headers live in `<lib>/../include` for both
//!   the staging `$LIBTORCH` and a python torch install.
//! * Gloo's headers are not in the torch wheel: they come from the system
//!   (`apt-get install libgloo-dev`, found in `/usr/include/gloo`).
//! * `-Wl,-rpath=<lib>` and `--no-as-needed -ltorch` as in `host/train/build.rs`;
//!   the directory is re-exported as `DEP_SKYRL_DISTRIBUTED_LIBTORCH_LIB`.
//! * feature `nccl`: `-DUSE_C10D_NCCL`, links `torch_cuda` + `c10_cuda` from the
//!   real torch directory (the staging dir may only hold the CPU libraries) and
//!   needs the CUDA + NCCL headers.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=shim/c10d_shim.cpp");
    println!("cargo:rerun-if-changed=shim/c10d_shim.h");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let lib = PathBuf::from(env::var("DEP_TCH_LIBTORCH_LIB").expect(
        "torch-sys did not export DEP_TCH_LIBTORCH_LIB (is LIBTORCH set? source .deps/env.sh)",
    ));
    let include = lib.join("../include");
    if !include
        .join("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp")
        .exists()
    {
        panic!(
            "skyrl-distributed: no c10d headers under {} (expected torch/csrc/distributed/c10d/ProcessGroupGloo.hpp)",
            include.display()
        );
    }
    if !Path::new("/usr/include/gloo/context.h").exists() {
        panic!("skyrl-distributed: Gloo headers missing (/usr/include/gloo); run `apt-get install -y libgloo-dev`");
    }

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .file("shim/c10d_shim.cpp")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("USE_C10D_GLOO", None)
        // -isystem: torch's headers are noisy under -Wall -Wextra; ours are not.
        .flag("-isystem")
        .flag(include.to_str().expect("utf-8 include path"))
        .flag("-isystem")
        .flag(
            include
                .join("torch/csrc/api/include")
                .to_str()
                .expect("utf-8 include path"),
        )
        .flag_if_supported("-Wno-unused-parameter");

    let mut link_dirs = vec![lib.clone()];
    if env::var_os("CARGO_FEATURE_NCCL").is_some() {
        let cuda_lib = nccl_setup(&mut build, &lib);
        if cuda_lib != lib {
            link_dirs.push(cuda_lib);
        }
    }
    build.compile("skyrl_c10d_shim");

    for dir in &link_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    if env::var_os("CARGO_FEATURE_NCCL").is_some() {
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:libtorch_lib={}", lib.display());
}

/// Add the NCCL define and the CUDA/NCCL include dirs; return the directory
/// holding `libtorch_cuda.so`.
fn nccl_setup(build: &mut cc::Build, lib: &Path) -> PathBuf {
    // The staging dir links to the python torch's libraries; the real
    // directory next to `libtorch_cpu.so` also holds `libtorch_cuda.so`.
    let real_lib = std::fs::canonicalize(lib.join("libtorch_cpu.so"))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| lib.to_path_buf());
    let cuda_lib = [lib.to_path_buf(), real_lib.clone()]
        .into_iter()
        .find(|d| d.join("libtorch_cuda.so").exists())
        .unwrap_or_else(|| {
            panic!(
                "skyrl-distributed feature `nccl`: libtorch_cuda.so not found in {} or {}; use a CUDA build of torch",
                lib.display(),
                real_lib.display()
            )
        });

    // python wheels: site-packages/torch/lib -> site-packages/nvidia/*/include
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(site) = real_lib.parent().and_then(Path::parent) {
        if let Ok(entries) = std::fs::read_dir(site.join("nvidia")) {
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path().join("include")))
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            candidates.extend(dirs);
        }
    }
    if let Some(home) = env::var_os("CUDA_HOME") {
        candidates.push(PathBuf::from(home).join("include"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));

    let has = |name: &str| candidates.iter().any(|d| d.join(name).exists());
    for (header, from) in [
        ("cuda_runtime_api.h", "the nvidia-cuda-runtime wheel"),
        // CUDA 13 wheels moved these into their own package.
        ("crt/host_config.h", "the nvidia-cuda-crt wheel (CUDA 13)"),
        ("nv/target", "the nvidia-cuda-cccl wheel (CUDA 13)"),
        ("nccl.h", "the nvidia-nccl wheel"),
    ] {
        if !has(header) {
            panic!(
                "skyrl-distributed feature `nccl`: {header} not found in any of {candidates:?}; \
                 install {from} next to torch, or set CUDA_HOME to a CUDA toolkit"
            );
        }
    }
    build.define("USE_C10D_NCCL", None).define("USE_CUDA", None);
    for dir in candidates.iter().filter(|d| d.is_dir()) {
        build
            .flag("-isystem")
            .flag(dir.to_str().expect("utf-8 include path"));
    }
    cuda_lib
}
