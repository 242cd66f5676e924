#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_server::fuzzing::snapshot_frames(data));
