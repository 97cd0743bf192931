//! Compiles `proto/onnx.proto` (ONNX's own message definitions, as the
//! `onnx` package ships them) into Rust types with prost, parsing it with
//! protox so that no system `protoc` is needed.

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let files = match protox::compile(["onnx.proto"], ["proto"]) {
        Ok(files) => files,
        Err(e) => panic!("proto/onnx.proto does not compile: {e}"),
    };
    if let Err(e) = prost_build::Config::new().compile_fds(files) {
        panic!("generating the ONNX message types failed: {e}");
    }
}
