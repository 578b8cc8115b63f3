//! Rendering helpers both fakes share: filling in tool ids, laying out a body as frames.

use std::time::Duration;

use bytes::Bytes;
use ultraplan_protocol::events::ContentBlock;

use super::reply::{Cut, Delivery};
use super::server::Frames;

/// Give every tool-use block with an empty id a fresh `<prefix><n>` id.
pub(crate) fn assign_tool_ids(
    content: &mut [ContentBlock],
    prefix: &str,
    mut next: impl FnMut() -> usize,
) {
    for block in content {
        if let ContentBlock::ToolUse { id, .. } = block
            && id.is_empty()
        {
            *id = format!("{prefix}{:04}", next());
        }
    }
}

/// Streamed frames, cut as the delivery says. `error_frame` renders an in-stream error.
pub(crate) fn stream_frames(
    mut frames: Vec<Bytes>,
    delivery: &Delivery,
    error_frame: impl FnOnce(&super::reply::ApiError) -> Bytes,
) -> Frames {
    let mut drop_after = None;
    match &delivery.cut {
        None => {}
        Some(Cut::Drop { after_events }) => drop_after = Some(*after_events),
        Some(Cut::ErrorEvent {
            after_events,
            error,
        }) => {
            frames.truncate(*after_events);
            frames.push(error_frame(error));
        }
    }
    Frames {
        frames,
        delay: delivery.chunk_delay,
        drop_after,
    }
}

/// A JSON body as one frame; a `Drop` cut sends only its first half, then drops.
pub(crate) fn json_frames(body: &serde_json::Value, delivery: &Delivery) -> Frames {
    let bytes = Bytes::from(body.to_string());
    match delivery.cut {
        Some(Cut::Drop { .. }) => Frames {
            frames: vec![bytes.slice(..bytes.len() / 2)],
            delay: delivery.chunk_delay,
            drop_after: Some(1),
        },
        _ => Frames {
            frames: vec![bytes],
            delay: delivery.chunk_delay,
            drop_after: None,
        },
    }
}

/// A single-frame body, sent at once.
pub(crate) fn whole(body: &serde_json::Value) -> Frames {
    Frames {
        frames: vec![Bytes::from(body.to_string())],
        delay: Duration::ZERO,
        drop_after: None,
    }
}
