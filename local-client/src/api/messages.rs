//! `POST /v1/sessions/{id}/events`: a user message to a running session.

use ultraplan_protocol::api::{PostEventsRequest, PostEventsResponse};
use ultraplan_protocol::events::EventBody;

use super::{ApiError, Client};

impl Client {
    /// Posts one user message (an answer or steering); returns the stored events.
    pub async fn post_message(&self, id: &str, text: &str) -> Result<PostEventsResponse, ApiError> {
        let request = PostEventsRequest {
            events: vec![EventBody::user_text(text)],
        };
        self.post(&format!("/v1/sessions/{id}/events"), &request)
            .await
    }
}
