//! Summary (compaction) requests answered on the side, without taking a turn.

use crate::common::{body, parse_sse, post};
use gyre_testkit::{Script, SummaryAnswer, TestServer, Turn};
use serde_json::{Value, json};

const PROMPT: &str = "Write a detailed summary of the conversation so far";

/// A request whose last message is a tool result followed by the compaction prompt, as
/// a client that compacts mid-session sends it.
fn summary_request() -> Value {
    let mut b = body(true);
    b["messages"] = json!([
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "fn main() {}"},
            {"type": "text", "text": format!("{PROMPT}. It will replace the earlier messages.")}
        ]}
    ]);
    b
}

fn text_of(sse: &str) -> String {
    parse_sse(sse)
        .iter()
        .filter_map(|(_, data)| data["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn summary_requests_are_answered_without_taking_a_turn() {
    let script = Script::new([Turn::text("first"), Turn::text("second")]).with_summary(
        SummaryAnswer::new(PROMPT, Turn::text("<summary>All done so far.</summary>")),
    );
    let server = TestServer::start(script).await.unwrap();
    let url = server.url();

    let replies = [
        post(&url, &body(true)).await.text().await.unwrap(),
        post(&url, &summary_request()).await.text().await.unwrap(),
        post(&url, &summary_request()).await.text().await.unwrap(),
        post(&url, &body(true)).await.text().await.unwrap(),
    ];
    assert_eq!(
        replies.iter().map(|r| text_of(r)).collect::<Vec<_>>(),
        [
            "first",
            "<summary>All done so far.</summary>",
            "<summary>All done so far.</summary>",
            "second"
        ]
    );
    // The summary's usage follows the request's size like any turn's.
    let start = &parse_sse(&replies[1])[0].1;
    assert!(start["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0);

    let requests = server.requests();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.turn, r.summary))
            .collect::<Vec<_>>(),
        [
            (Some(0), false),
            (None, true),
            (None, true),
            (Some(1), false)
        ]
    );
    assert_eq!(server.turns_served(), 2);
    // The script is exhausted only by its own turns.
    assert_eq!(post(&url, &body(true)).await.status(), 500);
}

#[tokio::test]
async fn a_summary_answer_can_be_an_http_error() {
    let script = Script::new([Turn::text("only")])
        .with_summary(SummaryAnswer::new(PROMPT, Turn::http_error(529)));
    let server = TestServer::start(script).await.unwrap();
    assert_eq!(post(&server.url(), &summary_request()).await.status(), 529);
    let reply = post(&server.url(), &body(false)).await;
    let message: Value = serde_json::from_str(&reply.text().await.unwrap()).unwrap();
    assert_eq!(message["content"][0]["text"], "only");
}

#[tokio::test]
async fn the_prompt_only_counts_in_the_text_of_the_last_message() {
    let script = Script::new([Turn::text("a"), Turn::text("b")])
        .with_summary(SummaryAnswer::new(PROMPT, Turn::text("summary")));
    let server = TestServer::start(script).await.unwrap();
    // A file that quotes the prompt, read as a tool result.
    let mut quoted = summary_request();
    quoted["messages"][2]["content"]
        .as_array_mut()
        .unwrap()
        .truncate(1);
    quoted["messages"][2]["content"][0]["content"] = json!(PROMPT);
    // The prompt earlier in the conversation.
    let mut earlier = summary_request();
    earlier["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": "ok"}));
    for request in [quoted, earlier] {
        post(&server.url(), &request).await.text().await.unwrap();
    }
    assert_eq!(
        server
            .requests()
            .iter()
            .map(|r| (r.turn, r.summary))
            .collect::<Vec<_>>(),
        [(Some(0), false), (Some(1), false)]
    );
}

#[test]
fn a_script_file_names_its_summary_answer() {
    let script = Script::from_json(&format!(
        r#"{{"turns": [{{"content": [{{"type": "text", "text": "hi"}}]}}],
            "summary": {{"when_prompt_contains": "{PROMPT}",
                         "turn": {{"content": [{{"type": "text", "text": "<summary>s</summary>"}}]}}}}}}"#
    ))
    .unwrap();
    let summary = script.summary.as_ref().unwrap();
    assert_eq!(summary.when_prompt_contains, PROMPT);
    assert_eq!(summary.turn, Turn::text("<summary>s</summary>"));
    // A round trip through JSON keeps it.
    let again = Script::from_json(&serde_json::to_string(&script).unwrap()).unwrap();
    assert_eq!(again, script);

    for (bad, why) in [
        (
            r#"{"turns": [], "summary": {"when_prompt_contains": "x", "turn": {}, "extra": 1}}"#,
            "unknown field `extra`",
        ),
        (
            r#"{"turns": [], "summary": {"when_prompt_contains": "", "turn": {}}}"#,
            "when_prompt_contains must not be empty",
        ),
        (
            r#"{"turns": [], "summary": {"when_prompt_contains": "x", "turn": {"chunk_chars": 0}}}"#,
            "summary.turn: chunk_chars must be at least 1",
        ),
    ] {
        let error = Script::from_json(bad).unwrap_err().to_string();
        assert!(error.contains(why), "{bad}: {error}");
    }
}

#[tokio::test]
async fn a_request_over_the_context_window_is_refused_without_taking_a_turn() {
    let small = body(false);
    let window = u64::try_from(small.to_string().len() / 4).unwrap() + 10;
    let script = Script::new([Turn::text("fits")]).with_context_window(window);
    let server = TestServer::start(script).await.unwrap();
    let mut big = body(false);
    big["messages"][0]["content"] = json!("x".repeat(200));
    let reply = post(&server.url(), &big).await;
    assert_eq!(reply.status(), 400);
    let error: Value = serde_json::from_str(&reply.text().await.unwrap()).unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt is too long: ")
            && message.ends_with(&format!(" tokens > {window} maximum")),
        "{message}"
    );
    let reply = post(&server.url(), &small).await;
    let message: Value = serde_json::from_str(&reply.text().await.unwrap()).unwrap();
    assert_eq!(message["content"][0]["text"], "fits");
    assert_eq!(
        server.requests().iter().map(|r| r.turn).collect::<Vec<_>>(),
        [None, Some(0)]
    );
}
