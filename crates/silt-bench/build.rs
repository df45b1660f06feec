//! Builds the `LD_PRELOAD` fsync-delay shim (`shim/fsync_delay.c`) into a shared object in
//! `OUT_DIR`; `run.rs` embeds it and writes it out when `--fsync-delay-us` needs it. The C
//! compiler is the one the `cc` crate finds (`CC`, else `cc`), as for any C in the build.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=shim/fsync_delay.c");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("fsync_delay.so");
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        // The shim interposes glibc's symbols; elsewhere the tool reports it unsupported.
        std::fs::write(&so, b"").expect("write an empty shim");
        return;
    }
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-o"])
        .arg(&so)
        .arg("shim/fsync_delay.c")
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("run the C compiler for shim/fsync_delay.c");
    assert!(status.success(), "building shim/fsync_delay.c failed");
}
