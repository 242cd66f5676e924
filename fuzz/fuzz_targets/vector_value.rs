#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shale_search::fuzzing::vector_value(data));
