//! The OpenAI fake speaks Chat Completions.

use serde_json::{Value, json};
use ultraplan_protocol::model::Usage;

use super::tests_support::{post, sse_frames};
use super::*;

const BEARER: &str = "Bearer sk-fake-openai-test-key-0001";

fn body(stream: bool, include_usage: bool) -> Value {
    let mut body = json!({"model": "gpt-test", "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]});
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

async fn send(fake: &FakeOpenAi, body: &Value) -> reqwest::Response {
    let url = format!("{}/chat/completions", fake.base_url());
    post(&url, &[("authorization", BEARER)], body).await
}

#[tokio::test]
async fn streams_tool_calls_split_across_chunks_with_usage() {
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        cache_read_input_tokens: 90,
        cache_creation_input_tokens: 0,
    };
    let reply = Reply::tool_uses(vec![
        ("Glob", json!({"pattern": "*.rs"})),
        ("Read", json!({"path": "a.rs"})),
    ])
    .usage(usage)
    .chunked(4, 3);
    let fake = FakeOpenAi::start(Script::replies([reply])).await;
    let text = send(&fake, &body(true, true)).await.text().await.unwrap();
    let frames: Vec<Value> = sse_frames(&text)
        .into_iter()
        .map(|(e, d)| {
            assert!(e.is_none(), "OpenAI chunks have no event names");
            d
        })
        .collect();
    assert_eq!(frames.last().unwrap(), &json!("[DONE]"));
    let chunks = &frames[..frames.len() - 1];
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");

    let mut args = [String::new(), String::new()];
    let mut heads = Vec::new();
    for chunk in chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                heads.push((index, id.to_owned(), call["function"]["name"].clone()));
            }
            args[index].push_str(call["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(
        heads,
        vec![
            (0, "call_fake_0001".into(), json!("Glob")),
            (1, "call_fake_0002".into(), json!("Read"))
        ]
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args[0]).unwrap(),
        json!({"pattern": "*.rs"})
    );
    assert_eq!(
        serde_json::from_str::<Value>(&args[1]).unwrap(),
        json!({"path": "a.rs"})
    );

    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert!(finish["usage"].is_null());
    let last = &chunks[chunks.len() - 1];
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 100);
    assert_eq!(last["usage"]["prompt_tokens_details"]["cached_tokens"], 90);
    assert_eq!(last["usage"]["completion_tokens"], 5);
}

#[tokio::test]
async fn omits_the_usage_chunk_unless_asked() {
    let fake = FakeOpenAi::start(Script::replies([Reply::text("hello world")])).await;
    let text = send(&fake, &body(true, false)).await.text().await.unwrap();
    let frames = sse_frames(&text);
    let chunks = &frames[..frames.len() - 1];
    assert!(chunks.iter().all(|(_, c)| c.get("usage").is_none()));
    let content: String = chunks
        .iter()
        .filter_map(|(_, c)| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "hello world");
    assert_eq!(
        chunks.last().unwrap().1["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn answers_json_when_not_streaming() {
    let reply = Reply::text_and_tool_use("ok", "Read", json!({"path": "x"}));
    let fake = FakeOpenAi::start(Script::replies([reply, Reply::max_tokens("cut")])).await;
    let completion: Value = send(&fake, &body(false, false)).await.json().await.unwrap();
    assert_eq!(completion["object"], "chat.completion");
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "ok");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["arguments"], "{\"path\":\"x\"}");
    let completion: Value = send(&fake, &body(false, false)).await.json().await.unwrap();
    assert_eq!(completion["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn checks_the_bearer_key() {
    let fake = FakeOpenAi::start(Script::always(Reply::text("x"))).await;
    let url = format!("{}/chat/completions", fake.base_url());
    for headers in [
        vec![],
        vec![("authorization", "Bearer sk-wrong-key-123456")],
    ] {
        let response = post(&url, &headers, &body(false, false)).await;
        assert_eq!(response.status(), 401);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["type"], "invalid_request_error");
    }
    assert!(fake.requests()[1].has_any_api_key());
    let open = FakeOpenAi::start_with_key(Script::always(Reply::text("x")), None).await;
    let url = format!("{}/chat/completions", open.base_url());
    assert_eq!(post(&url, &[], &body(false, false)).await.status(), 200);
}

#[tokio::test]
async fn renders_errors_in_openai_shape() {
    let cases = [
        (Reply::rate_limited(1), 429, json!("rate_limit_exceeded")),
        (Reply::overloaded(), 503, Value::Null),
        (Reply::server_error(), 500, Value::Null),
        (
            Reply::prompt_too_long(),
            400,
            json!("context_length_exceeded"),
        ),
    ];
    for (reply, status, code) in cases {
        let fake = FakeOpenAi::start(Script::replies([reply])).await;
        let response = send(&fake, &body(true, true)).await;
        assert_eq!(response.status(), status);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], code);
        assert!(error["error"]["message"].is_string());
    }
}

#[tokio::test]
async fn reads_tool_results_from_openai_requests() {
    let fake = FakeOpenAi::start(Script::from_fn(|req| {
        Reply::text(req.last_tool_result().map(|r| r.text).unwrap_or_default())
    }))
    .await;
    let request = json!({"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "file body"},
    ]});
    let completion: Value = send(&fake, &request).await.json().await.unwrap();
    assert_eq!(completion["choices"][0]["message"]["content"], "file body");
    let recorded = &fake.requests()[0];
    assert_eq!(recorded.system_text(), "be brief");
    assert_eq!(recorded.last_user_text(), Some("go".into()));
}
