"""Keeps credentials out of the artifacts directory a pipeline uploads.

ansible-runner writes the whole process environment (CI tokens included) and the command line
(with every -e value) to its artifacts; gpufleet runs it in a private temporary directory and copies
only the events and output into --artifacts. As a second line, every file that ends up there is
scrubbed of the values of secret-looking environment variables and -e variables, and of passwords
inside URLs (proxy and mirror URLs of the form scheme://user:password@host).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

MASK = "<hidden>"
# Names of variables whose values are credentials (CI_JOB_TOKEN, AWS_SECRET_ACCESS_KEY, mirror_password,
# GITHUB_TOKEN, proxy_auth, vault_pass, ...).
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASS(WORD|WD|PHRASE)?($|_)|_PASS|CREDENTIAL|AUTH|API_?KEY|PRIVATE|COOKIE|SESSION|"
                         r"(^|_)KEY($|_)", re.IGNORECASE)
URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@'\"]+:)(?P<password>[^@\s/'\"]+)(?=@)")
# Values shorter than this are too likely to occur by chance ("1", "true") to be replaced blindly.
MIN_SECRET_LENGTH = 6


def _leaves(name: str, value, found: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _leaves(str(key), item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _leaves(name, item, found)
    elif value is not None and SECRET_NAME.search(name):
        text = str(value)
        if len(text) >= MIN_SECRET_LENGTH:
            found.append(text)


def secret_values(environ: dict | None = None, extra_vars: dict | None = None) -> list[str]:
    """The values to remove: secret-named environment and extra variables, longest first."""
    found: list[str] = []
    for name, value in (os.environ if environ is None else environ).items():
        _leaves(name, value, found)
    _leaves("", extra_vars or {}, found)
    return sorted(set(found), key=len, reverse=True)


def scrub_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def scrub_tree(directory: Path, secrets: list[str]) -> int:
    """Scrubs every text file under `directory` in place; returns how many files changed."""
    changed = 0
    for path in directory.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        clean = scrub_text(text, secrets)
        if clean != text:
            path.write_text(clean, encoding="utf-8")
            changed += 1
    return changed
