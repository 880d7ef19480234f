"""mqtool: open an Apache RocketMQ store offline, decode it exactly, explain it, replay its services."""

__version__ = "0.1.0"
