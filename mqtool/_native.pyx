# cython: language_level=3
"""mqtool's compiled kernels: one extension module; each kernel group is one include file in `_kernels/`.

Every kernel has a plain-Python reference beside the code that calls it; the tests run both on the
oracle stores, generated records and damaged bytes.
"""

ABI = 1
"""Bumped when a kernel's signature changes, so a stale build is refused, not called."""

include "_kernels/crc.pxi"
include "_kernels/scan.pxi"
include "_kernels/jsonl.pxi"
include "_kernels/parquet.pxi"
include "_kernels/audit.pxi"
include "_kernels/props.pxi"
include "_kernels/eventlines.pxi"
