//! Hand-written ProtoJSON for the messages where generated serde falls short.
//!
//! * `ListTasksResponse`: `tasks`, `nextPageToken` (`""` on the last page),
//!   `pageSize` and `totalSize` are all REQUIRED (v1 §3.1.4), so they are
//!   written even at their default, which generic ProtoJSON would omit.
//! * `Message`: the most repeated object on the wire (every history entry);
//!   written here without the generated code's double pass over fields, it
//!   serializes as fast as the same JSON held in a `serde_json::Value`.
//! * `Part`: its `data` member is a `google.protobuf.Value`, for which JSON
//!   `null` is a value (NullValue), not "absent"; and a second content member
//!   gets an error that says which oneof it broke.

use std::fmt;

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, MapAccess, Visitor},
    ser::{SerializeMap, SerializeStruct},
};

use crate::{
    v1::{ListTasksResponse, Message, Part, Role, Task, part::Content},
    wkt::{Struct, Value},
};

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if !self.message_id.is_empty() {
            m.serialize_entry("messageId", &self.message_id)?;
        }
        if !self.context_id.is_empty() {
            m.serialize_entry("contextId", &self.context_id)?;
        }
        if !self.task_id.is_empty() {
            m.serialize_entry("taskId", &self.task_id)?;
        }
        if self.role != 0 {
            match Role::try_from(self.role) {
                Ok(r) => m.serialize_entry("role", r.as_str_name())?,
                // An unknown enum value goes out as its number, as ProtoJSON does.
                Err(_) => m.serialize_entry("role", &self.role)?,
            }
        }
        if !self.parts.is_empty() {
            m.serialize_entry("parts", &self.parts)?;
        }
        if let Some(md) = &self.metadata {
            m.serialize_entry("metadata", md)?;
        }
        if !self.extensions.is_empty() {
            m.serialize_entry("extensions", &self.extensions)?;
        }
        if !self.reference_task_ids.is_empty() {
            m.serialize_entry("referenceTaskIds", &self.reference_task_ids)?;
        }
        m.end()
    }
}

/// A `Role` by name or number; `null` is the default.
struct RoleValue(i32);

impl<'de> Deserialize<'de> for RoleValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RoleValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Role name (ROLE_USER, ROLE_AGENT) or number")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RoleValue, E> {
                Role::from_str_name(s)
                    .map(|r| RoleValue(r as i32))
                    .ok_or_else(|| {
                        E::unknown_variant(s, &["ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT"])
                    })
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<RoleValue, E> {
                i32::try_from(n)
                    .map(RoleValue)
                    .map_err(|_| E::custom("role out of range"))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<RoleValue, E> {
                i32::try_from(n)
                    .map(RoleValue)
                    .map_err(|_| E::custom("role out of range"))
            }
            fn visit_unit<E: de::Error>(self) -> Result<RoleValue, E> {
                Ok(RoleValue(0))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MessageVisitor)
    }
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        let mut msg = Message::default();
        let mut seen = [false; 8];
        let mut once = |i: usize, name: &'static str| -> Result<(), A::Error> {
            if std::mem::replace(&mut seen[i], true) {
                return Err(de::Error::duplicate_field(name));
            }
            Ok(())
        };
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "messageId" | "message_id" => {
                    once(0, "messageId")?;
                    msg.message_id = map.next_value::<Option<String>>()?.unwrap_or_default();
                }
                "contextId" | "context_id" => {
                    once(1, "contextId")?;
                    msg.context_id = map.next_value::<Option<String>>()?.unwrap_or_default();
                }
                "taskId" | "task_id" => {
                    once(2, "taskId")?;
                    msg.task_id = map.next_value::<Option<String>>()?.unwrap_or_default();
                }
                "role" => {
                    once(3, "role")?;
                    msg.role = map.next_value::<RoleValue>()?.0;
                }
                "parts" => {
                    once(4, "parts")?;
                    msg.parts = map.next_value::<Option<Vec<Part>>>()?.unwrap_or_default();
                }
                "metadata" => {
                    once(5, "metadata")?;
                    msg.metadata = map.next_value()?;
                }
                "extensions" => {
                    once(6, "extensions")?;
                    msg.extensions = map.next_value::<Option<Vec<String>>>()?.unwrap_or_default();
                }
                "referenceTaskIds" | "reference_task_ids" => {
                    once(7, "referenceTaskIds")?;
                    msg.reference_task_ids =
                        map.next_value::<Option<Vec<String>>>()?.unwrap_or_default();
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(msg)
    }
}

