"""Construct adapters shared by the formats: each decodes and encodes (both directions)."""

import ipaddress

from construct import Adapter, Bytes, Int32sb, Struct

from mqtool.formats.record_layout import host_bytes


class HostAdapter(Adapter):
    """A socket address (address bytes + 4-byte port) as `ip:port`, IPv6 as `[v6]:port` (spec §2.4)."""

    def _decode(self, obj, context, path):
        ip = ipaddress.ip_address(bytes(obj.address))
        return f"[{ip}]:{obj.port}" if ip.version == 6 else f"{ip}:{obj.port}"

    def _encode(self, obj, context, path):
        host, _, port = obj.rpartition(":")
        return {"address": ipaddress.ip_address(host.strip("[]")).packed, "port": int(port)}


def host(address_bytes: int) -> HostAdapter:
    """A host field of 4 (IPv4) or 16 (IPv6) address bytes plus an int port."""
    return HostAdapter(Struct("address" / Bytes(address_bytes), "port" / Int32sb))


ipv4_host = host(4)
ipv6_host = host(16)


__all__ = ["HostAdapter", "host", "host_bytes", "ipv4_host", "ipv6_host"]
