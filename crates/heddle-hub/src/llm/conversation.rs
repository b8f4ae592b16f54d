//! From A2A to chat messages: parts into content, and a context's stored
//! tasks into the model's history.
//!
//! The history is read back from the store, not kept a second time: the
//! completed tasks of the `contextId` (oldest first: each one's history,
//! user messages and the questions the model asked, then its artifacts as
//! the model's answer), then the task being continued (its history and the
//! question it waits on). Failed, canceled and rejected tasks are left out:
//! the model never answered them. A question asked through `ask_user`
//! goes back as the assistant's text and the reply as the user's, so no
//! tool-call ids need keeping.

use heddle_core::v1::{self, part::Content as PartContent};

use super::wire::{ChatMessage, Content, ContentPart, ImageUrl, Role};

/// The media types an LLM agent accepts (the card's input modes).
pub(crate) const INPUT_MODES: &[&str] = &[
    "text/plain",
    "application/json",
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
];

/// Image media types whose bytes are sent inline, as a `data:` URL.
const INLINE_IMAGES: &[&str] = &["image/png", "image/jpeg", "image/webp", "image/gif"];

/// A message as chat content. Images go as vision parts: by URL (any
/// `image/*` at an https URL, or http when `allow_http`) or, for bytes of
/// a type in [`INLINE_IMAGES`], as a `data:` URL. Any other file part is
/// refused (`Err` names its media type, or the URL's scheme) when
/// `strict`, and else stands as a short note, so an old turn never fails
/// a new one.
pub(crate) fn content(
    message: &v1::Message,
    strict: bool,
    allow_http: bool,
) -> Result<Content, String> {
    let mut parts = Vec::new();
    for part in &message.parts {
        match &part.content {
            Some(PartContent::Text(t)) => parts.push(ContentPart::Text { text: t.clone() }),
            Some(PartContent::Data(v)) => parts.push(ContentPart::Text {
                text: v.0.to_string(),
            }),
            Some(PartContent::Url(url))
                if part.media_type.starts_with("image/")
                    && (starts_with_ignore_case(url, "https://")
                        || (allow_http && starts_with_ignore_case(url, "http://"))) =>
            {
                parts.push(ContentPart::ImageUrl {
                    image_url: ImageUrl { url: url.clone() },
                });
            }
            Some(PartContent::Url(url)) if strict && part.media_type.starts_with("image/") => {
                let scheme = url.split_once(':').map_or("", |(s, _)| s);
                return Err(format!(
                    "unsupported part: an image URL must be https, not {scheme:?} (an http URL needs allow_http = true on the agent's entry)"
                ));
            }
            Some(PartContent::Raw(bytes)) if INLINE_IMAGES.contains(&part.media_type.as_str()) => {
                use base64::Engine as _;
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                parts.push(ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: format!("data:{};base64,{b64}", part.media_type),
                    },
                });
            }
            Some(PartContent::Url(_) | PartContent::Raw(_)) => {
                let media = if part.media_type.is_empty() {
                    "a file without a media type".to_owned()
                } else {
                    format!("media type {}", part.media_type)
                };
                let kind = if matches!(part.content, Some(PartContent::Raw(_))) {
                    "file bytes"
                } else {
                    "file URL"
                };
                if strict {
                    return Err(format!(
                        "unsupported part: {kind} of {media}; this agent takes text, data, images by http(s) URL, and PNG, JPEG, WebP or GIF bytes"
                    ));
                }
                parts.push(ContentPart::Text {
                    text: format!("[a {kind} of {media}, not shown]"),
                });
            }
            None => {}
        }
    }
    let images = parts
        .iter()
        .any(|p| matches!(p, ContentPart::ImageUrl { .. }));
    if images {
        return Ok(Content::Parts(parts));
    }
    let text: Vec<String> = parts
        .into_iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text),
            ContentPart::ImageUrl { .. } => None,
        })
        .collect();
    Ok(Content::Text(text.join("\n")))
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
}

fn role(m: &v1::Message) -> Role {
    if m.role() == v1::Role::Agent {
        Role::Assistant
    } else {
        Role::User
    }
}

/// The turns a stored task adds to the history.
fn task_turns(task: &v1::Task, out: &mut Vec<ChatMessage>) {
    let state = task.status.as_ref().map(|s| s.state());
    match state {
        Some(v1::TaskState::Completed) => {
            push_history(task, out);
            let answer: Vec<String> = task
                .artifacts
                .iter()
                .map(v1::Artifact::text)
                .filter(|t| !t.is_empty())
                .collect();
            if !answer.is_empty() {
                out.push(ChatMessage::text(Role::Assistant, answer.join("\n")));
            }
        }
        Some(v1::TaskState::InputRequired) => open_task_turns(task, out),
        _ => {}
    }
}

