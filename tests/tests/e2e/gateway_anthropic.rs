//! The gateway against the fake Anthropic API.

use std::time::Duration;

use crate::common::{anthropic_gateway, request};
use serde_json::{Value, json};
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{ModelErrorKind, StopReason, Usage};
use ultraplan_tests::fake_models::{
    ApiError, ErrorKind, FAKE_ANTHROPIC_KEY, FakeAnthropic, Reply, Script,
};

const MODEL: &str = "anthropic:claude-test-1";

async fn fake(replies: impl IntoIterator<Item = Reply>) -> FakeAnthropic {
    FakeAnthropic::start(Script::replies(replies)).await
}

#[tokio::test]
async fn assembles_streamed_text_and_tool_use_with_cache_usage() {
    let usage = Usage {
        input_tokens: 21,
        output_tokens: 34,
        cache_read_input_tokens: 1500,
        cache_creation_input_tokens: 300,
    };
    let input = json!({"pattern": "fn login", "path": "src/auth", "glob": "*.rs"});
    let reply = Reply::text_and_tool_use("Searching for the login code.", "Grep", input.clone())
        .usage(usage)
        .chunked(4, 5);
    let fake = fake([reply]).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);

    let completion = gateway.complete(MODEL, request()).await.unwrap();

    assert_eq!(completion.attempts, 1);
    let response = completion.response;
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Searching for the login code."),
            ContentBlock::tool_use("toolu_fake_0001", "Grep", input),
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(response.usage, usage);
    assert_eq!(response.model, "claude-test-1");
}

#[tokio::test]
async fn sends_key_version_model_stream_and_cache_breakpoints() {
    let fake = fake([Reply::text("ok")]).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);
    gateway.complete(MODEL, request()).await.unwrap();

    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert!(sent.has_api_key(FAKE_ANTHROPIC_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.model(), Some("claude-test-1"));
    assert!(sent.is_stream());
    let body = sent.json.as_ref().unwrap();
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][1]["cache_control"], ephemeral);
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        ephemeral
    );
    assert_eq!(sent.cache_breakpoints(), 3);
    assert!(!format!("{sent:?}").contains(FAKE_ANTHROPIC_KEY));
}

#[tokio::test]
async fn retries_overloaded_three_times_then_succeeds_with_identical_bodies() {
    let overloaded = Reply::overloaded();
    let fake = fake([
        overloaded.clone(),
        overloaded.clone(),
        overloaded,
        Reply::text("done"),
    ])
    .await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);

    let completion = gateway.complete(MODEL, request()).await.unwrap();

    assert_eq!(completion.attempts, 4);
    assert_eq!(
        completion.response.content,
        vec![ContentBlock::text("done")]
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 4);
    assert!(
        sent.iter().all(|r| r.body == sent[0].body),
        "retries resend the same bytes"
    );
}

#[tokio::test]
async fn gives_up_after_the_attempt_bound() {
    let fake = FakeAnthropic::start(Script::always(Reply::overloaded())).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);

    let error = gateway.complete(MODEL, request()).await.unwrap_err();

    assert_eq!(error.kind, ModelErrorKind::Unavailable);
    assert_eq!(fake.requests().len(), 5);
    for part in [
        "anthropic",
        "5 attempts",
        "529",
        "overloaded_error",
        "Overloaded",
    ] {
        assert!(
            error.message.contains(part),
            "{part} missing from {}",
            error.message
        );
    }
}

#[tokio::test]
async fn honours_retry_after_on_429() {
    let fake = fake([Reply::rate_limited(1), Reply::text("after the wait")]).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);

    let completion = gateway.complete(MODEL, request()).await.unwrap();

    assert_eq!(completion.attempts, 2);
    let sent = fake.requests();
    // The gateway slept the full retry-after (a lower bound only: sleeps never end early).
    assert!(sent[1].received_at - sent[0].received_at >= Duration::from_secs(1));
}

#[tokio::test]
async fn other_4xx_fail_at_once_with_the_provider_message() {
    let message = "max_tokens: 999999 > 64000, which is the maximum allowed";
    let cases = [
        (
            Reply::invalid_request(message),
            ModelErrorKind::InvalidRequest,
            message,
        ),
        (
            Reply::prompt_too_long(),
            ModelErrorKind::PromptTooLong,
            "prompt is too long",
        ),
        (
            Reply::error(ApiError::new(ErrorKind::NotFound).with_message("model: claude-nope")),
            ModelErrorKind::InvalidRequest,
            "model: claude-nope",
        ),
    ];
    for (reply, kind, fragment) in cases {
        let fake = fake([reply]).await;
        let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);
        let error = gateway.complete(MODEL, request()).await.unwrap_err();
        assert_eq!(error.kind, kind, "{}", error.message);
        assert!(error.message.contains(fragment), "{}", error.message);
        assert_eq!(fake.requests().len(), 1, "no retry for {kind:?}");
    }
}

