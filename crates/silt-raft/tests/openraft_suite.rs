//! openraft's own storage test suite (`openraft::testing::Suite`) over silt-raft's
//! `LogStore` and `StateMachine`, each test on a fresh directory.

use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, StorageError, StorageIOError};
use silt_raft::{LogStore, StateMachine, StoreOptions, TypeConfig};
use tempfile::TempDir;

struct SiltBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for SiltBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        let (log, sm) = silt_raft::open(dir.path(), &StoreOptions::small())
            .map_err(|e| StorageIOError::write(AnyError::new(&e)))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(SiltBuilder).expect("openraft's storage suite");
}
