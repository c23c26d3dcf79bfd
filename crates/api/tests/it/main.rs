//! gyre-api's integration tests, one module per area, linked into one test binary
//! (one link step instead of one per file).

mod auth;
#[cfg(feature = "bedrock")]
mod bedrock;
mod fixtures;
mod http_retry;
mod lossless;
mod network;
mod retry_props;
#[cfg(feature = "vertex")]
mod vertex;