#[tokio::test]
async fn retries_dropped_connections_error_events_and_500s() {
    let overloaded = ApiError::new(ErrorKind::Overloaded);
    let cases = [
        Reply::text("partial answer that never finishes").drop_after(4),
        Reply::text("partial").error_event_after(3, overloaded),
        Reply::server_error(),
    ];
    for first in cases {
        let fake = fake([first, Reply::text("whole answer")]).await;
        let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);
        let completion = gateway.complete(MODEL, request()).await.unwrap();
        assert_eq!(completion.attempts, 2);
        assert_eq!(
            completion.response.content,
            vec![ContentBlock::text("whole answer")]
        );
    }
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_is_retried() {
    let stalled = Reply::text("slow").slow(Duration::from_secs(5));
    let fake = fake([stalled, Reply::text("fast")]).await;
    let gateway = crate::common::anthropic_gateway_with_timeout(
        &fake.base_url(),
        FAKE_ANTHROPIC_KEY,
        Duration::from_millis(200),
    );
    let completion = gateway.complete(MODEL, request()).await.unwrap();
    assert_eq!(completion.attempts, 2);
    assert_eq!(
        completion.response.content,
        vec![ContentBlock::text("fast")]
    );
}

#[tokio::test]
async fn a_wrong_key_is_refused_without_leaking_it() {
    let fake = FakeAnthropic::start(Script::always(Reply::text("x"))).await;
    let wrong = "sk-ant-wrong-key-should-not-leak";
    let gateway = anthropic_gateway(&fake.base_url(), wrong);

    let error = gateway.complete(MODEL, request()).await.unwrap_err();

    assert_eq!(error.kind, ModelErrorKind::InvalidRequest);
    assert!(
        error.message.contains("authentication_error"),
        "{}",
        error.message
    );
    assert!(!error.message.contains(wrong), "{}", error.message);
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn model_names_and_missing_keys_are_checked_before_sending() {
    let fake = FakeAnthropic::start(Script::always(Reply::text("x"))).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);
    for model in ["offline", "claude", "anthropic:", "openai:gpt-x"] {
        let error = gateway.complete(model, request()).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::InvalidRequest, "{model}");
    }
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn a_tool_loop_reacts_to_tool_results() {
    let script =
        Script::replies([Reply::tool_use("Glob", json!({"pattern": "**/*.rs"}))]).then_fn(|req| {
            match req.last_tool_result() {
                Some(r) if r.text.contains("login.rs") => Reply::exit_plan_mode("1. Fix login.rs"),
                other => Reply::text(format!("unexpected: {other:?}")),
            }
        });
    let fake = FakeAnthropic::start(script).await;
    let gateway = anthropic_gateway(&fake.base_url(), FAKE_ANTHROPIC_KEY);

    let first = gateway.complete(MODEL, request()).await.unwrap().response;
    let mut next = request();
    next.messages.push(ultraplan_protocol::model::Message {
        role: ultraplan_protocol::events::Role::Assistant,
        content: first.content.clone(),
    });
    let ContentBlock::ToolUse { id, .. } = &first.content[0] else {
        panic!("tool use expected")
    };
    next.messages.push(ultraplan_protocol::model::Message {
        role: ultraplan_protocol::events::Role::User,
        content: vec![
            serde_json::from_value(json!({"type": "tool_result", "tool_use_id": id,
            "content": "src/login.rs"}))
            .unwrap(),
        ],
    });
    let second = gateway.complete(MODEL, next).await.unwrap().response;

    let ContentBlock::ToolUse { name, input, .. } = &second.content[0] else {
        panic!("tool use expected: {second:?}")
    };
    assert_eq!(name, "ExitPlanMode");
    assert_eq!(input["plan"], Value::from("1. Fix login.rs"));
    let sent = fake.requests();
    let prefix = sent[0].common_prefix_len(&sent[1]);
    assert!(
        prefix > 100,
        "the second request shares the first one's prefix ({prefix} bytes)"
    );
}
