"""The body of an INNER_BATCH record (spec §13; `MessageDecoder.encodeMessages` / `decodeMessages`).

A batch sent to a `queue.type=BatchCQ` topic is stored as one CommitLog record with sysFlag INNER_BATCH
whose body is the client's batch encoding: the messages one after another, each with only its flag,
body and properties (`encodeMessage`). The consumer's client unpacks them (`decodeMessage(MessageExt,
List)`): inner message i has the record's queue offset + i. `decodeMessage` reads the fields in order and
ignores TOTALSIZE, MAGICCODE and BODYCRC; a body that runs short throws (BufferUnderflowException).
"""

import io

from construct import Bytes, ConstructError, Default, Int16sb, Int32sb, Rebuild, Struct, len_, this

from mqtool.formats.properties import parse_properties

batch_message = Struct(
    # 4 + 4 + 4 + 4 + 4 + body + 2 + properties (`encodeMessage`'s storeSize)
    "total_size" / Rebuild(Int32sb, 22 + len_(this.body) + len_(this.properties)),
    "magic_code" / Default(Int32sb, 0),  # encodeMessage writes 0; decodeMessage does not look
    "body_crc" / Default(Int32sb, 0),  # encodeMessage writes 0; decodeMessage does not look
    "flag" / Int32sb,
    "body_length" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.body_length),
    "properties_length" / Rebuild(Int16sb, len_(this.properties)),  # a Java short: UTF-8 bytes
    "properties" / Bytes(this.properties_length),
)


class BatchBodyError(ValueError):
    """The body is not a batch encoding; `position` is where `decodeMessages` would throw."""

    def __init__(self, position: int, reason: str):
        self.position = position
        super().__init__(f"at byte {position}: {reason}")


def decode_messages(body: bytes) -> list[dict]:
    """`MessageDecoder.decodeMessages`: each inner message's flag, properties (stored order) and body.

    Reads as Java does, field after field (TOTALSIZE, MAGICCODE and BODYCRC are not checked); raises
    `BatchBodyError` where Java would throw (a length past the body's end, or negative).
    """
    out, stream = [], io.BytesIO(body)
    while stream.tell() < len(body):
        pos = stream.tell()
        try:
            msg = batch_message.parse_stream(stream)
        except (ConstructError, ValueError):  # a length past the end, or negative (Bytes(-n))
            raise BatchBodyError(
                pos, f"inner message {len(out)} runs past the body's end ({len(body)} bytes)"
            ) from None
        props = msg.properties.decode("utf-8", "replace")
        out.append({"flag": msg.flag, "properties": parse_properties(props), "body": msg.body})
    return out


def encode_messages(messages: list[tuple[int, bytes, str]]) -> bytes:
    """`MessageDecoder.encodeMessages` of (flag, body, properties string) triples."""
    return b"".join(
        batch_message.build({"flag": flag, "body": body, "properties": props.encode("utf-8")})
        for flag, body, props in messages
    )
