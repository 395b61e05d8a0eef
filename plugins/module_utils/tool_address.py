# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""An address handed to a tool's command line (perftest's and iperf3's server and bind addresses).

PRIVATE to the gpufleet.cluster collection; no AnsibleModule import. perftest takes the server's address as
a bare argument and iperf3 after -c/-B: a value starting with ``-`` would be read as an option (``-h``,
``--run_infinitely``), so only an IP address or a host name as RFC 1123 allows is handed on.
"""

from __future__ import annotations

import ipaddress
import re

# RFC 1123 section 2.1: letters, digits and hyphens, a label may start with a digit, never with or end in a hyphen.
_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def _is_ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def address_problem(value):
    """Why ``value`` is not an IP address or an RFC 1123 host name, or None when it is one."""
    if not isinstance(value, str) or not value:
        return "empty or not text"
    if value.startswith("-"):
        return "it starts with '-', which the tool would read as an option"
    if _is_ip(value):
        return None
    name = value[:-1] if value.endswith(".") else value
    if len(name) > 253:
        return "a host name is at most 253 characters"
    labels = name.split(".")
    bad = [label for label in labels if not _LABEL.match(label)]
    if bad:
        return "label %r is not letters, digits and inner hyphens of 1 to 63 characters" % bad[0]
    if all(label.isdigit() for label in labels):
        return "digits and dots only, but not an IP address"
    return None


def check_address(value, what):
    """Raise ValueError naming ``what`` and the value unless it is an IP address or an RFC 1123 host name."""
    problem = address_problem(value)
    if problem:
        raise ValueError("%s %r is not an IP address or a host name (RFC 1123): %s; give the node's address"
                         % (what, value, problem))


def check_test_addresses(test):
    """The addresses of one planned bandwidth test: the server's, and the client's bind address when set."""
    check_address(test.get("server_address"), "server_address")
    if test.get("bind") is not None:
        check_address(test["bind"], "bind")
