"""Kafka's record-batch compression: the records section of a batch whose attributes name a
codec (1 gzip, 2 snappy, 3 lz4, 4 zstd) is compressed whole, the 61-byte header never.

`decompress` reads one in Kafka's framings: gzip's, snappy either raw or in the xerial
framing Java producers write (a magic header, then length-prefixed raw blocks), LZ4's frame
format (Kafka's KafkaLZ4BlockOutputStream), zstd's frame. Every codec stops at `limit` bytes
of output and refuses more, so a small batch that would expand without end (a decompression
bomb) costs at most `limit`; bad bytes raise CorruptMessage. `compress` writes what Kafka's
own producers write, for Keel's clients.
"""

from __future__ import annotations

import io
import struct
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from wire.errors import CorruptMessage, UnsupportedCompressionType

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS: Final = {name: codec for codec, name in NAMES.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024
_GZIP_OR_ZLIB = 47  # zlib's window bits: detect gzip's or zlib's header


def decompress(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """The records section `data` compressed with `codec`, at most `limit` bytes of it."""
    try:
        if codec == GZIP:
            out = zlib.decompressobj(_GZIP_OR_ZLIB).decompress(data, limit + 1)
        elif codec == SNAPPY:
            out = _snappy(bytes(data), limit)
        elif codec == LZ4:
            out = lz4.frame.LZ4FrameDecompressor().decompress(bytes(data), max_length=limit + 1)
        elif codec == ZSTD:
            source = io.BytesIO(data)
            with zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True) as reader:
                out = reader.read(limit + 1)
        else:
            raise UnsupportedCompressionType(f"compression codec {codec} is not one Kafka defines")
    except (zlib.error, RuntimeError, ValueError, zstandard.ZstdError, cramjam.DecompressionError) as e:
        raise CorruptMessage(f"{NAMES.get(codec, codec)} records do not decompress: {e}") from None
    if len(out) > limit:
        raise CorruptMessage(f"{NAMES[codec]} records decompress to more than {limit} bytes")
    return out


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(data, limit)
    position = _XERIAL_HEADER.size
    out = bytearray()
    while position < len(data):
        if position + _XERIAL_BLOCK.size > len(data):
            raise ValueError("a xerial block's length is cut short")
        (length,) = _XERIAL_BLOCK.unpack_from(data, position)
        position += _XERIAL_BLOCK.size
        if length < 0 or position + length > len(data):
            raise ValueError(f"a xerial block of {length} bytes in {len(data) - position}")
        out += _snappy_block(data[position : position + length], limit - len(out))
        position += length
    return bytes(out)


def _snappy_block(block: bytes, limit: int) -> bytes:
    """One raw snappy block, whose header says how long it decompresses to: refused before
    it is decompressed when that is over `limit`."""
    if cramjam.snappy.decompress_raw_len(block) > limit:
        raise CorruptMessage(f"snappy records decompress to more than {limit} bytes")
    return bytes(cramjam.snappy.decompress_raw(block))


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed as Kafka's Java producer compresses a records section."""
    if codec == GZIP:
        compressor = zlib.compressobj(wbits=31)  # gzip's framing
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
        for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_SIZE]))
            out += _XERIAL_BLOCK.pack(len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(lz4.frame.compress(data))
    if codec == ZSTD:
        return bytes(zstandard.ZstdCompressor().compress(data))
    raise UnsupportedCompressionType(f"compression codec {codec} is not one Kafka defines")
