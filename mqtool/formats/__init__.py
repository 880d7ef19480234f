"""Byte formats of a RocketMQ store, one module per file kind (Construct definitions: parse and build).

Only `construct` and the standard library are imported here; everything above builds on these.
Section numbers refer to `shared/spec/rocketmq-store.md`.
"""
