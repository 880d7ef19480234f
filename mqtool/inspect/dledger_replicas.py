"""DLedger groups in the `replicas` view (placeholder until the entry comparison lands)."""

from mqtool.store.findings import Findings


def dledger_group(members, stores, findings: Findings) -> dict:
    return {"nodes": []}