/// A task waiting for input: its history, then the question it waits on.
pub(crate) fn open_task_turns(task: &v1::Task, out: &mut Vec<ChatMessage>) {
    push_history(task, out);
    if let Some(q) = task.status.as_ref().and_then(|s| s.message.as_ref())
        && q.role() == v1::Role::Agent
    {
        out.push(ChatMessage::text(Role::Assistant, q.text()));
    }
}

fn push_history(task: &v1::Task, out: &mut Vec<ChatMessage>) {
    for m in &task.history {
        // Content is lenient here: a refused part of an old turn is a note,
        // and its image URLs were checked when it was new.
        if let Ok(content) = content(m, false, true) {
            out.push(ChatMessage {
                role: role(m),
                content,
            });
        }
    }
}

/// The history of a context from its stored tasks (newest first, as the
/// store lists them), without the task `current`, then the turns of the
/// task being `continued`, within the budget: at most `max_messages`
/// messages and `max_chars` characters, the oldest dropped first; the
/// continued task's turns are never dropped (its question is what the
/// reply answers).
pub(crate) fn history(
    mut tasks: Vec<v1::Task>,
    current: &str,
    continued: Option<&v1::Task>,
    max_messages: usize,
    max_chars: usize,
) -> Vec<ChatMessage> {
    tasks.reverse();
    let mut out = Vec::new();
    for t in tasks.iter().filter(|t| t.id != current) {
        task_turns(t, &mut out);
    }
    let earlier = out.len();
    if let Some(t) = continued {
        open_task_turns(t, &mut out);
    }
    let mut chars: usize = out.iter().map(ChatMessage::chars).sum();
    let mut drop = out.len().saturating_sub(max_messages).min(earlier);
    for m in &out[..drop] {
        chars -= m.chars();
    }
    while chars > max_chars && drop < earlier {
        chars -= out[drop].chars();
        drop += 1;
    }
    out.drain(..drop);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> v1::Message {
        v1::Message::new("m", v1::Role::User, vec![v1::Part::text(text)])
    }

    fn done(id: &str, ask: &str, answer: &str) -> v1::Task {
        v1::Task {
            id: id.into(),
            history: vec![user(ask)],
            status: Some(v1::TaskStatus {
                state: v1::TaskState::Completed as i32,
                ..Default::default()
            }),
            artifacts: vec![v1::Artifact {
                parts: vec![v1::Part::text(answer)],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn parts_become_content_and_other_files_are_refused() {
        let mut m = user("look");
        m.parts.push(v1::Part::data(serde_json::json!({"a": 1})));
        assert_eq!(
            content(&m, true, false),
            Ok(Content::Text("look\n{\"a\":1}".into()))
        );
        m.parts
            .push(v1::Part::url("https://img.example/a.png", "image/png"));
        assert!(matches!(content(&m, true, false), Ok(Content::Parts(p)) if p.len() == 3));
        m.parts
            .push(v1::Part::raw(vec![1, 2, 3], "image/png", "a.png"));
        match content(&m, true, false) {
            Ok(Content::Parts(p)) => assert_eq!(
                p[3],
                ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: "data:image/png;base64,AQID".into()
                    }
                }
            ),
            other => panic!("{other:?}"),
        }
        let mut tiff = user("scan");
        tiff.parts
            .push(v1::Part::raw(vec![1], "image/tiff", "a.tif"));
        assert!(
            content(&tiff, true, false)
                .expect_err("tiff")
                .contains("image/tiff")
        );
        m.parts
            .push(v1::Part::url("https://x.example/a.pdf", "application/pdf"));
        let mut http = user("look");
        http.parts
            .push(v1::Part::url("http://img.example/a.png", "image/png"));
        assert!(matches!(content(&http, true, true), Ok(Content::Parts(_))));
        let err = content(&http, true, false).expect_err("http");
        assert!(err.contains("https") && err.contains("allow_http"), "{err}");
        let err = content(&m, true, false).expect_err("pdf");
        assert!(err.contains("application/pdf"), "{err}");
        assert!(content(&m, false, false).is_ok());
    }

    #[test]
    fn history_is_oldest_first_within_the_budget() {
        // As listed: newest first.
        let tasks = vec![done("t2", "q2", "a2"), done("t1", "q1", "a1")];
        let all = history(tasks.clone(), "now", None, 10, 1000);
        let texts: Vec<_> = all
            .iter()
            .map(|m| match &m.content {
                Content::Text(t) => t.clone(),
                Content::Parts(_) => String::new(),
            })
            .collect();
        assert_eq!(texts, ["q1", "a1", "q2", "a2"]);
        assert_eq!(history(tasks.clone(), "now", None, 3, 1000).len(), 3);
        assert_eq!(history(tasks.clone(), "now", None, 10, 4).len(), 2);
        assert_eq!(history(tasks, "t2", None, 10, 1000).len(), 2);
    }
}
