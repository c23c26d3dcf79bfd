//! gyre-tools' integration tests, one module per area, linked into one test binary
//! (one link step instead of one per file).

mod support;

mod bash;
mod edit_write;
mod executor;
mod grep_glob;
mod permissions;
mod read;
mod sandbox;
mod swap;
mod updated_input;
mod validate_first;
