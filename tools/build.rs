//! Build script: intel_tex_2's ISPC kernels and the Basis Universal
//! transcoder are C++ objects, and with the default linker of current Rust
//! toolchains nothing pulls in the C++ runtime they reference
//! (`__gxx_personality_v0`), so link it explicitly. Both are this crate's
//! (the packer's encoders and transcoder): the streaming library links no
//! C++ runtime.

fn main() {
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target == "linux" {
        println!("cargo:rustc-link-lib=stdc++");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
