"""Keel's msgpack RPC protocol.

A frame is a 4-byte big-endian length followed by one msgpack value. The codec here
(`frames`, `envelope`, `schema`, `api`) is sans-I/O: bytes in, messages out, no asyncio.
`server` and `client` are the asyncio shell on top of it.
"""
