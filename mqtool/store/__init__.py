"""A read-only model of a RocketMQ store directory: files found, records read, problems as findings."""
