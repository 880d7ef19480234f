"""Hand-computed cases, one per service rule (times in ms after S or after the start)."""

from simkit import S, config, events, run


def test_level5_delivered_at_first_poll_after_due(built):
    m = built.delay(5, S, 60_000)
    start = S + 1234  # polls at start + 1000 + 100 k
    r = run(built, start, S + 120_000)
    (d,) = events(r, "deliver")
    assert d.uniq_key == m.uniq_key and d.service == "schedule"
    assert d.time == S + 60_034  # first poll >= S + 60 s: start + 1000 + 578 * 100
    assert d.topic == "T" and d.detail["level"] == 5
    assert r.summary["delay_offsets"] == {"5": 1}


def test_overdue_delay_delivered_at_first_run(built):
    built.delay(1, S, 1000)
    r = run(built, S + 50_000, S + 60_000)
    assert [e.time for e in events(r, "deliver")] == [S + 51_000]  # FIRST_DELAY_TIME after start


def test_failed_put_is_skipped_in_53_and_retried_in_49(built):
    a = built.delay(1, S, 1000)
    b = built.delay(1, S, 1000)
    sc = {"faults": [{"kind": "put_failure", "from": 0, "until": 1050, "service": "schedule"}]}
    r53 = run(built, S + 10_000, S + 20_000, sc)
    assert [e.uniq_key for e in events(r53, "deliver")] == [b.uniq_key]  # a is skipped for good
    r49 = run(built, S + 10_000, S + 20_000, sc, version="4.9")
    assert [(e.uniq_key, e.time) for e in events(r49, "deliver")] == [(a.uniq_key, S + 11_100),
                                                                      (b.uniq_key, S + 11_100)]


def test_timer_two_days_ten_hours_rolls_to_w_plus_one_day(built):
    w = S
    m = built.timer(w + (2 * 24 + 10) * 3600_000, w - 5000)
    r = run(built, w, w + 86_400_000 + 5000)
    (enq, enq2) = events(r, "enqueue")
    assert enq.detail["roll"] is True and enq.detail["slot"] == w + 86_400_000
    (roll,) = events(r, "roll")
    assert roll.time == w + 86_400_000 + 1000 and roll.uniq_key == m.uniq_key
    assert enq2.detail["roll"] is False and enq2.detail["slot"] == w + (2 * 24 + 10) * 3600_000
    assert events(r, "deliver") == []


def test_cancel_in_same_slot_suppresses_delivery(built):
    victim = built.timer(S + 60_000, S - 1000)
    built.timer(S + 60_000, S - 900, cancel=victim.uniq_key)
    other = built.timer(S + 60_000, S - 800)
    r = run(built, S, S + 70_000)
    assert [e.uniq_key for e in events(r, "cancel")] == [victim.uniq_key]
    assert [(e.uniq_key, e.time) for e in events(r, "deliver")] == [(other.uniq_key, S + 61_000)]


def test_already_due_timer_is_put_directly(built):
    m = built.timer(S - 5000, S - 10_000)
    r = run(built, S, S + 2000)
    (d,) = events(r, "deliver")
    assert d.uniq_key == m.uniq_key and d.time == S and d.detail["direct"] is True
    assert r.state["model"].message(d.new_physical_offset).props["TIMER_ENQUEUE_MS"] == str(2**63 - 1)


def test_check_max_plus_one_discards(built):
    h = built.half(S - 100_000)
    cfg = config(transactionCheckMax=3, transactionCheckInterval=10_000, transactionTimeOut=6000)
    r = run(built, S, S + 60_000, cfg=cfg)
    checks = events(r, "check")
    assert [e.detail["check_times"] for e in checks] == [1, 2, 3]
    (d,) = events(r, "discard")
    assert d.uniq_key == h.uniq_key and d.topic == "TX"
    assert d.time == checks[-1].time  # the copy with times = max is discarded in the same round
    assert d.detail["check_times"] == 3


def test_immunity_put_back_increments_check_times(built):
    built.half(S - 20_000, CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    cfg = config(transactionCheckMax=2, transactionCheckInterval=15_000, transactionTimeOut=10_000)
    r = run(built, S, S + 40_000, cfg=cfg)
    assert events(r, "check") == []
    puts = events(r, "put_back")
    assert [p.detail["check_times"] for p in puts] == [1, 2]
    assert len(events(r, "discard")) == 1  # discarded ~35 s after birth despite 60 s immunity


def test_commit_answer_writes_final_and_op(built):
    h = built.half(S - 100_000, group="PG_TX", keys="order-1")
    sc = {"transaction": {"check_at": ["+1s"], "answers": [{"producer_group": "PG_TX", "key": "order-*",
                                                             "answer": "commit"}]}}
    r = run(built, S, S + 10_000, sc, cfg=config(transactionOpBatchInterval=3000))
    (c,) = events(r, "commit")
    assert c.uniq_key == h.uniq_key and c.time == S + 1000
    ops = [m for m in r.state["model"].appended if m.topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC"]
    assert [m.body for m in ops] == [b"1,"] and ops[0].store_ts == S + 4000
    final = [m for m in r.state["model"].appended if m.topic == "TX"]
    assert final[0].sys_flag & 0xC == 0x8


def test_crash_loses_unpersisted_offsets_and_duplicates(built):
    for i in range(3):
        built.delay(1, S + i * 3000, 1000)
    sc = {"faults": [{"kind": "crash", "from": "+9s", "until": "+12s"}]}
    r = run(built, S + 2000, S + 30_000, sc)
    keys = [e.uniq_key for e in events(r, "deliver")]
    assert len(keys) > len(set(keys)) and r.summary["duplicates"] >= 1
    assert [e.event for e in r.events if e.service == "broker"] == ["crash", "restart"]


def test_clock_jump_back_delays_nothing_due_and_forward_delivers_early(built):
    m = built.delay(4, S, 30_000)
    sc = {"faults": [{"kind": "clock_jump", "at": "+2s", "delta": "+20s"}]}
    r = run(built, S, S + 40_000, sc)
    (d,) = events(r, "deliver")
    assert d.uniq_key == m.uniq_key and d.time == S + 10_000  # broker clock S+30 s at virtual S+10 s


def test_determinism_identical_bytes(built):
    for i in range(20):
        built.delay(1 + i % 3, S + i * 10, [1000, 5000, 10_000][i % 3])
        built.half(S - 50_000 + i)
    sc = {"transaction": {"answers": [{"answer": "commit", "probability": 0.5}]},
          "faults": [{"kind": "put_failure", "probability": 0.3}]}
    a = run(built, S, S + 200_000, sc, seed=7).events.jsonl()
    b = run(built, S, S + 200_000, sc, seed=7).events.jsonl()
    assert a == b and a


def test_49_half_exactly_at_its_timeout_does_not_hang(built):
    """age == transactionTimeOut: not "new arrived", not yet needing a check; 4.9.8 spins on it (1 ms a turn)."""
    h = built.half(S - 6000)
    cfg = config(transactionTimeOut=6000, transactionCheckInterval=60_000)
    r = run(built, S, S + 10_000, {"transaction": {"check_at": [0]}}, version="4.9", cfg=cfg)
    (c,) = events(r, "check")
    assert c.uniq_key == h.uniq_key and c.time == S + 1
