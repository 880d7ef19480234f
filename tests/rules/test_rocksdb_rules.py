"""`rules.rocksdb`: which queues `RocksDBConsumeQueueStore.cleanDirty` destroys (rocketmq-all-5.3.1,
`RocksDBConsumeQueueOffsetTable.iterateOffsetTable2FindDirty`, `TopicValidator.isSystemTopic`)."""

from mqtool.rules.rocksdb import is_system_topic, iterate_offset_table_2_find_dirty


def test_system_topics_are_the_static_set_and_the_prefix():
    for t in ("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
              "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
              "CHECKPOINT_TOPIC", "rmq_sys_wheel_timer", "rmq_sys_REVIVE_LOG_DefaultCluster", "rmq_sys_x"):
        assert is_system_topic(t), t
    # retry and DLQ topics, and a name that only contains the prefix or differs in case, are not
    for t in ("%RETRY%g", "%DLQ%g", "TopicA", "x_rmq_sys_", "RMQ_SYS_x", "tbw102", "DefaultCluster"):
        assert not is_system_topic(t), t


def test_dirty_queues_are_unconfigured_non_system_topics():
    queues = [("TopicA", 0), ("TopicA", 1), ("Gone", 3), ("Gone", 0), ("%RETRY%g", 0), ("SCHEDULE_TOPIC_XXXX", 2),
              ("rmq_sys_wheel_timer", 0), ("", 0)]
    assert iterate_offset_table_2_find_dirty(queues, {"TopicA"}) == {"Gone": {0, 3}, "%RETRY%g": {0}}
    assert iterate_offset_table_2_find_dirty(queues, {"TopicA", "Gone", "%RETRY%g"}) == {}
    # an empty topic table: every non-system queue (what a broker started without its topics.json destroys)
    assert iterate_offset_table_2_find_dirty(queues, set()) == {"TopicA": {0, 1}, "Gone": {0, 3}, "%RETRY%g": {0}}
