#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_server::fuzzing::grpc_message(data));