/// The members of `Part`'s `content` oneof, for error messages.
pub const PART_CONTENT_MEMBERS: &str = "text, raw, url, data";

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        let mut m = s.serialize_map(None)?;
        match &self.content {
            Some(Content::Text(t)) => m.serialize_entry("text", t)?,
            Some(Content::Raw(b)) => {
                m.serialize_entry("raw", &base64::engine::general_purpose::STANDARD.encode(b))?
            }
            Some(Content::Url(u)) => m.serialize_entry("url", u)?,
            Some(Content::Data(v)) => m.serialize_entry("data", v)?,
            None => {}
        }
        if let Some(md) = &self.metadata {
            m.serialize_entry("metadata", md)?;
        }
        if !self.filename.is_empty() {
            m.serialize_entry("filename", &self.filename)?;
        }
        if !self.media_type.is_empty() {
            m.serialize_entry("mediaType", &self.media_type)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PartVisitor)
    }
}

struct PartVisitor;

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Part object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        let mut content: Option<(Content, &'static str)> = None;
        let mut set = |c: Content, name: &'static str| -> Result<(), A::Error> {
            if let Some((_, first)) = &content {
                return Err(de::Error::custom(format!(
                    "a part holds exactly one of {PART_CONTENT_MEMBERS}; found both `{first}` and `{name}`"
                )));
            }
            content = Some((c, name));
            Ok(())
        };
        let mut metadata: Option<Struct> = None;
        let (mut filename, mut media_type) = (String::new(), String::new());
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "text" => {
                    if let Some(t) = map.next_value::<Option<String>>()? {
                        set(Content::Text(t), "text")?;
                    }
                }
                "raw" => {
                    if let Some(b) = map.next_value::<Option<std::borrow::Cow<'de, str>>>()? {
                        let bytes = decode_base64(&b)
                            .ok_or_else(|| de::Error::custom("raw: not valid base64"))?;
                        set(Content::Raw(bytes), "raw")?;
                    }
                }
                "url" => {
                    if let Some(u) = map.next_value::<Option<String>>()? {
                        set(Content::Url(u), "url")?;
                    }
                }
                // A Value member: `null` is NullValue, not absence.
                "data" => set(Content::Data(map.next_value::<Value>()?), "data")?,
                "metadata" => metadata = map.next_value()?,
                "filename" => filename = map.next_value::<Option<String>>()?.unwrap_or_default(),
                "mediaType" | "media_type" => {
                    media_type = map.next_value::<Option<String>>()?.unwrap_or_default()
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(Part {
            metadata,
            filename,
            media_type,
            content: content.map(|(c, _)| c),
        })
    }
}

/// Decodes standard or URL-safe base64, padded or not (ProtoJSON accepts all four).
pub fn decode_base64(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    STANDARD
        .decode(s)
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .ok()
}

impl Serialize for ListTasksResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("lf.a2a.v1.ListTasksResponse", 4)?;
        st.serialize_field("tasks", &self.tasks)?;
        st.serialize_field("nextPageToken", &self.next_page_token)?;
        st.serialize_field("pageSize", &self.page_size)?;
        st.serialize_field("totalSize", &self.total_size)?;
        st.end()
    }
}

/// Reads both the camelCase and the snake_case names; absent or null members
/// take their defaults.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    tasks: Option<Vec<Task>>,
    #[serde(default, alias = "next_page_token")]
    #[serde(rename = "nextPageToken")]
    next_page_token: Option<String>,
    #[serde(default, alias = "page_size")]
    #[serde(rename = "pageSize")]
    page_size: Option<i32>,
    #[serde(default, alias = "total_size")]
    #[serde(rename = "totalSize")]
    total_size: Option<i32>,
}

impl<'de> Deserialize<'de> for ListTasksResponse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(Self {
            tasks: w.tasks.unwrap_or_default(),
            next_page_token: w.next_page_token.unwrap_or_default(),
            page_size: w.page_size.unwrap_or_default(),
            total_size: w.total_size.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_data_null_is_a_value_and_two_members_are_refused() {
        let p: Part = serde_json::from_str(r#"{"data": null}"#).expect("parses");
        assert_eq!(
            p.content,
            Some(Content::Data(Value(serde_json::Value::Null)))
        );
        let err =
            serde_json::from_str::<Part>(r#"{"text": "a", "url": "u"}"#).expect_err("two members");
        assert!(
            err.to_string().contains("found both `text` and `url`"),
            "{err}"
        );
        let p: Part = serde_json::from_str(r#"{"raw": "-_8", "media_type": "x/y"}"#)
            .expect("url-safe, unpadded");
        assert_eq!(p.content, Some(Content::Raw(vec![0xfb, 0xff])));
        assert_eq!(p.media_type, "x/y");
    }

    #[test]
    fn last_page_keeps_an_empty_next_page_token() {
        let json = serde_json::to_value(ListTasksResponse::default()).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0})
        );
        let back: ListTasksResponse = serde_json::from_value(json).expect("parses");
        assert_eq!(back, ListTasksResponse::default());
    }
}
