# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""Parse an iperf3 client's JSON report (``iperf3 -c HOST -J``) into plain data.

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import.

The figure is what the receiver got: ``end.sum_received.bits_per_second`` (iperf3 3.x), in Gb/s
(10^9 bits). The sender's figure is kept beside it. iperf3 reports its own failures in the document's
``error`` key ("unable to connect to server: Connection refused") and then has no ``end`` sums.
"""

from __future__ import annotations

import json


def parse_iperf3_json(text):
    """``{gbps, sender_gbps, seconds, retransmits, local, remote, version, error}``.

    ``gbps`` is None whenever the document is not iperf3 JSON, carries an error, or has no received
    sum: a missing figure is never a zero and never a pass.
    """
    try:
        doc = json.loads(text or "")
    except ValueError:
        return _empty("not iperf3 JSON: %r" % (text or "")[:200])
    if not isinstance(doc, dict):
        return _empty("not an iperf3 JSON object: %r" % (text or "")[:200])
    start = doc.get("start") or {}
    end = doc.get("end") or {}
    received = end.get("sum_received") or {}
    sent = end.get("sum_sent") or {}
    connected = (start.get("connected") or [{}])[0] if start.get("connected") else {}
    error = doc.get("error")
    bps = received.get("bits_per_second")
    if bps is None and error is None:
        error = "iperf3 reported no received sum"
    return {
        "gbps": None if (error or bps is None) else bps / 1e9,
        "sender_gbps": sent.get("bits_per_second") / 1e9 if sent.get("bits_per_second") is not None else None,
        "seconds": received.get("seconds"),
        "retransmits": sent.get("retransmits"),
        "local": connected.get("local_host"),
        "remote": connected.get("remote_host"),
        "version": start.get("version"),
        "error": error,
    }


def _empty(error):
    return {"gbps": None, "sender_gbps": None, "seconds": None, "retransmits": None, "local": None,
            "remote": None, "version": None, "error": error}
