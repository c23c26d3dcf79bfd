//! The end-to-end tests of the real `gyre` binary, one module per area, linked into one
//! test binary (one link step instead of one per file).

mod agent_sdk;
mod agents_e2e;
mod architecture_doc;
mod background_e2e;
mod bounded_ops;
mod compaction_e2e;
mod containment;
mod crash_safety;
mod dependency_rules;
mod exit_plan_mode_e2e;
mod fault_matrix;
mod fixtures_e2e;
mod headless;
mod load;
mod lossless_e2e;
mod mcp_e2e;
mod permissions_e2e;
mod plan_mode_e2e;
mod process_hygiene;
mod progress_lines;
mod readme_e2e;
mod recovery_e2e;
mod repl_tmux;
mod sdk_driver;
mod sdk_protocol;
mod secrets;
mod security_e2e;
mod security_kernel_e2e;
mod security_session_e2e;
mod security_trust_e2e;
mod sessions_e2e;
mod todo_e2e;
mod transcript_integrity;
mod walk_races;
mod web_fetch_e2e;
