//! Link libtorch so that binaries, tests and benches of this crate run without
//! `LD_LIBRARY_PATH` and keep CUDA.
//!
//! * `-Wl,-rpath=<libtorch>/lib`: the loader finds libtorch at run time.
//! * `-Wl,--no-as-needed -ltorch`: `libtorch.so` pulls in `libtorch_cuda.so`;
//!   with `--as-needed` the linker drops it (no symbol is referenced directly)
//!   and CUDA silently disappears.
//!
//! `rustc-link-arg` applies to this package's own targets only (cargo does not
//! propagate it, and the `-as-needed` link-lib modifier that would is
//! nightly-only). A crate with binaries that depends on skyrl-model needs the same
//! three link args in its own build.rs; this script exports the libtorch
//! directory to it as `DEP_SKYRL_MODEL_LIBTORCH_LIB` (see the README section
//! "Linking downstream binaries").
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let lib = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("torch-sys did not export DEP_TCH_LIBTORCH_LIB (is LIBTORCH set?)");
    println!("cargo:rustc-link-arg=-Wl,-rpath={lib}");
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
    println!("cargo:libtorch_lib={lib}");
}
