//! Test support shared by the cluster tests: the linearizability checker and the
//! process-cluster harness.

#![allow(dead_code)]

pub mod cluster;
pub mod lincheck;
