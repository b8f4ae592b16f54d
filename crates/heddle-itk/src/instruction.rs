//! The interop kit's instruction: a small protobuf message (package `itk`)
//! that one agent reads from the first part of its message and passes on,
//! nested, to the next. The field numbers are the kit's wire contract;
//! `tests/interop/itk/instruction.proto` is the same schema as a `.proto`,
//! for the Python and JS agents that take part in the tests.
//!
//! Decoding goes through prost, whose recursion limit bounds how deeply a
//! caller may nest instructions.

use base64::Engine as _;
use heddle_core::v1::{self, part::Content};
use prost::Message as _;

/// Media type of the binary part that carries an instruction.
pub const MEDIA_TYPE: &str = "application/x-protobuf";
/// File name the kit gives that part.
pub const FILE_NAME: &str = "instruction.bin";

/// One node of the instruction tree.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Instruction {
    /// What this node asks for.
    #[prost(oneof = "Step", tags = "1, 2, 3")]
    pub step: Option<Step>,
}

/// The kinds of node.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Step {
    /// Call another agent with a nested instruction.
    #[prost(message, tag = "1")]
    CallAgent(Box<CallAgent>),
    /// Answer with a fixed text.
    #[prost(message, tag = "2")]
    ReturnResponse(ReturnResponse),
    /// Run several nodes in order.
    #[prost(message, tag = "3")]
    Steps(SeriesOfSteps),
}

/// Call the agent whose card is at `agent_card_uri` over `transport`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CallAgent {
    /// `jsonrpc`, `grpc` or `http_json` (any case).
    #[prost(string, tag = "1")]
    pub transport: String,
    /// Where the callee's card is.
    #[prost(string, tag = "2")]
    pub agent_card_uri: String,
    /// What the callee is to do.
    #[prost(message, optional, boxed, tag = "3")]
    pub instruction: Option<Box<Instruction>>,
    /// Whether to send with SendStreamingMessage.
    #[prost(bool, tag = "4")]
    pub streaming: bool,
    /// How to call.
    #[prost(oneof = "Behavior", tags = "5, 6, 7")]
    pub behavior: Option<Behavior>,
}

/// How a call is made.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Behavior {
    /// A plain send.
    #[prost(message, tag = "5")]
    SendMessage(Empty),
    /// A send that registers a push config for the callee's task.
    #[prost(message, tag = "6")]
    PushNotification(PushNotification),
    /// Stream, disconnect, then resubscribe to the callee's task.
    #[prost(message, tag = "7")]
    Resubscribe(Empty),
}

/// A behaviour with no fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Empty {}

/// Where push notifications for the callee's task go.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushNotification {
    /// The receiver's base URL; deliveries go to `{url}/notifications`.
    #[prost(string, tag = "1")]
    pub url: String,
}

/// Answer with `response`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReturnResponse {
    /// The text.
    #[prost(string, tag = "1")]
    pub response: String,
    /// Keep the task open (WORKING) for a while after answering, for
    /// callers that resubscribe.
    #[prost(bool, tag = "2")]
    pub hold_task: bool,
}

/// Several nodes, run in order; their outputs are concatenated.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SeriesOfSteps {
    /// The nodes.
    #[prost(message, repeated, tag = "1")]
    pub instructions: Vec<Instruction>,
    /// How outputs combine (only concatenation is defined).
    #[prost(int32, tag = "2")]
    pub response_generator: i32,
}

impl Instruction {
    /// The instruction in `message`: the first part that decodes as one,
    /// whether a binary part (v1.0 `raw`; a v0.3 file part arrives as one)
    /// or base64 text.
    ///
    /// A binary part whose bytes are all base64 characters is read as base64
    /// first: the official Python SDK's v0.3 gRPC and REST clients encode a
    /// file part's bytes twice. That is unambiguous here, as an encoded
    /// instruction starts with a field tag (0x0a, 0x12 or 0x1a), never a
    /// base64 character.
    pub fn find_in(message: &v1::Message) -> Option<Self> {
        message.parts.iter().find_map(|part| match &part.content {
            Some(Content::Raw(bytes)) if is_base64(bytes) => from_base64(bytes),
            Some(Content::Raw(bytes)) => Self::decode(bytes.as_slice())
                .ok()
                .filter(|i| i.step.is_some()),
            Some(Content::Text(text)) => from_base64(text.trim().as_bytes()),
            _ => None,
        })
    }

