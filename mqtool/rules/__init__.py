"""Pure broker rules: one function per RocketMQ method, no I/O, no clock."""
