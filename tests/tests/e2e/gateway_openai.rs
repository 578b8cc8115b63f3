//! The gateway against the fake OpenAI-compatible API.

use crate::common::{openai_gateway, request};
use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, Role, ToolResultContent};
use ultraplan_protocol::model::{Message, ModelErrorKind, StopReason, Usage};
use ultraplan_tests::fake_models::{FAKE_OPENAI_KEY, FakeOpenAi, Reply, Script};

const MODEL: &str = "openai:gpt-test";

#[tokio::test]
async fn assembles_tool_calls_split_across_chunks_and_maps_usage() {
    let usage = Usage {
        input_tokens: 40,
        output_tokens: 12,
        cache_read_input_tokens: 60,
        cache_creation_input_tokens: 0,
    };
    let reply = Reply::turn(vec![
        ContentBlock::text("Two searches."),
        ultraplan_tests::fake_models::tool_use_block("Glob", json!({"pattern": "src/**/*.rs"})),
        ultraplan_tests::fake_models::tool_use_block(
            "Grep",
            json!({"pattern": "login", "i": true}),
        ),
    ])
    .usage(usage)
    .chunked(3, 4);
    let fake = FakeOpenAi::start(Script::replies([reply])).await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));

    let completion = gateway.complete(MODEL, request()).await.unwrap();

    assert_eq!(completion.attempts, 1);
    let response = completion.response;
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Two searches."),
            ContentBlock::tool_use("call_fake_0001", "Glob", json!({"pattern": "src/**/*.rs"})),
            ContentBlock::tool_use(
                "call_fake_0002",
                "Grep",
                json!({"pattern": "login", "i": true})
            ),
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(response.usage, usage, "cached tokens leave input_tokens");
    assert_eq!(response.model, "gpt-test");
}

#[tokio::test]
async fn sends_a_chat_completions_request() {
    let fake = FakeOpenAi::start(Script::replies([Reply::text("ok")])).await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));
    gateway.complete(MODEL, request()).await.unwrap();

    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert!(sent.has_api_key(FAKE_OPENAI_KEY));
    let body = sent.json.as_ref().unwrap();
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["max_tokens"], 1024,
        "compatible servers get max_tokens"
    );
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You are a planner.\n\nRead only."})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "Glob");
    assert!(body["tools"][0]["function"]["parameters"].is_object());
    assert_eq!(
        sent.cache_breakpoints(),
        0,
        "cache_control is Anthropic-only"
    );
    assert!(!format!("{sent:?}").contains(FAKE_OPENAI_KEY));
}

#[tokio::test]
async fn a_conversation_with_tool_results_is_translated() {
    let fake = FakeOpenAi::start(Script::from_fn(|req| {
        let result = req.last_tool_result().map(|r| r.text).unwrap_or_default();
        Reply::max_tokens(format!("saw {result}"))
    }))
    .await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));
    let mut conversation = request();
    conversation.messages.push(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::tool_use(
            "call_1",
            "Glob",
            json!({"pattern": "*"}),
        )],
    });
    conversation.messages.push(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "call_1".into(),
            content: ToolResultContent::Text("src/login.rs".into()),
            is_error: None,
            cache_control: None,
        }],
    });

    let response = gateway
        .complete(MODEL, conversation)
        .await
        .unwrap()
        .response;

    assert_eq!(
        response.content,
        vec![ContentBlock::text("saw src/login.rs")]
    );
    assert_eq!(response.stop_reason, Some(StopReason::MaxTokens));
    let sent = &fake.requests()[0];
    let messages = sent.messages();
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        "{\"pattern\":\"*\"}"
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "src/login.rs"})
    );
}

#[tokio::test]
async fn retries_503_and_429_then_succeeds() {
    let script = Script::replies([
        Reply::overloaded(),
        Reply::rate_limited(0),
        Reply::text("ok"),
    ]);
    let fake = FakeOpenAi::start(script).await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));
    let completion = gateway.complete(MODEL, request()).await.unwrap();
    assert_eq!(completion.attempts, 3);
}

#[tokio::test]
async fn context_length_exceeded_is_prompt_too_long() {
    let fake = FakeOpenAi::start(Script::replies([Reply::prompt_too_long()])).await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));
    let error = gateway.complete(MODEL, request()).await.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::PromptTooLong);
    assert!(
        error.message.contains("maximum context length"),
        "{}",
        error.message
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn dropped_streams_are_retried() {
    let script = Script::replies([
        Reply::text("never finishes").drop_after(3),
        Reply::text("done"),
    ]);
    let fake = FakeOpenAi::start(script).await;
    let gateway = openai_gateway(&fake.base_url(), Some(FAKE_OPENAI_KEY));
    let completion = gateway.complete(MODEL, request()).await.unwrap();
    assert_eq!(completion.attempts, 2);
    assert_eq!(
        completion.response.content,
        vec![ContentBlock::text("done")]
    );
}

#[tokio::test]
async fn a_local_server_needs_no_key() {
    let fake = FakeOpenAi::start_with_key(Script::replies([Reply::text("local")]), None).await;
    let gateway = openai_gateway(&fake.base_url(), None);
    let completion = gateway.complete(MODEL, request()).await.unwrap();
    assert_eq!(
        completion.response.content,
        vec![ContentBlock::text("local")]
    );
    assert!(fake.requests()[0].header("authorization").is_none());
}
