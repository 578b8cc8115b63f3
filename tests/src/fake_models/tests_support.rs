//! Helpers for the fakes' own tests: a plain reqwest client and a minimal SSE splitter.

use serde_json::Value;

/// `(event name, parsed data)` of every SSE frame in `text` (`[DONE]` becomes a string).
pub(crate) fn sse_frames(text: &str) -> Vec<(Option<String>, Value)> {
    text.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut event = None;
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = Some(name.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
            (event, value)
        })
        .collect()
}

/// POST a JSON body with these headers.
pub(crate) async fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(url).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request reaches the fake")
}
