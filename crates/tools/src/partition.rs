//! Partitioning a turn's tool calls into batches: consecutive concurrency-safe calls run
//! together, each unsafe call alone.

use crate::{ToolCall, ToolRegistry};

/// Calls that run together: several concurrency-safe calls in parallel, or one unsafe
/// call alone.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolBatch {
    /// Whether the calls of the batch run at the same time.
    pub concurrent: bool,
    /// The calls, in the order the model made them.
    pub calls: Vec<ToolCall>,
}

/// Consecutive concurrency-safe calls form one parallel batch; each unsafe call is its
/// own serial batch. Unknown tools count as unsafe.
///
/// `[Read, Grep, Read, Edit, Read]` → `[Read, Grep, Read]`, `[Edit]`, `[Read]`.
#[must_use]
pub fn partition(calls: &[ToolCall], registry: &ToolRegistry) -> Vec<ToolBatch> {
    let mut batches: Vec<ToolBatch> = Vec::new();
    for call in calls {
        let safe = registry.is_concurrency_safe(&call.name, &call.input);
        match batches.last_mut() {
            Some(batch) if safe && batch.concurrent => batch.calls.push(call.clone()),
            _ => batches.push(ToolBatch {
                concurrent: safe,
                calls: vec![call.clone()],
            }),
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str) -> ToolCall {
        ToolCall::new(format!("id_{name}"), name, json!({}))
    }

    #[test]
    fn safe_runs_group_and_unsafe_calls_stand_alone() {
        let registry = ToolRegistry::with_default_tools();
        let calls = [
            call("Read"),
            call("Grep"),
            call("Read"),
            call("Edit"),
            call("Bash"),
            call("Read"),
            call("Glob"),
        ];
        let batches = partition(&calls, &registry);
        let shape: Vec<(bool, usize)> = batches
            .iter()
            .map(|b| (b.concurrent, b.calls.len()))
            .collect();
        assert_eq!(shape, vec![(true, 3), (false, 1), (false, 1), (true, 2)]);
    }

    #[test]
    fn unknown_tools_are_serial() {
        let registry = ToolRegistry::with_default_tools();
        let batches = partition(&[call("Read"), call("Nope"), call("Read")], &registry);
        assert_eq!(batches.len(), 3);
        assert!(!batches[1].concurrent);
    }

    proptest::proptest! {
        #[test]
        fn batches_keep_order_and_isolate_unsafe_calls(names in proptest::collection::vec(
            proptest::sample::select(vec!["Read", "Grep", "Glob", "Edit", "Write", "Bash"]), 0..30)) {
            let registry = ToolRegistry::with_default_tools();
            let calls: Vec<ToolCall> = names.iter().enumerate()
                .map(|(i, n)| ToolCall::new(format!("t{i}"), *n, json!({}))).collect();
            let batches = partition(&calls, &registry);
            let flat: Vec<ToolCall> = batches.iter().flat_map(|b| b.calls.clone()).collect();
            proptest::prop_assert_eq!(&flat, &calls);
            for pair in batches.windows(2) {
                proptest::prop_assert!(!(pair[0].concurrent && pair[1].concurrent));
            }
            for b in &batches {
                proptest::prop_assert!(b.concurrent || b.calls.len() == 1);
            }
        }
    }
}
