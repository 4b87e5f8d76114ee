//! Build script: intel_tex_2's ISPC kernels and the Basis Universal
//! transcoder are C++ objects, and with the default linker of current Rust
//! toolchains nothing pulls in the C++ runtime they reference
//! (`__gxx_personality_v0`), so link it explicitly. Both come with the
//! `tools` feature only: the streaming library alone links no C++ runtime.

fn main() {
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let tools = std::env::var_os("CARGO_FEATURE_TOOLS").is_some();
    if target == "linux" && tools {
        println!("cargo:rustc-link-lib=stdc++");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