    /// This instruction as the binary part the kit's agents read.
    pub fn to_part(&self) -> v1::Part {
        v1::Part::raw(self.encode_to_vec(), MEDIA_TYPE, FILE_NAME)
    }

    /// Whether a return node anywhere in this tree (not counting calls,
    /// whose nodes are for the callee) asks to hold the task.
    pub fn holds_task(&self) -> bool {
        match &self.step {
            Some(Step::ReturnResponse(r)) => r.hold_task,
            Some(Step::Steps(s)) => s.instructions.iter().any(Self::holds_task),
            Some(Step::CallAgent(_)) | None => false,
        }
    }
}

fn is_base64(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
}

fn from_base64(text: &[u8]) -> Option<Instruction> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    Instruction::decode(bytes.as_slice())
        .ok()
        .filter(|i| i.step.is_some())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    fn answer(text: &str, hold: bool) -> Instruction {
        Instruction {
            step: Some(Step::ReturnResponse(ReturnResponse {
                response: text.into(),
                hold_task: hold,
            })),
        }
    }

    #[test]
    fn a_return_node_has_the_kits_bytes() {
        // Field 2 (return_response), 6 bytes long: field 1 "hi", field 2 true.
        assert_eq!(
            answer("hi", true).encode_to_vec(),
            [0x12, 0x06, 0x0a, 0x02, b'h', b'i', 0x10, 0x01]
        );
    }

    #[test]
    fn a_call_round_trips_through_a_part_and_through_base64_text() {
        let call = Instruction {
            step: Some(Step::CallAgent(Box::new(CallAgent {
                transport: "grpc".into(),
                agent_card_uri: "http://127.0.0.1:1/.well-known/agent-card.json".into(),
                instruction: Some(Box::new(answer("b", false))),
                streaming: true,
                behavior: Some(Behavior::PushNotification(PushNotification {
                    url: "127.0.0.1:2".into(),
                })),
            }))),
        };
        let part = call.to_part();
        assert_eq!(part.media_type, MEDIA_TYPE);
        let message = v1::Message::new("m", v1::Role::User, vec![v1::Part::text("hello"), part]);
        assert_eq!(Instruction::find_in(&message), Some(call.clone()));

        let text = base64::engine::general_purpose::STANDARD.encode(call.encode_to_vec());
        let message = v1::Message::new("m", v1::Role::User, vec![v1::Part::text(text)]);
        assert_eq!(Instruction::find_in(&message), Some(call));
    }

    #[test]
    fn bytes_base64_encoded_twice_are_read_once_more() {
        let inst = answer("twice", false);
        let once = base64::engine::general_purpose::STANDARD.encode(inst.encode_to_vec());
        let message = v1::Message::new(
            "m",
            v1::Role::User,
            vec![v1::Part::raw(once.into_bytes(), MEDIA_TYPE, FILE_NAME)],
        );
        assert_eq!(Instruction::find_in(&message), Some(inst));
    }

    #[test]
    fn plain_text_and_garbage_are_no_instruction() {
        let message = v1::Message::new(
            "m",
            v1::Role::User,
            vec![
                v1::Part::text("just words"),
                v1::Part::raw(vec![0xff, 0xff, 0xff], MEDIA_TYPE, FILE_NAME),
            ],
        );
        assert_eq!(Instruction::find_in(&message), None);
    }

    #[test]
    fn nesting_past_the_decoders_limit_is_refused_not_a_stack_overflow() {
        let mut inst = answer("deep", false);
        for _ in 0..200 {
            inst = Instruction {
                step: Some(Step::Steps(SeriesOfSteps {
                    instructions: vec![inst],
                    response_generator: 1,
                })),
            };
        }
        let bytes = inst.encode_to_vec();
        assert!(Instruction::decode(bytes.as_slice()).is_err());
    }

    #[test]
    fn holding_is_read_through_steps_but_not_into_calls() {
        let steps = |v| Instruction {
            step: Some(Step::Steps(SeriesOfSteps {
                instructions: v,
                response_generator: 1,
            })),
        };
        assert!(steps(vec![answer("a", false), answer("b", true)]).holds_task());
        let call = Instruction {
            step: Some(Step::CallAgent(Box::new(CallAgent {
                instruction: Some(Box::new(answer("x", true))),
                ..Default::default()
            }))),
        };
        assert!(!steps(vec![call]).holds_task());
    }
}
