"""Keeps credentials out of the artifacts directory a pipeline uploads.

ansible-runner writes the whole process environment (CI tokens included) and the command line
(with every -e value) to its artifacts; gpufleet runs it in a private temporary directory and copies
only the events and output into --artifacts. As a second line, every file that ends up there is
scrubbed of the values of secret-looking environment variables and -e variables, and of passwords
inside URLs: a URL's userinfo is everything between `scheme://` and the *last* `@` of its authority
(curl, pip and apt split there too, so a password may itself hold `@`), and both
`scheme://user:PASSWORD@host` and token-only `scheme://TOKEN@host` are masked. One URL masker also
masks the values of secret-named query parameters (token, access_token, key, password, secret, sig,
signature, X-Amz-Signature, X-Amz-Credential, ...): pre-signed and token URLs carry them there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote_plus

MASK = "<hidden>"
# Names of variables whose values are credentials (CI_JOB_TOKEN, AWS_SECRET_ACCESS_KEY, mirror_password,
# GITHUB_TOKEN, proxy_auth, vault_pass, ...).
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASS(WORD|WD|PHRASE)?($|_)|_PASS|CREDENTIAL|AUTH|API_?KEY|PRIVATE|COOKIE|SESSION|"
                         r"(^|_)KEY($|_)", re.IGNORECASE)
# scheme:// then the authority, up to the first character that ends it ('/', '?', '#') or ends the
# text it is quoted in (whitespace, quotes, a backslash of a JSON escape, brackets); then the path and
# the query string, which end there too.
_URL_END = r"\s'\"\\<>()\[\]{}"
URL = re.compile(rf"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<authority>[^/?#{_URL_END}]+)"
                 rf"(?P<path>[^?#{_URL_END}]*)(?:\?(?P<query>[^#{_URL_END}]*))?")
# Query parameters whose values are credentials: the secret-looking names above, and the signatures of
# pre-signed URLs (S3's X-Amz-Signature, GCS's X-Goog-Signature, Azure SAS's sig, Signature).
SECRET_QUERY_NAME = re.compile(r"(^|[-_])(SIG|SIGNATURE)$", re.IGNORECASE)
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


def _secret_query_name(name: str) -> bool:
    name = unquote_plus(name)
    return bool(SECRET_NAME.search(name) or SECRET_QUERY_NAME.search(name))


def _query_secrets(query: str | None) -> list[tuple[int, int]]:
    """(start, end) within `query` of every secret-named parameter's value."""
    spans, offset = [], 0
    for part in (query or "").split("&"):
        name, equals, value = part.partition("=")
        if equals and value and _secret_query_name(name):
            start = offset + len(name) + 1
            spans.append((start, start + len(value)))
        offset += len(part) + 1
    return spans


def _mask_url(match: re.Match) -> str:
    """The URL with its userinfo's secret and its secret-named query values replaced by MASK."""
    authority = match.group("authority")
    found = _userinfo(authority)
    if found is not None:
        user = found[0]
        authority = f"{user + ':' if user else ''}{MASK}@{authority.rpartition('@')[2]}"
    url = match.group("scheme") + authority + match.group("path")
    query = match.group("query")
    if query is None:
        return url
    masked, last = "", 0
    for start, end in _query_secrets(query):
        masked += query[last:start] + MASK
        last = end
    return f"{url}?{masked}{query[last:]}"


def url_secrets(text: str) -> list[str]:
    """The passwords and tokens of the URLs in `text` (userinfo and secret-named query values), so that
    they are removed wherever else they appear."""
    found = []
    for match in URL.finditer(text):
        userinfo = _userinfo(match.group("authority"))
        candidates = [userinfo[1]] if userinfo else []
        query = match.group("query") or ""
        candidates += [query[start:end] for start, end in _query_secrets(query)]
        found += [secret for secret in candidates if len(secret) >= MIN_SECRET_LENGTH]
    return found


def scrub_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return URL.sub(_mask_url, text)


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
