//! Make test and binary artefacts of this crate find libtorch at run time.
//!
//! torch-sys exports the libtorch library directory as `DEP_TCH_LIBTORCH_LIB`;
//! we embed it as an rpath and force-link `libtorch` so the dynamic loader
//! resolves it without `LD_LIBRARY_PATH`.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={dir}");
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
