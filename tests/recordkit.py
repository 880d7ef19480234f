"""Pieces of the hypothesis strategies that generate CommitLog records (the round-trip and the scan tests)."""

from hypothesis import strategies as st

ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(lambda a: f"[{a}]")


def draw_flags_and_topic(draw, min_topic: int, max_v2: int, max_v1: int) -> tuple[bool, bool, int, bool, str]:
    """(born_v6, store_v6, sys_flag, v2, topic) of a generated record: SYSFLAG's host bits say which
    hosts are IPv6; a topic has up to `max_v2` or `max_v1` characters, and a v1 one (MESSAGE_MAGIC_CODE)
    fits its one length byte."""
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    sys_flag = draw(st.integers(0, 0x7FF)) & ~0x30 | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    v2 = draw(st.booleans())
    topic = draw(st.text(min_size=min_topic, max_size=max_v2 if v2 else max_v1,
                         alphabet=st.characters(blacklist_categories=["Cs"])))
    if not v2 and len(topic.encode()) > 127:
        topic = topic[:20]
    return born_v6, store_v6, sys_flag, v2, topic
