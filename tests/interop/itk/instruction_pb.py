"""The `itk` instruction messages (itk/instruction.proto) for Python, without
protoc: the file descriptor is written out in code below and the message
classes come from the protobuf runtime that a2a-sdk already installs.

    from instruction_pb import Instruction, CallAgent, ReturnResponse, ...
    inst = Instruction(return_response=ReturnResponse(response='hi'))
    data = inst.SerializeToString()
    Instruction.FromString(data)

Keep the field numbers in step with instruction.proto and instruction.mjs.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _field(msg, name: str, number: int, kind: int, *, type_name: str = '',
           repeated: bool = False, oneof: int | None = None) -> None:
    f = msg.field.add()
    f.name = name
    f.number = number
    f.type = kind
    f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof
    f.json_name = ''.join(
        w if i == 0 else w.capitalize() for i, w in enumerate(name.split('_')))


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name='itk/instruction.proto', package='itk', syntax='proto3')
    msg = fd.message_type.add

    inst = msg(name='Instruction')
    inst.oneof_decl.add(name='step')
    _field(inst, 'call_agent', 1, _F.TYPE_MESSAGE, type_name='.itk.CallAgent', oneof=0)
    _field(inst, 'return_response', 2, _F.TYPE_MESSAGE,
           type_name='.itk.ReturnResponse', oneof=0)
    _field(inst, 'steps', 3, _F.TYPE_MESSAGE, type_name='.itk.SeriesOfSteps', oneof=0)

    call = msg(name='CallAgent')
    call.oneof_decl.add(name='behavior')
    _field(call, 'transport', 1, _F.TYPE_STRING)
    _field(call, 'agent_card_uri', 2, _F.TYPE_STRING)
    _field(call, 'instruction', 3, _F.TYPE_MESSAGE, type_name='.itk.Instruction')
    _field(call, 'streaming', 4, _F.TYPE_BOOL)
    _field(call, 'send_message', 5, _F.TYPE_MESSAGE,
           type_name='.itk.SendMessageBehavior', oneof=0)
    _field(call, 'push_notification', 6, _F.TYPE_MESSAGE,
           type_name='.itk.PushNotificationBehavior', oneof=0)
    _field(call, 'resubscribe', 7, _F.TYPE_MESSAGE,
           type_name='.itk.ResubscribeBehavior', oneof=0)

    msg(name='SendMessageBehavior')
    push = msg(name='PushNotificationBehavior')
    _field(push, 'url', 1, _F.TYPE_STRING)
    msg(name='ResubscribeBehavior')

    ret = msg(name='ReturnResponse')
    _field(ret, 'response', 1, _F.TYPE_STRING)
    _field(ret, 'hold_task', 2, _F.TYPE_BOOL)

    steps = msg(name='SeriesOfSteps')
    _field(steps, 'instructions', 1, _F.TYPE_MESSAGE, type_name='.itk.Instruction',
           repeated=True)
    _field(steps, 'response_generator', 2, _F.TYPE_ENUM,
           type_name='.itk.ResponseGenerator')

    gen = fd.enum_type.add(name='ResponseGenerator')
    gen.value.add(name='RESPONSE_GENERATOR_UNSPECIFIED', number=0)
    gen.value.add(name='RESPONSE_GENERATOR_CONCAT', number=1)
    return fd


# A pool of our own, so nothing clashes with the SDK's descriptors.
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _cls(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f'itk.{name}'))


Instruction = _cls('Instruction')
CallAgent = _cls('CallAgent')
SendMessageBehavior = _cls('SendMessageBehavior')
PushNotificationBehavior = _cls('PushNotificationBehavior')
ResubscribeBehavior = _cls('ResubscribeBehavior')
ReturnResponse = _cls('ReturnResponse')
SeriesOfSteps = _cls('SeriesOfSteps')
RESPONSE_GENERATOR_UNSPECIFIED = 0
RESPONSE_GENERATOR_CONCAT = 1

MEDIA_TYPE = 'application/x-protobuf'
FILENAME = 'instruction.bin'
