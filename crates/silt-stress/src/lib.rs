//! `silt-stress`: stress and crash tests of silt at RocksDB `db_stress` scale. A seeded
//! workload of every operation the engine has ([`workload`]) runs against an expected
//! state kept outside the database ([`expected`]); crash drivers ([`modes`]) kill it —
//! from outside at random times (black-box), at kill points compiled into the engine
//! (white-box), by simulated power loss, or by failing the n-th I/O call — then reopen and
//! verify ([`verify`]): nothing acknowledged lost, nothing half applied, no newer write
//! without an older one. Every failure names its seed and the command that replays it.
//! See `docs/reliability.md`.

pub mod expected;
pub mod modes;
pub mod verify;
pub mod workload;
