"""Secret redaction for text crossing the ingress boundary (DESIGN.md invariant 6).

``redact(text)`` replaces every secret it recognises with ``[REDACTED:<kind>]`` and keeps
the surrounding structure (the env key, the URL user and host, the header name and
scheme word), so a later search still sees what the line was about. ``sanitize()`` calls
it on every free-text field before anything leaves ingress.

Rules run in a fixed order, most specific first: vendor formats, then structural slots
(``Authorization:``, URL passwords, high-entropy values in secret slots, ``KEY=value``
with a secret-looking key). A value that already holds a marker is never touched again,
so ``redact`` is idempotent. Each regex starts at a token boundary and uses possessive or
bounded quantifiers, so the cost is linear in ``len(text)``. Pure stdlib, no I/O, safe
on any thread.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

__all__ = ["KINDS", "RedactResult", "contains_secret", "redact"]

KINDS = (
    "private_key", "gcp_service_account_key", "slack_webhook", "jwt", "aws_access_key",
    "aws_secret_key", "gcp_api_key", "azure_storage_key", "azure_connection_string",
    "github_token", "gitlab_token", "slack_token", "stripe_key", "anthropic_key",
    "openai_key", "authorization_header", "url_password", "high_entropy", "env_secret",
)  # fmt: skip

ENTROPY_MIN_BITS = 3.5  # Shannon bits/char for a `high_entropy` value
ENTROPY_MIN_LEN = 20

_MARKER = re.compile(r"\[REDACTED:[a-z_]{1,40}\]")

# PEM: header lines (Proc-Type, DEK-Info, Version) only at a line start, then base64,
# whitespace and JSON-escaped newlines. No '-' in the body, so it stops at the END line.
_PEM = (
    r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
    r"(?P<body>(?:(?:(?<=\n)|(?<=\\n))[A-Z][A-Za-z-]{1,30}: [^\n\\\"]{0,200}"
    r"|\\[nr]|[A-Za-z0-9+/=\s])*+)"
    r"(?:-----END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----(?:\\n)*+)?"
)
_GCP_SA = re.compile(r'"private_key"[ \t]{0,8}:[ \t]{0,8}"(?P<s>' + _PEM + ")")
_PRIVATE_KEY = re.compile("(?P<s>" + _PEM + ")")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/]{32}")

_SLACK_WEBHOOK = re.compile(
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{8,}+)"
)
_JWT = re.compile(r"(?<![\w-])(?P<s>eyJ[\w-]{8,}+\.eyJ[\w-]{8,}+\.[\w-]*+)")
_AWS_ACCESS = re.compile(
    r"(?<![A-Za-z0-9])(?P<s>(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|A3T[A-Z0-9])"
    r"[A-Z0-9]{16})(?![A-Za-z0-9])"
)
_AWS_SECRET = re.compile(
    r"(?i:(?:aws_?)?secret_?access_?key|aws_?secret_?key)[\"']?[ \t]{0,4}(?:=>|[=:])[ \t]{0,4}"
    r"[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_GCP_API = re.compile(r"(?<![\w-])(?P<s>AIza[\w-]{35})(?![\w-])")
_AZURE_KEY = re.compile(r"(?i:AccountKey)[ \t]{0,4}=[ \t]{0,4}(?P<s>[A-Za-z0-9+/]{20,}+={0,2})")
_AZURE_CONN = re.compile(
    r"(?i:SharedAccessKey|SharedAccessSignature)[ \t]{0,4}=[ \t]{0,4}(?P<s>[^;\"'\s]{8,}+)"
)
_GITHUB = re.compile(
    r"(?<![\w-])(?P<s>gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_\w{22,}+)(?![\w-])"
)
_GITLAB = re.compile(
    r"(?<![\w-])(?P<s>gl(?:pat|dt|rt|ptt|ft|imt|soat|cbt)-[\w-]{20,}+(?:\.[\w-]{2,}+){0,3})"
)
_SLACK_TOKEN = re.compile(r"(?<![\w-])(?P<s>(?:xox[abposer]|xapp)-[A-Za-z0-9-]{10,}+)")
_STRIPE = re.compile(r"(?<![\w-])(?P<s>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}+|whsec_[A-Za-z0-9]{16,}+)")
_ANTHROPIC = re.compile(r"(?<![\w-])(?P<s>sk-ant-[a-z0-9]{2,12}-[\w-]{20,}+)")
_OPENAI = re.compile(r"(?<![\w-])(?P<s>sk-(?:proj-|svcacct-|admin-)?[\w-]{20,}+)")

_AUTH_SCHEMES = ("bearer", "basic", "token", "digest", "bot", "apikey", "key", "negotiate")
_AUTH_HEADER = re.compile(
    r"(?i:(?<![\w-])(?P<h>(?:proxy-)?authorization|x-api-key|api-key|x-auth-token|x-access-token"
    r"|x-goog-api-key|private-token|x-vault-token|x-gitlab-token)[\"']?[ \t]{0,4}[:=][ \t]{0,4}"
    r"[\"']?(?P<scheme>(?:" + "|".join(_AUTH_SCHEMES) + r")[ \t]{1,4}+)?)"
    r"(?P<s>[A-Za-z0-9._~+/=:-]{8,}+)"
)
# scheme://user:pass@host — the password may itself hold '@'; the last '@' wins.
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}+://[^\s:/?#@\[\]\"'<>]{0,256}+:"
    r"(?P<s>[^\s@/?#\"'<>]{1,256}+(?:@[^\s@/?#\"'<>]{1,256}+)*)@"
)
_HIGH_ENTROPY = re.compile(
    r"(?:(?i:(?<![\w-])--(?:password|passwd|pass|token|secret|api-?key|auth-token|access-token"
    r"|client-secret|key)(?:=|[ \t]{1,4}+))"
    r"|(?<!\S)-p(?=[^\s-])"
    r"|(?i:[?&;](?:key|api_?key|token|access_token|auth|sig|signature|secret|password|pass"
    r"|client_secret|private_token|code)=)"
    r"|(?i:(?<![\w.-])[\"']?(?:secret|token|password|passwd|apikey|api_key|api-key|access_token"
    r"|auth_token|client_secret)[\"']?[ \t]{0,4}[=:][ \t]{0,4}[\"']?))"
    r"(?P<s>[^\s\"'&;,<>()\[\]{}|`\\]{20,}+)"
)
# KEY=value / key: value / "key": "value" where the key names a secret. The key must
# contain one of the words, so only plausible keys reach the Python-side checks.
_ENV = re.compile(
    r"(?<![\w.\[\\])(?P<kq>\\?[\"']?)"
    r"(?P<key>[\w.-]{0,40}?(?i:passw(?:or)?d|secret(?!ar)|token(?!i[sz])|api[_.-]?key"
    r"|access[_.-]?key|private[_.-]?key|credential|auth(?!or(?!iz)))[\w.-]{0,40}+)(?P=kq)"
    r"(?P<sep>[ \t]{0,4}+(?::=|=>|=(?!=)|:(?![:/]))[ \t]{0,4}+)"
    r"(?:(?P<pfx>[bBrRuUfF]{0,2})(?:\\\"(?P<eq>(?:[^\"\\\n]|\\[^\"\n])*+)\\\""
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.)*+)\"|'(?P<sq>[^'\n]*+)')"
    r"|(?P<uq>[^\s\"'`,;&|<>(){}\[\]]++)(?![(\[\"']))"
)
_ENV_VALUE_GROUPS = ("eq", "dq", "sq")
_SECRET_WORD = re.compile(
    r"PASSW(?:OR)?D|SECRET(?!AR)|TOKEN(?!I[SZ])|APIKEY|ACCESSKEY|PRIVATEKEY|CREDENTIAL|AUTH(?!OR(?!IZ))"
)
# A key naming *metadata about* a secret (TOKEN_EXPIRY, AUTH_URL, SECRET_NAME) is not one.
_BENIGN_SUFFIXES = tuple(
    "_" + s
    for s in (
        "URL URI ENDPOINT HOST PORT PATH FILE DIR TYPE EXPIRY EXPIRES EXPIRES_IN EXPIRES_AT "
        "EXPIRATION TTL TIMEOUT LENGTH LEN NAME ID PREFIX FORMAT ENABLED REQUIRED METHOD "
        "PROVIDER MODE LIMIT COUNT SIZE VERSION ALGORITHM ALG SCOPE SCOPES FIELD POLICY"
    ).split()
)
_PLACEHOLDER = re.compile(
    r"\$\{?[\w:.-]*\}?|\$\{\{.*\}\}|\$\(.*\)|\{\{.*\}\}|<[^<>]*>|%\(\w+\)s|%s|\*+|x{3,}|\.{3}|…"
    r"|none|null|nil|true|false|yes|no|on|off|undefined|bearer|basic|digest|token|\d{1,7}"
    r"|include|omit|same-origin"
    r"|[\w.-]*redacted[\w.-]*",
    re.IGNORECASE,
)
_IDENT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_WORDY = re.compile(r"[A-Za-z_.]+")
_LINE_LEAD = re.compile(r"[ \t]*(?:-[ \t]+|export[ \t]+)?")
_TYPE_NAMES = frozenset("str bytes int float bool string number boolean any object dict list".split())


@dataclass(frozen=True, slots=True)
class RedactResult:
    """Redacted text and the kinds found (sorted, unique; empty when nothing changed)."""

    text: str
    kinds: tuple[str, ...]


def redact(text: str) -> RedactResult:
    """Replace every recognised secret in ``text`` with ``[REDACTED:<kind>]``.

    Args:
        text: any string (code, logs, JSON, CJK, NUL bytes); never raises on a ``str``.

    Returns:
        ``RedactResult(text, kinds)``: ``kinds`` is a sorted tuple of unique names from
        ``KINDS``. Idempotent: redacting the output again changes nothing. Time is linear
        in ``len(text)`` (about 20 regex passes); no side effects.
    """
    found: set[str] = set()
    for kind, pattern, decide in _RULES:
        text = pattern.sub(partial(_replace, kind, decide, found), text)
    return RedactResult(text, tuple(sorted(found)))


def contains_secret(text: str) -> bool:
    """Return True iff ``redact(text)`` would change ``text``."""
    return redact(text).text != text


def _replace(kind: str, decide: Callable[[re.Match[str]], bool], found: set[str], m: re.Match[str]) -> str:
    """Swap the value group of ``m`` for a marker when ``decide`` accepts it; else keep ``m``."""
    name = "s" if m.re is not _ENV else next((g for g in _ENV_VALUE_GROUPS if m.group(g) is not None), "uq")
    value = m.group(name)
    if not value or _MARKER.search(value) or not decide(m):
        return m.group(0)
    found.add(kind)
    start, end = m.span(name)
    return f"{m.string[m.start():start]}[REDACTED:{kind}]{m.string[end:m.end()]}"


def _entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _always(m: re.Match[str]) -> bool:
    return True


def _pem_ok(m: re.Match[str]) -> bool:
    """A BEGIN line followed by real key material, not code that mentions the marker."""
    return _KEY_BODY.search(m.group("body")) is not None


def _openai_ok(m: re.Match[str]) -> bool:
    # "sk-" is a common prefix; only a random-looking body is a key.
    return _entropy(m.group("s")) >= ENTROPY_MIN_BITS


def _header_ok(m: re.Match[str]) -> bool:
    value = m.group("s")
    if value.lower() in _AUTH_SCHEMES or _PLACEHOLDER.fullmatch(value):
        return False
    # "Authorization: <value>" without a scheme word: only a token-length value counts.
    return bool(m.group("scheme")) or not m.group("h").lower().endswith("authorization") or len(value) >= 16


def _url_ok(m: re.Match[str]) -> bool:
    return _PLACEHOLDER.fullmatch(m.group("s")) is None


def _high_entropy_ok(m: re.Match[str]) -> bool:
    value = m.group("s")
    if _PLACEHOLDER.fullmatch(value) or "://" in value or value.startswith(("/", "./", "../", "~")):
        return False
    return _entropy(value) >= ENTROPY_MIN_BITS


def _norm_key(key: str) -> str:
    """``dbPassword`` / ``db-password`` / ``DB.PASSWORD`` -> ``DB_PASSWORD``."""
    key = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key.strip("-_."))
    return key.upper().replace("-", "_").replace(".", "_")


def _names_secret(name: str) -> bool:
    """True when an identifier-shaped ``name`` contains a secret word (PASSWORD, TOKEN, ...)."""
    return _IDENT.fullmatch(name.replace("-", "_")) is not None and bool(
        _SECRET_WORD.search(_norm_key(name).replace("_", ""))
    )


def _at_line_start(m: re.Match[str]) -> bool:
    """True when only indentation, ``- `` or ``export `` precede the key on its line."""
    s, i = m.string, m.start()
    lo = max(0, i - 40)  # bounded look-back keeps the scan linear
    nl = s.rfind("\n", lo, i)
    if nl < 0 and lo > 0:
        return False
    return _LINE_LEAD.fullmatch(s, nl + 1, i) is not None


def _env_ok(m: re.Match[str]) -> bool:
    """Decide whether a secret-named key's value is a literal secret, not code or metadata."""
    key = _norm_key(m.group("key"))
    if key.endswith(_BENIGN_SUFFIXES) or not _names_secret(key):
        return False
    quoted = next((m.group(g) for g in _ENV_VALUE_GROUPS if m.group(g) is not None), None)
    value = quoted if quoted is not None else m.group("uq")
    has_digit = any(c.isdigit() for c in value)
    if _PLACEHOLDER.fullmatch(value.strip()) or (_names_secret(value) and not has_digit):
        return False  # "${TOKEN}", "<your-token>", or a field name such as "password"
    if quoted is not None:
        return not ("f" in m.group("pfx").lower() and "{" in quoted)  # f"Bearer {token}"
    if _IDENT.fullmatch(value) and (
        ("." in value and not has_digit) or m.string[m.end() : m.end() + 1] in (",", ")")
    ):
        return False  # settings.token, or a keyword argument f(token=tok)
    if m.group("sep") == "=":
        return True  # KEY=value: .env line, shell assignment or --flag=value
    if has_digit or not _WORDY.fullmatch(value):
        return True
    # "password: hunter" as a YAML line; not "auth: failed" in a log or "token: Token" in code.
    is_type = value.lower() in _TYPE_NAMES or (value[0].isupper() and value.isidentifier())
    return m.group("sep").strip() == ":" and _at_line_start(m) and not is_type


_Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool]]
_RULES: tuple[_Rule, ...] = (
    ("gcp_service_account_key", _GCP_SA, _pem_ok),
    ("private_key", _PRIVATE_KEY, _pem_ok),
    ("slack_webhook", _SLACK_WEBHOOK, _always),
    ("jwt", _JWT, _always),
    ("aws_access_key", _AWS_ACCESS, _always),
    ("aws_secret_key", _AWS_SECRET, _always),
    ("gcp_api_key", _GCP_API, _always),
    ("azure_storage_key", _AZURE_KEY, _always),
    ("azure_connection_string", _AZURE_CONN, _always),
    ("github_token", _GITHUB, _always),
    ("gitlab_token", _GITLAB, _always),
    ("slack_token", _SLACK_TOKEN, _always),
    ("stripe_key", _STRIPE, _always),
    ("anthropic_key", _ANTHROPIC, _always),
    ("openai_key", _OPENAI, _openai_ok),
    ("authorization_header", _AUTH_HEADER, _header_ok),
    ("url_password", _URL_PASSWORD, _url_ok),
    ("high_entropy", _HIGH_ENTROPY, _high_entropy_ok),
    ("env_secret", _ENV, _env_ok),
)
