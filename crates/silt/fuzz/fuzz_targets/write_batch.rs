//! A write batch payload (what a log record holds) on arbitrary bytes: an error, never a
//! panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt::fuzzing::write_batch(data);
});
