//! Property tests: over random histories (tool pairs, thinking, images, errors) every
//! stage keeps the pairing, keeps the first request (or a summary of it), never adds
//! tokens, and reports exactly the tokens it freed.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use futures::executor::block_on;
use futures::future::BoxFuture;
use gyre_compact::{
    AutocompactConfig, BytesPerTokenCounter, CollapseConfig, CompactConfig, CompactInputs,
    ContextCollapse, MicrocompactConfig, Pipeline, PrepareContext, ResultStore, SnipConfig,
    SummarizeError, Summarizer, SummaryRequest, TokenCounter, ToolResultBudgetConfig, Trigger,
    apply_tool_result_budget, check_pairing, compact, is_compact_boundary, is_compact_summary,
    microcompact, snip,
};
use gyre_protocol::{ContentBlock, ImageSource, Message, ToolResultContent, ToolResultPart};
use proptest::prelude::*;
use serde_json::json;

const TOOLS: [&str; 8] = [
    "Read", "Bash", "Grep", "Glob", "Edit", "Write", "WebFetch", "Task",
];

#[derive(Debug, Clone)]
struct Call {
    tool: usize,
    len: usize,
    is_error: bool,
    image: bool,
}

#[derive(Debug, Clone)]
enum Round {
    Tools {
        thinking: bool,
        text: bool,
        calls: Vec<Call>,
    },
    Chat {
        thinking: bool,
        len: usize,
        image: bool,
    },
}

fn len() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0..300usize,
        3 => 300..6_000usize,
        1 => 15_000..70_000usize,
    ]
}

fn call() -> impl Strategy<Value = Call> {
    (
        0..TOOLS.len(),
        len(),
        any::<bool>(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(tool, len, is_error, image)| Call {
            tool,
            len,
            is_error,
            image,
        })
}

fn round() -> impl Strategy<Value = Round> {
    prop_oneof![
        3 => (any::<bool>(), any::<bool>(), prop::collection::vec(call(), 1..4))
            .prop_map(|(thinking, text, calls)| Round::Tools { thinking, text, calls }),
        1 => (any::<bool>(), len(), prop::bool::weighted(0.2))
            .prop_map(|(thinking, len, image)| Round::Chat { thinking, len, image }),
    ]
}

fn image() -> ImageSource {
    ImageSource::Base64 {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo".repeat(20),
    }
}

fn build(rounds: &[Round]) -> Vec<Message> {
    let mut h = vec![Message::user_text("the first request: fix the parser")];
    let mut next_id = 0usize;
    for (r, round) in rounds.iter().enumerate() {
        match round {
            Round::Tools {
                thinking,
                text,
                calls,
            } => {
                let mut a = Vec::new();
                if *thinking {
                    a.push(ContentBlock::thinking(format!("thinking {r}"), "sig"));
                }
                if *text {
                    a.push(ContentBlock::text("Let me look."));
                }
                let mut u = Vec::new();
                for c in calls {
                    let id = format!("toolu_{next_id}");
                    next_id += 1;
                    a.push(ContentBlock::tool_use(
                        &id,
                        TOOLS[c.tool],
                        json!({ "file_path": format!("/src/{}.rs", next_id % 7), "command": "ls" }),
                    ));
                    let body = format!("{} output {id}\n{}", TOOLS[c.tool], "o".repeat(c.len));
                    let content = if c.image {
                        ToolResultContent::Parts(vec![
                            ToolResultPart::Text { text: body },
                            ToolResultPart::Image { source: image() },
                        ])
                    } else {
                        ToolResultContent::Text(body.into())
                    };
                    u.push(ContentBlock::ToolResult {
                        tool_use_id: id,
                        content,
                        is_error: c.is_error,
                        cache_control: None,
                    });
                }
                h.push(Message::assistant(a));
                h.push(Message::user(u));
            }
            Round::Chat {
                thinking,
                len,
                image: img,
            } => {
                let mut a = Vec::new();
                if *thinking {
                    a.push(ContentBlock::redacted_thinking("enc".repeat(10)));
                }
                a.push(ContentBlock::text("t".repeat(*len + 1)));
                h.push(Message::assistant(a));
                let mut u = vec![ContentBlock::text(format!("user message {r}"))];
                if *img {
                    u.push(ContentBlock::Image {
                        source: image(),
                        cache_control: None,
                    });
                }
                h.push(Message::user(u));
            }
        }
    }
    h
}

fn history() -> impl Strategy<Value = Vec<Message>> {
    prop::collection::vec(round(), 0..40).prop_map(|r| build(&r))
}

fn tokens(h: &[Message]) -> u64 {
    h.iter()
        .map(|m| BytesPerTokenCounter.count_message(m))
        .sum()
}

struct MemStore;
impl ResultStore for MemStore {
    fn persist(&self, id: &str, _: &str) -> io::Result<PathBuf> {
        Ok(PathBuf::from(format!("/session/tool-results/{id}.txt")))
    }
}

struct Fake;
impl Summarizer for Fake {
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        let n = request.messages.len();
        Box::pin(async move {
            Ok(format!(
                "<analysis>a</analysis><summary>{n} messages</summary>"
            ))
        })
    }
}

