//! Generates the gRPC code for `proto/shale.proto` with the protoc that ships inside the
//! `protoc-bin-vendored` crate, so a build needs no protoc on the machine and downloads nothing.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // Edition 2021: setting a variable in a build script, before any thread starts, is safe.
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/shale.proto");
    // Every service and client decodes through `codec.rs`, which counts a message's
    // fields before decoding it.
    tonic_build::configure()
        .codec_path("crate::codec::CheckedCodec")
        .compile_protos(&["proto/shale.proto"], &["proto"])?;
    Ok(())
}
