//! The Anthropic fake speaks the real wire format.

use std::time::Duration;

use serde_json::{Value, json};
use ultraplan_protocol::model::Usage;

use super::tests_support::{post, sse_frames};
use super::*;

const VERSION: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", FAKE_ANTHROPIC_KEY);

fn body(stream: bool) -> Value {
    json!({"model": "claude-test", "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]})
}

async fn send(fake: &FakeAnthropic, stream: bool) -> reqwest::Response {
    let url = format!("{}/v1/messages", fake.base_url());
    post(&url, &[KEY, VERSION], &body(stream)).await
}

#[tokio::test]
async fn streams_the_real_event_sequence() {
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 34,
        cache_read_input_tokens: 56,
        cache_creation_input_tokens: 78,
    };
    let reply = Reply::text_and_tool_use("Let me look.", "Glob", json!({"pattern": "**/*.rs"}))
        .usage(usage)
        .chunked(5, 4);
    let fake = FakeAnthropic::start(Script::replies([reply])).await;
    let response = send(&fake, true).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap();
    assert!(content_type.starts_with("text/event-stream"));
    let frames = sse_frames(&response.text().await.unwrap());

    let names: Vec<&str> = frames.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    for (event, data) in &frames {
        assert_eq!(
            data["type"],
            event.as_deref().unwrap(),
            "data.type matches event name"
        );
    }
    let start = &frames[0].1["message"];
    assert_eq!(start["model"], "claude-test");
    assert_eq!(start["usage"]["cache_read_input_tokens"], 56);
    assert_eq!(start["usage"]["cache_creation_input_tokens"], 78);

    let text: String = deltas(&frames, "text_delta", "text");
    assert_eq!(text, "Let me look.");
    let json_parts: Vec<Value> = frames
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].clone())
        .collect();
    assert!(
        json_parts.len() > 3,
        "input split across deltas: {json_parts:?}"
    );
    let input: Value =
        serde_json::from_str(&deltas(&frames, "input_json_delta", "partial_json")).unwrap();
    assert_eq!(input, json!({"pattern": "**/*.rs"}));

    let tool_start = frames
        .iter()
        .find(|(_, d)| d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_start.1["index"], 1);
    assert_eq!(tool_start.1["content_block"]["id"], "toolu_fake_0001");
    let delta = &frames[frames.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 34);
}

fn deltas(frames: &[(Option<String>, Value)], kind: &str, field: &str) -> String {
    frames
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == kind)
        .map(|(_, d)| d["delta"][field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn answers_json_when_not_streaming() {
    let fake = FakeAnthropic::start(Script::replies([Reply::max_tokens("cut")])).await;
    let message: Value = send(&fake, false).await.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"], json!([{"type": "text", "text": "cut"}]));
    assert_eq!(message["stop_reason"], "max_tokens");
    assert_eq!(message["usage"]["input_tokens"], 100);
}

#[tokio::test]
async fn rejects_missing_or_wrong_keys_with_the_real_shape() {
    let fake = FakeAnthropic::start(Script::always(Reply::text("x"))).await;
    let url = format!("{}/v1/messages", fake.base_url());
    let cases: [&[(&str, &str)]; 2] = [&[VERSION], &[("x-api-key", "sk-ant-wrong"), VERSION]];
    for headers in cases {
        let response = post(&url, headers, &body(false)).await;
        assert_eq!(response.status(), 401);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["type"], "error");
        assert_eq!(error["error"]["type"], "authentication_error");
        assert!(error["error"]["message"].is_string());
    }
    let no_version = post(&url, &[KEY], &body(false)).await;
    assert_eq!(no_version.status(), 400);
    let recorded = fake.requests();
    assert_eq!(recorded.len(), 3);
    assert!(!recorded[1].has_api_key(FAKE_ANTHROPIC_KEY));
    assert!(recorded[2].has_api_key(FAKE_ANTHROPIC_KEY));
    let printed = format!("{:?}", recorded[2]);
    assert!(!printed.contains(FAKE_ANTHROPIC_KEY), "{printed}");
    assert_eq!(
        fake.script().remaining(),
        0,
        "rejected requests do not consume the script"
    );
}

#[tokio::test]
async fn renders_http_errors() {
    let cases = [
        (Reply::rate_limited(3), 429, "rate_limit_error", Some("3")),
        (Reply::overloaded(), 529, "overloaded_error", None),
        (Reply::server_error(), 500, "api_error", None),
        (Reply::prompt_too_long(), 400, "invalid_request_error", None),
        (
            Reply::invalid_request("max_tokens: too big"),
            400,
            "invalid_request_error",
            None,
        ),
    ];
    for (reply, status, kind, retry_after) in cases {
        let fake = FakeAnthropic::start(Script::replies([reply])).await;
        let response = send(&fake, true).await;
        assert_eq!(response.status(), status);
        let got_retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap());
        assert_eq!(got_retry, retry_after);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], kind);
    }
    let fake = FakeAnthropic::start(Script::replies([Reply::prompt_too_long()])).await;
    let error: Value = send(&fake, false).await.json().await.unwrap();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("prompt is too long")
    );
}

