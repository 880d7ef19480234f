"""Broker rules: each rule RocketMQ implements once, implemented once here, as a pure function."""