/// The invariants every stage keeps, given input and output.
fn assert_invariants(input: &[Message], output: &[Message], freed: u64) {
    assert_eq!(check_pairing(input), Ok(()), "generated history is valid");
    assert_eq!(check_pairing(output), Ok(()), "pairing kept");
    assert_eq!(output[0], input[0], "first request kept");
    let (before, after) = (tokens(input), tokens(output));
    assert!(after <= before, "tokens grew: {before} -> {after}");
    assert_eq!(before - after, freed, "freed is exact");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn budget_keeps_invariants(h in history()) {
        let r = apply_tool_result_budget(
            h.clone(), &ToolResultBudgetConfig::default(), &MemStore, &BytesPerTokenCounter);
        assert_invariants(&h, &r.messages, r.tokens_freed());
        let again = apply_tool_result_budget(
            r.messages.clone(), &ToolResultBudgetConfig::default(), &MemStore, &BytesPerTokenCounter);
        prop_assert_eq!(again.messages, r.messages, "idempotent");
    }

    #[test]
    fn snip_keeps_invariants(h in history(), to_free in 0u64..200_000, keep in 0usize..6) {
        let config = SnipConfig { enabled: true, keep_recent_rounds: keep, ..SnipConfig::default() };
        let r = snip(h.clone(), &config, to_free, &BytesPerTokenCounter);
        assert_invariants(&h, &r.messages, r.tokens_freed());
    }

    #[test]
    fn microcompact_keeps_invariants(h in history(), keep in 0usize..8) {
        let config = MicrocompactConfig { keep_recent: keep, ..MicrocompactConfig::default() };
        let r = microcompact(h.clone(), &config, &BytesPerTokenCounter);
        assert_invariants(&h, &r.messages, r.tokens_freed());
        let again = microcompact(r.messages.clone(), &config, &BytesPerTokenCounter);
        prop_assert_eq!(again.messages, r.messages, "idempotent");
    }

    #[test]
    fn collapse_keeps_invariants(h in history(), keep in 0usize..8, span in 1usize..6) {
        let config = CollapseConfig { keep_recent_rounds: keep, max_span_rounds: span, ..CollapseConfig::default() };
        let mut c = ContextCollapse::new();
        c.stage(&h, &config);
        c.recover_from_overflow();
        let r = c.project(h.clone(), &BytesPerTokenCounter);
        assert_invariants(&h, &r.messages, r.tokens_freed());
        // Shown again: the same projection, nothing newly freed.
        let again = c.project(h.clone(), &BytesPerTokenCounter);
        prop_assert_eq!(again.tokens_freed(), 0);
        prop_assert_eq!(again.messages, r.messages);
    }

    #[test]
    fn autocompact_keeps_invariants(h in history(), keep_tokens in 0u64..20_000) {
        let config = AutocompactConfig { keep_recent_tokens: keep_tokens, ..AutocompactConfig::default() };
        let inputs = CompactInputs {
            trigger: Trigger::Auto,
            pre_tokens: tokens(&h),
            summary_input_budget: 50_000,
            recent_files: &[],
            custom_instructions: None,
        };
        if let Ok(c) = block_on(compact(&h, inputs, &config, &Fake, &BytesPerTokenCounter)) {
            prop_assert!(is_compact_boundary(&c.history[0]));
            prop_assert!(is_compact_summary(&c.history[1]));
            let sent = &c.history[1..];
            check_pairing(sent).unwrap();
            // The tail is a suffix of the input, whole.
            let tail = &sent[1..];
            prop_assert_eq!(tail, &h[h.len() - tail.len()..]);
            prop_assert_eq!(c.boundary.post_tokens, tokens(sent));
        }
    }

    #[test]
    fn pipeline_keeps_invariants(
        h in history(),
        window in 20_000u64..400_000,
        snip_on in any::<bool>(),
        auto_on in any::<bool>(),
        drain in any::<bool>(),
    ) {
        let mut config = CompactConfig::new("m", 8_000);
        config.context_window = Some(window);
        config.snip.enabled = snip_on;
        config.autocompact.enabled = auto_on;
        let mut p = Pipeline::new(config, Arc::new(Fake), Arc::new(BytesPerTokenCounter));
        let ctx = PrepareContext::default();
        let first = block_on(p.prepare(&h, &ctx)).unwrap();
        if drain {
            p.recover_from_overflow();
        }
        let history = first.history.clone().unwrap_or_else(|| h.clone());
        let out = block_on(p.prepare(&history, &ctx)).unwrap();
        for prepared in [&first, &out] {
            check_pairing(&prepared.messages).unwrap();
            if let Some(stored) = &prepared.history {
                let start = stored.iter().rposition(is_compact_boundary).map_or(0, |i| i + 1);
                check_pairing(&stored[start..]).unwrap();
            }
            let m0 = &prepared.messages[0];
            prop_assert!(*m0 == h[0] || is_compact_summary(m0), "first request or its summary");
            prop_assert!(tokens(&prepared.messages) <= tokens(&h));
            prop_assert!(!prepared.messages.iter().any(is_compact_boundary));
        }
    }

    #[test]
    fn pipeline_leaves_a_history_in_budget_alone(h in history()) {
        let mut config = CompactConfig::new("m", 8_000);
        config.context_window = Some(10_000_000);
        // Cache-friendly batches clear below the warning level; the rest leave it alone.
        config.microcompact.batch_from_tokens = 0;
        let mut p = Pipeline::new(config, Arc::new(Fake), Arc::new(BytesPerTokenCounter));
        let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
        prop_assert_eq!(out.history, None);
        prop_assert_eq!(out.messages, h);
    }
}
