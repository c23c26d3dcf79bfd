//! gyre-core's integration tests: sessions driven through their public interface
//! (operations in, events out) against gyre-testkit, without a front-end.

mod ops;
