"""Keeps credentials out of the artifacts directory a pipeline uploads.

ansible-runner writes the whole process environment (CI tokens included) and the command line
(with every -e value) to its artifacts; gpufleet runs it in a private temporary directory and copies
only the events and output into --artifacts. As a second line, every file that ends up there is
scrubbed of the values of secret-looking environment variables and -e variables, and of passwords
inside URLs: a URL's userinfo is everything between `scheme://` and the *last* `@` of its authority
(curl, pip and apt split there too, so a password may itself hold `@`), and both
`scheme://user:PASSWORD@host` and token-only `scheme://TOKEN@host` are masked.
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
# scheme:// then the authority, up to the first character that ends it ('/', '?', '#') or ends the
# text it is quoted in (whitespace, quotes, a backslash of a JSON escape, brackets).
URL_AUTHORITY = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<authority>[^/?#\s'\"\\<>()\[\]{}]+)")
# Values shorter than this are too likely to occur by chance ("1", "true") to be replaced blindly.
MIN_SECRET_LENGTH = 6


def _leaves(name: str, value, found: list[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _leaves(str(key), item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _leaves(name, item, found)
    elif value is not None:
        text = str(value)
        if SECRET_NAME.search(name) and len(text) >= MIN_SECRET_LENGTH:
            found.append(text)
        found.extend(url_secrets(text))


def secret_values(environ: dict | None = None, extra_vars: dict | None = None) -> list[str]:
    """The values to remove, longest first: secret-named environment and extra variables, and the
    passwords and tokens of every URL in any of them."""
    found: list[str] = []
    for name, value in (os.environ if environ is None else environ).items():
        _leaves(name, value, found)
    _leaves("", extra_vars or {}, found)
    return sorted(set(found), key=len, reverse=True)


def _userinfo(authority: str) -> tuple[str, str] | None:
    """(user, secret) of an authority with userinfo; user is "" for a token-only URL."""
    userinfo, at, _host = authority.rpartition("@")
    if not at or not userinfo:
        return None
    user, colon, password = userinfo.partition(":")
    return (user, password) if colon else ("", userinfo)


def _mask_userinfo(match: re.Match) -> str:
    authority = match.group("authority")
    found = _userinfo(authority)
    if found is None:
        return match.group(0)
    user, _secret = found
    host = authority.rpartition("@")[2]
    return f"{match.group('scheme')}{user + ':' if user else ''}{MASK}@{host}"


def url_secrets(text: str) -> list[str]:
    """The passwords and tokens of the URLs in `text` (so they are removed wherever else they appear)."""
    found = []
    for match in URL_AUTHORITY.finditer(text):
        userinfo = _userinfo(match.group("authority"))
        if userinfo and len(userinfo[1]) >= MIN_SECRET_LENGTH:
            found.append(userinfo[1])
    return found


def scrub_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return URL_AUTHORITY.sub(_mask_userinfo, text)


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
