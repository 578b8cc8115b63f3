//! The S3 client: the standard `AWS_*` variables, over defaults that suit bundles. A store
//! that does not answer fails a request within about half a minute (so HEAD and uploads get
//! a 503 soon, not after object_store's default three minutes of retries), while one large
//! part or download may take minutes. `AWS_TIMEOUT`, `AWS_CONNECT_TIMEOUT` and the other
//! client settings object_store reads from `AWS_*` variables still win.

use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};

/// Longest single request, body included (a 5 MiB part, a whole bundle download).
const REQUEST_TIMEOUT: &str = "5m";
/// Longest wait for a connection.
const CONNECT_TIMEOUT: &str = "5s";
/// Retries of a failed request, and how long after the first attempt they stop.
const MAX_RETRIES: usize = 3;
const RETRY_WINDOW: Duration = Duration::from_secs(30);

/// A builder for `bucket` with our defaults, then every `AWS_*` variable this process has.
pub(super) fn builder(bucket: &str) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::new()
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            REQUEST_TIMEOUT,
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            CONNECT_TIMEOUT,
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_WINDOW,
        });
    // What `AmazonS3Builder::from_env` does, over the defaults above.
    for (key, value) in std::env::vars_os() {
        let (Some(key), Some(value)) = (key.to_str(), value.to_str()) else {
            continue;
        };
        if !key.starts_with("AWS_") {
            continue;
        }
        if let Ok(config_key) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
            builder = builder.with_config(config_key, value);
        }
    }
    builder.with_bucket_name(bucket)
}
