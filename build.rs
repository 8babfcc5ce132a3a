//! Compiles `proto/memgym/v1/*.proto` with the pure-Rust `protox` (no system `protoc`), writes the encoded
//! descriptor set for server reflection, and generates prost + tonic code.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos =
        ["proto/memgym/v1/memgym.proto", "proto/memgym/v1/banks.proto", "proto/memgym/v1/agent.proto", "proto/memgym/v1/learn.proto"];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("memgym_descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(fds)?;
    Ok(())
}
