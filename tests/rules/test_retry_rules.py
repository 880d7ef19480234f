"""`consumerSendMsgBack`'s limit and decision (rocketmq-all-5.3.1 AbstractSendMessageProcessor, client
DefaultMQPushConsumerImpl.getMaxReconsumeTimes); the numbers are the source's constants."""

from mqtool.rules.retry import consumer_send_msg_back, get_max_reconsume_times, send_back_max_reconsume_times


def test_a_default_client_sends_16_and_the_request_wins_over_retry_max_times():
    assert get_max_reconsume_times(None) == 16 and get_max_reconsume_times(-1) == 16
    assert get_max_reconsume_times(3) == 3
    assert send_back_max_reconsume_times(3, 16) == 16  # group retryMaxTimes 3, a 5.3.1 request (version 475)
    assert send_back_max_reconsume_times(3, None) == 3  # no maxReconsumeTimes in the header
    assert send_back_max_reconsume_times(3, 16, request_version=120) == 3  # older than V3_4_9 (121)


def test_decision():
    assert consumer_send_msg_back("G", 2, 3).level == 5  # 3 + reconsumeTimes
    d = consumer_send_msg_back("G", 3, 3)
    assert (d.action, d.topic) == ("dlq", "%DLQ%G")
    assert consumer_send_msg_back("G", 0, 16, delay_level=-1).action == "dlq"  # the proxy's forward
    assert consumer_send_msg_back("G", 0, 16, retry_queue_nums=0).action == "drop"


def test_pop_request_rules():
    from mqtool.rules import pop

    # ckMessageNumber 15 -> revive queue 7 of 8; every request advances it
    assert pop.revive_queue_id(15, 8) == 7 and pop.revive_queue_id(0, 8) == 0
    assert pop.need_retry(19, 20) and not pop.need_retry(20, 20)  # popFromRetryProbability 20
    assert pop.pop_queue_ids(50, 4) == [2, 3, 0, 1]
    assert pop.ck_diffs(5, [5, 6, 9]) == [0, 1, 4]
    # the proxy: maxAttempts = retryMaxTimes + 1; the remoting client drops above its maxReconsumeTimes
    assert pop.filter_message(1, 1) == "MATCH" and pop.filter_message(2, 1) == "TO_DLQ"
    assert not pop.process_pop_result_drops(16, 16) and pop.process_pop_result_drops(17, 16)


def test_remoting_pop_client_delays():
    from mqtool.rules import pop

    assert pop.change_pop_invisible_time(0) == 10_000 and pop.change_pop_invisible_time(3) == 120_000
    assert pop.change_pop_invisible_time(40) == 7_200_000  # past the table: its last level
    assert pop.change_pop_invisible_time(0, delay_level=2) == 60_000
    # at maxReconsumeTimes, by age: 45 s reached level 1 (30 s) -> level 2 (60 s); 5 s none; over 4 h: ack
    assert pop.check_need_ack_or_delay(45_000) == 60_000
    assert pop.check_need_ack_or_delay(5_000) == 0
    assert pop.check_need_ack_or_delay(4 * 3_600_000 + 1) == -1
