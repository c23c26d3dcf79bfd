//! gyre-testkit's integration tests, one module per area, linked into one test binary
//! (one link step instead of one per file).

mod common;

mod binary;
mod faults;
mod script_flow;
mod stream;
mod summary;
