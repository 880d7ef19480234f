"""The data sources' schemas as Spark DDL strings (no pyarrow or numpy imports).

`schema()` runs on the driver in a short-lived Python process for every read; keeping this module
free of heavy imports keeps that planning cost small. `mqtool.spark.arrow` builds the matching
Arrow schemas (the batches `read()` yields must match these types exactly).
"""

COMMITLOG_SCHEMA = (
    "file STRING, physical_offset BIGINT, total_size INT, magic_code INT, body_crc INT, crc_ok BOOLEAN, "
    "queue_id INT, flag INT, queue_offset BIGINT, physical_offset_field BIGINT, sys_flag INT, "
    "born_timestamp BIGINT, born_host STRING, store_timestamp BIGINT, store_host STRING, reconsume_times INT, "
    "prepared_transaction_offset BIGINT, topic STRING, tags STRING, keys STRING, uniq_key STRING, "
    "properties MAP<STRING, STRING>, body BINARY, dledger_index BIGINT, dledger_term BIGINT, dledger_pos BIGINT"
)  # dledger_*: the DLedger entry holding the record (spec §12), null in a normal CommitLog
CONSUMEQUEUE_SCHEMA = ("topic STRING, queue_id INT, file STRING, offset BIGINT, queue_offset BIGINT, "
                       "commitlog_offset BIGINT, size INT, tags_code BIGINT, batch_size INT, store_time BIGINT")
# batch_size / store_time: a BatchConsumeQueue unit's (spec §13; queue_offset is its msgBaseOffset);
# a ConsumeQueue unit stands for one message (batch_size 1) and stores no time (null)
TIMERLOG_SCHEMA = ("file STRING, offset BIGINT, size INT, prev_pos BIGINT, magic INT, curr_write_time_ms BIGINT, "
                   "delayed_time_ms BIGINT, offset_py BIGINT, size_py INT, real_topic_hash INT")
TIMERWHEEL_SCHEMA = ("file STRING, slot INT, offset BIGINT, time_ms BIGINT, first_pos BIGINT, last_pos BIGINT, "
                     "num INT, magic INT")
INDEX_SCHEMA = ("file STRING, entry INT, offset BIGINT, key_hash INT, slot INT, phy_offset BIGINT, time_diff INT, "
                "timestamp BIGINT, prev_index INT")
