//! Build a log, damage its files arbitrarily, reopen: a typed error or a prefix of what was
//! appended, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt_wal::decode::recover_damaged(data);
});