#[tokio::test]
async fn drops_the_connection_mid_stream() {
    let fake = FakeAnthropic::start(Script::replies(
        [Reply::text("a long answer").drop_after(3)],
    ))
    .await;
    let response = send(&fake, true).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.text().await.is_err(),
        "the body must end abnormally"
    );
    assert!(fake.requests()[0].completed_at.is_some());
}

#[tokio::test]
async fn sends_an_error_event_mid_stream() {
    let error = ApiError::new(ErrorKind::Overloaded);
    let fake = FakeAnthropic::start(Script::replies([
        Reply::text("abc").error_event_after(2, error)
    ]))
    .await;
    let frames = sse_frames(&send(&fake, true).await.text().await.unwrap());
    assert_eq!(frames.len(), 3);
    let (event, data) = &frames[2];
    assert_eq!(event.as_deref(), Some("error"));
    assert_eq!(
        data,
        &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[tokio::test]
async fn scripts_react_to_tool_results_and_then_run_out() {
    let script = Script::replies([Reply::tool_use("Read", json!({"path": "a"}))]).then_fn(|req| {
        match req.last_tool_result() {
            Some(r) if r.text == "found it" && !r.is_error => Reply::exit_plan_mode("plan"),
            other => Reply::text(format!("unexpected {other:?}")),
        }
    });
    let fake = FakeAnthropic::start(script).await;
    let url = format!("{}/v1/messages", fake.base_url());
    send(&fake, false).await;
    let follow_up = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_fake_0001", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_fake_0001", "content": [{"type": "text", "text": "found it"}]}]},
    ]});
    let message: Value = post(&url, &[KEY, VERSION], &follow_up)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["content"][0]["name"], "ExitPlanMode");
    assert_eq!(message["content"][0]["input"]["plan"], "plan");
    let exhausted = send(&fake, false).await;
    assert_eq!(exhausted.status(), 500);
    let recorded = fake.requests();
    assert_eq!(recorded[1].last_user_text(), Some("go".to_owned()));
    assert_eq!(recorded[1].tool_results().len(), 1);
}

#[tokio::test]
async fn records_bytes_and_overlapping_requests() {
    let slow = Reply::text("one two three four five six")
        .chunked(2, 2)
        .slow(Duration::from_millis(15));
    let fake = FakeAnthropic::start(Script::always(slow)).await;
    let (a, b) = tokio::join!(send(&fake, true), send(&fake, true));
    let (a, b) = tokio::join!(a.text(), b.text());
    assert!(a.is_ok() && b.is_ok());
    let recorded = fake.requests();
    assert_eq!(recorded.len(), 2);
    assert!(recorded[0].overlaps(&recorded[1]));
    assert_eq!(recorded[0].body, serde_json::to_vec(&body(true)).unwrap());
    assert_eq!(
        recorded[0].common_prefix_len(&recorded[1]),
        recorded[0].body.len()
    );
    assert!(recorded[0].is_stream());
    assert_eq!(recorded[0].header("anthropic-version"), Some("2023-06-01"));
}
