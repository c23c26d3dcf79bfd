//! gyre-loop's integration tests, one module per area, linked into one test binary
//! (one link step instead of one per file).

mod agent;
mod property;
mod side_requests;
mod transitions;
