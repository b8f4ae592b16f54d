// The `itk` instruction messages (itk/instruction.proto) for JS, encoded and
// decoded by hand with @bufbuild/protobuf's BinaryWriter / BinaryReader (no
// generated code, no protoc). Keep the field numbers in step with
// instruction.proto and instruction_pb.py.
//
// Messages are plain objects with the proto field names in camelCase; a oneof
// member is present when set (the last one on the wire wins), e.g.
//   { steps: { instructions: [ { returnResponse: { response: 'a', holdTask: false } },
//                              { callAgent: { transport: 'grpc', agentCardUri: 'http://…',
//                                             instruction: {…}, streaming: false,
//                                             pushNotification: { url: '…' } } } ],
//              responseGenerator: 1 } }

import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';

export const MEDIA_TYPE = 'application/x-protobuf';
export const FILENAME = 'instruction.bin';
export const RESPONSE_GENERATOR_CONCAT = 1;

// ------------------------------------------------------------------ encoding

function message(w, fieldNo, encodeBody, value) {
  w.tag(fieldNo, WireType.LengthDelimited).fork();
  encodeBody(w, value);
  w.join();
}

function string(w, fieldNo, value) {
  if (value) w.tag(fieldNo, WireType.LengthDelimited).string(value);
}

function bool(w, fieldNo, value) {
  if (value) w.tag(fieldNo, WireType.Varint).bool(true);
}

function encodeInstructionBody(w, inst) {
  if (inst.callAgent) message(w, 1, encodeCallAgent, inst.callAgent);
  else if (inst.returnResponse) message(w, 2, encodeReturnResponse, inst.returnResponse);
  else if (inst.steps) message(w, 3, encodeSteps, inst.steps);
}

function encodeCallAgent(w, call) {
  string(w, 1, call.transport);
  string(w, 2, call.agentCardUri);
  if (call.instruction) message(w, 3, encodeInstructionBody, call.instruction);
  bool(w, 4, call.streaming);
  if (call.sendMessage) message(w, 5, () => {}, call.sendMessage);
  else if (call.pushNotification) {
    message(w, 6, (ww, p) => string(ww, 1, p.url), call.pushNotification);
  } else if (call.resubscribe) message(w, 7, () => {}, call.resubscribe);
}

function encodeReturnResponse(w, ret) {
  string(w, 1, ret.response);
  bool(w, 2, ret.holdTask);
}

function encodeSteps(w, steps) {
  for (const inst of steps.instructions ?? []) message(w, 1, encodeInstructionBody, inst);
  if (steps.responseGenerator) w.tag(2, WireType.Varint).int32(steps.responseGenerator);
}

/** The protobuf bytes of an itk.Instruction. */
export function encodeInstruction(inst) {
  const w = new BinaryWriter();
  encodeInstructionBody(w, inst);
  return w.finish();
}

// ------------------------------------------------------------------ decoding

// Reads the fields of one message up to `end`, calling onField(fieldNo,
// wireType) for each; onField returns false for a field it does not know,
// which is then skipped.
function fields(r, end, onField) {
  while (r.pos < end) {
    const [fieldNo, wireType] = r.tag();
    if (!onField(fieldNo, wireType)) r.skip(wireType, fieldNo);
  }
  if (r.pos !== end) throw new Error('itk.Instruction: a field runs past its message');
}

function sub(r, decodeBody) {
  const len = r.uint32();
  return decodeBody(r, r.pos + len);
}

function expect(wireType, want, name) {
  if (wireType !== want) throw new Error(`itk.Instruction: ${name} has wire type ${wireType}`);
}

function decodeInstructionBody(r, end) {
  const inst = {};
  fields(r, end, (no, wt) => {
    const set = (key, value) => {
      delete inst.callAgent;
      delete inst.returnResponse;
      delete inst.steps;
      inst[key] = value;
    };
    if (no === 1) { expect(wt, WireType.LengthDelimited, 'call_agent'); set('callAgent', sub(r, decodeCallAgent)); }
    else if (no === 2) { expect(wt, WireType.LengthDelimited, 'return_response'); set('returnResponse', sub(r, decodeReturnResponse)); }
    else if (no === 3) { expect(wt, WireType.LengthDelimited, 'steps'); set('steps', sub(r, decodeSteps)); }
    else return false;
    return true;
  });
  return inst;
}

function decodeCallAgent(r, end) {
  const call = { transport: '', agentCardUri: '', instruction: undefined, streaming: false };
  const behaviour = (key, value) => {
    delete call.sendMessage;
    delete call.pushNotification;
    delete call.resubscribe;
    call[key] = value;
  };
  const empty = (rr, e) => {
    fields(rr, e, () => false);
    return {};
  };
  fields(r, end, (no, wt) => {
    switch (no) {
      case 1: expect(wt, WireType.LengthDelimited, 'transport'); call.transport = r.string(); break;
      case 2: expect(wt, WireType.LengthDelimited, 'agent_card_uri'); call.agentCardUri = r.string(); break;
      case 3: expect(wt, WireType.LengthDelimited, 'instruction'); call.instruction = sub(r, decodeInstructionBody); break;
      case 4: expect(wt, WireType.Varint, 'streaming'); call.streaming = r.bool(); break;
      case 5: expect(wt, WireType.LengthDelimited, 'send_message'); behaviour('sendMessage', sub(r, empty)); break;
      case 6:
        expect(wt, WireType.LengthDelimited, 'push_notification');
        behaviour('pushNotification', sub(r, (rr, e) => {
          const push = { url: '' };
          fields(rr, e, (n, t) => {
            if (n !== 1) return false;
            expect(t, WireType.LengthDelimited, 'url');
            push.url = rr.string();
            return true;
          });
          return push;
        }));
        break;
      case 7: expect(wt, WireType.LengthDelimited, 'resubscribe'); behaviour('resubscribe', sub(r, empty)); break;
      default: return false;
    }
    return true;
  });
  return call;
}

function decodeReturnResponse(r, end) {
  const ret = { response: '', holdTask: false };
  fields(r, end, (no, wt) => {
    if (no === 1) { expect(wt, WireType.LengthDelimited, 'response'); ret.response = r.string(); }
    else if (no === 2) { expect(wt, WireType.Varint, 'hold_task'); ret.holdTask = r.bool(); }
    else return false;
    return true;
  });
  return ret;
}

function decodeSteps(r, end) {
  const steps = { instructions: [], responseGenerator: 0 };
  fields(r, end, (no, wt) => {
    if (no === 1) { expect(wt, WireType.LengthDelimited, 'instructions'); steps.instructions.push(sub(r, decodeInstructionBody)); }
    else if (no === 2) { expect(wt, WireType.Varint, 'response_generator'); steps.responseGenerator = r.int32(); }
    else return false;
    return true;
  });
  return steps;
}

/** Decodes the protobuf bytes of an itk.Instruction; throws on bad bytes. */
export function decodeInstruction(bytes) {
  const r = new BinaryReader(bytes);
  return decodeInstructionBody(r, r.len);
}
