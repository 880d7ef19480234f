# The audit's string kernels (`audit/commitlog.py`): a stable hash of many strings of one buffer, and
# the check that confirms a hash dictionary. References: `commitlog._hash_reference`, `_same_reference`.
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcmp


def string_hashes(const unsigned char[::1] a, const int64_t[::1] pos, const int64_t[::1] lens, int64_t[::1] out):
    """out[i]: FNV-1a 64 of a[pos[i]:pos[i] + lens[i]], then splitmix64's finaliser, shifted to 63 bits
    (non-negative; the same in every process, unlike Python's hash()). Runs without the GIL."""
    cdef Py_ssize_t i, j, n = pos.shape[0]
    cdef uint64_t h
    check_spans(a.shape[0], pos, lens)
    if out.shape[0] < n:
        raise ValueError("out is shorter than pos")
    with nogil:
        for i in range(n):
            h = 0xCBF29CE484222325ULL
            for j in range(pos[i], pos[i] + lens[i]):
                h = (h ^ a[j]) * 0x100000001B3ULL
            h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL
            h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL
            h = h ^ (h >> 31)
            out[i] = <int64_t>(h >> 1)


def same_strings(const unsigned char[::1] a, const int64_t[::1] pos, const int64_t[::1] lens,
                 const int64_t[::1] rep_pos, const int64_t[::1] rep_lens):
    """Whether string i equals representative i (a[rep_pos[i]:rep_pos[i] + rep_lens[i]]) for every i."""
    cdef Py_ssize_t i, n = pos.shape[0]
    cdef bint same = True
    check_spans(a.shape[0], pos, lens)
    check_spans(a.shape[0], rep_pos, rep_lens)
    if rep_pos.shape[0] != n:
        raise ValueError("strings and representatives differ in number")
    with nogil:
        for i in range(n):
            if lens[i] != rep_lens[i] or (lens[i] > 0 and memcmp(&a[0] + pos[i], &a[0] + rep_pos[i], lens[i]) != 0):
                same = False
                break
    return same
