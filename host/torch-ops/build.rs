//! Compile the C++ shim (`shim/torch_ops.cpp`) against the libtorch that
//! torch-sys links, and make this crate's tests find libtorch at run time.
//!
//! torch-sys exports the libtorch library directory as `DEP_TCH_LIBTORCH_LIB`;
//! the headers live in `<lib>/../include`. The rpath and `--no-as-needed
//! -ltorch` link args are the same as in `host/model/build.rs`; the directory
//! is re-exported as `DEP_SKYRL_TORCH_OPS_LIBTORCH_LIB`.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/torch_ops.cpp");
    println!("cargo:rerun-if-changed=shim/torch_ops.h");
    println!("cargo:rerun-if-changed=shim/shim_common.h");
    println!("cargo:rerun-if-changed=shim/decode_attention.cpp");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = PathBuf::from(env::var("DEP_TCH_LIBTORCH_LIB").expect(
        "torch-sys did not export DEP_TCH_LIBTORCH_LIB (is LIBTORCH set? source .deps/env.sh)",
    ));
    let include = lib.join("../include");
    if !include.join("ATen/ops/_fused_adamw.h").exists() {
        panic!(
            "skyrl-torch-ops: no ATen headers under {} (expected ATen/ops/_fused_adamw.h)",
            include.display()
        );
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("shim/torch_ops.cpp")
        .file("shim/decode_attention.cpp")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
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
        .flag_if_supported("-Wno-unused-parameter")
        .compile("skyrl_torch_ops_shim");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:libtorch_lib={}", lib.display());
}
