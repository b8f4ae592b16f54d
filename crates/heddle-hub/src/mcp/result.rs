//! A `tools/call` result as A2A parts.
//!
//! Read from the result's JSON (the MCP wire form), so content kinds a
//! newer server sends are still shown, as a data part:
//! * `text` → a text part;
//! * `image`, `audio` → a file part with the bytes and their media type;
//! * `resource` (embedded) → a file part: its text or bytes, named by its
//!   URI's last segment, the URI in the part's metadata;
//! * `resource_link` → a file part by URL;
//! * `structuredContent` → a data part (and a text block that only repeats
//!   it as JSON, as the MCP spec asks servers to send, is left out).

use base64::Engine as _;
use heddle_core::{v1, v1::part::Content, wkt};
use serde_json::{Map, Value};

/// The key, in a file part's metadata, of the MCP resource URI it holds.
pub(crate) const RESOURCE_URI_KEY: &str = "https://heddle.dev/extensions/mcp-tools/v1/resourceUri";

/// Most parts one result becomes; the blocks past it are left out.
pub(crate) const MAX_PARTS: usize = 256;

/// What a call returned: its parts, or the tool's error message.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Parts(Vec<v1::Part>),
    ToolError(String),
}

/// The parts of a `CallToolResult` (as JSON), or the tool's message when
/// `isError` is set.
pub(crate) fn outcome(result: &Value) -> Outcome {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text: Vec<&str> = blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        // Whole: the executor scrubs secrets before it cuts the reason.
        let mut reason = text.join("\n");
        if reason.trim().is_empty() {
            reason = "the tool reported an error without a message".to_owned();
        }
        return Outcome::ToolError(reason);
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    let mut parts = Vec::new();
    for block in blocks.iter().take(MAX_PARTS) {
        if let (Some(s), Some(t)) = (structured, block.get("text").and_then(Value::as_str))
            && serde_json::from_str::<Value>(t).ok().as_ref() == Some(s)
        {
            continue;
        }
        parts.push(part(block));
    }
    if let Some(s) = structured {
        parts.push(v1::Part {
            content: Some(Content::Data(wkt::Value(s.clone()))),
            media_type: "application/json".to_owned(),
            ..Default::default()
        });
    }
    Outcome::Parts(parts)
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// One content block as a part.
fn part(block: &Value) -> v1::Part {
    match str_of(block, "type") {
        Some("text") => v1::Part {
            content: Some(Content::Text(
                str_of(block, "text").unwrap_or_default().to_owned(),
            )),
            ..Default::default()
        },
        Some("image" | "audio") => bytes_part(
            str_of(block, "data"),
            str_of(block, "mimeType"),
            None,
            block,
        ),
        Some("resource") => {
            let r = block.get("resource").unwrap_or(&Value::Null);
            let uri = str_of(r, "uri");
            let media_type = str_of(r, "mimeType");
            match (str_of(r, "text"), str_of(r, "blob")) {
                (Some(text), _) => v1::Part {
                    content: Some(Content::Raw(text.as_bytes().to_vec())),
                    media_type: media_type.unwrap_or("text/plain").to_owned(),
                    filename: uri.map(file_name).unwrap_or_default(),
                    metadata: uri.map(uri_metadata),
                },
                (None, blob) => bytes_part(blob, media_type, uri, block),
            }
        }
        Some("resource_link") => v1::Part {
            content: Some(Content::Url(
                str_of(block, "uri").unwrap_or_default().to_owned(),
            )),
            media_type: str_of(block, "mimeType").unwrap_or_default().to_owned(),
            filename: str_of(block, "name")
                .map(str::to_owned)
                .or_else(|| str_of(block, "uri").map(file_name))
                .unwrap_or_default(),
            ..Default::default()
        },
        _ => unknown(block),
    }
}

/// A file part of base64 `data`; a block whose data does not decode is
/// shown as it came.
fn bytes_part(
    data: Option<&str>,
    media_type: Option<&str>,
    uri: Option<&str>,
    block: &Value,
) -> v1::Part {
    let Some(bytes) = data.and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
    else {
        return unknown(block);
    };
    v1::Part {
        content: Some(Content::Raw(bytes)),
        media_type: media_type.unwrap_or("application/octet-stream").to_owned(),
        filename: uri.map(file_name).unwrap_or_default(),
        metadata: uri.map(uri_metadata),
    }
}

/// A block this mapping does not know, as a data part.
fn unknown(block: &Value) -> v1::Part {
    v1::Part {
        content: Some(Content::Data(wkt::Value(block.clone()))),
        media_type: "application/json".to_owned(),
        ..Default::default()
    }
}

/// The last path segment of a URI (`file:///a/b.txt` → `b.txt`).
fn file_name(uri: &str) -> String {
    uri.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(uri)
        .chars()
        .take(255)
        .collect()
}

fn uri_metadata(uri: &str) -> wkt::Struct {
    let mut m = Map::new();
    m.insert(RESOURCE_URI_KEY.to_owned(), Value::String(uri.to_owned()));
    wkt::Struct(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(v: Value) -> Vec<v1::Part> {
        match outcome(&v) {
            Outcome::Parts(p) => p,
            Outcome::ToolError(e) => panic!("error {e}"),
        }
    }

    #[test]
    fn text_images_and_resources_become_parts() {
        let p = parts(json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///r/notes.txt", "mimeType": "text/markdown", "text": "# n"}},
            {"type": "resource", "resource": {"uri": "test://blob/7", "blob": "AAE="}},
            {"type": "resource_link", "uri": "https://x.example/f.pdf", "name": "f.pdf", "mimeType": "application/pdf"},
            {"type": "sparkle", "x": 1}
        ]}));
        assert_eq!(p[0].content, Some(Content::Text("hi".into())));
        assert_eq!(p[1].media_type, "image/png");
        assert!(matches!(&p[1].content, Some(Content::Raw(b)) if b.len() == 4));
        assert_eq!(p[2].filename, "notes.txt");
        assert_eq!(p[2].media_type, "text/markdown");
        assert_eq!(
            p[2].metadata
                .as_ref()
                .and_then(|m| m.0.get(RESOURCE_URI_KEY)),
            Some(&json!("file:///r/notes.txt"))
        );
        assert!(matches!(&p[3].content, Some(Content::Raw(b)) if b.as_ref() == [0u8, 1]));
        assert_eq!(p[3].media_type, "application/octet-stream");
        assert_eq!(
            p[4].content,
            Some(Content::Url("https://x.example/f.pdf".into()))
        );
        assert!(matches!(&p[5].content, Some(Content::Data(_))));
    }

    #[test]
    fn structured_content_is_a_data_part_and_its_json_text_is_not_repeated() {
        let p = parts(json!({
            "content": [{"type": "text", "text": "{\"sum\": 3}"}, {"type": "text", "text": "three"}],
            "structuredContent": {"sum": 3}
        }));
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].content, Some(Content::Text("three".into())));
        assert_eq!(
            p[1].content,
            Some(Content::Data(wkt::Value(json!({"sum": 3}))))
        );
    }

    #[test]
    fn an_error_result_is_the_tools_message() {
        let long = "x".repeat(5000);
        let out = outcome(&json!({"isError": true, "content": [{"type": "text", "text": long}]}));
        assert!(matches!(out, Outcome::ToolError(ref m) if m.len() == 5000));
        let bare = outcome(&json!({"isError": true, "content": []}));
        assert!(matches!(bare, Outcome::ToolError(ref m) if m.contains("without a message")));
    }
}
