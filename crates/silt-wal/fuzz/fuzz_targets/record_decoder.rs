//! Every decoder of the WAL format on arbitrary bytes: never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt_wal::decode::decode_bytes(data);
});
