//! Link libtorch for the `skyrl` binary (see host/model/build.rs): an rpath to
//! the libtorch directory exported by skyrl-model, and `--no-as-needed -ltorch`
//! so CUDA builds keep `libtorch_cuda`.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SKYRL_MODEL_LIBTORCH_LIB");
    if let Ok(lib) = std::env::var("DEP_SKYRL_MODEL_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath={lib}");
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
