"""Secret redaction for text crossing the ingress boundary (DESIGN.md invariant 6).

``redact(text)`` replaces every secret it recognises with ``[REDACTED:<kind>]`` and keeps
the surrounding structure (the env key, the URL user and host, the header name and
scheme word), so a later search still sees what the line was about. ``sanitize()`` calls
it on every free-text field before anything leaves ingress.

Rules run in a fixed order, most specific first: vendor formats, then structural slots
(``Authorization:``, URL passwords, high-entropy values in secret slots, ``KEY=value``
with a secret-looking key). A value that already holds a marker is never touched again,
and the rules repeat until the text stops changing (a redaction can change what an
earlier rule sees), so ``redact`` is idempotent. A rule runs only when one of its trigger
substrings occurs outside a marker (each trigger is looked for once per round); its regex opens with a literal, uses possessive or
bounded quantifiers and checks token boundaries with fixed-width look-behinds, so the
cost is linear in ``len(text)``. Stdlib regexes and one Aho-Corasick automaton
(``ahocorasick-rs``) for the triggers; no I/O, any thread.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial

import ahocorasick_rs

__all__ = ["KINDS", "RedactResult", "contains_secret", "redact"]

_MAX_PASSES = 4  # redaction rounds; real text settles in one or two (see redact())
ENTROPY_MIN_BITS = 3.5  # Shannon bits/char for a `high_entropy` value (20+ chars, in a slot)

_MARKER = re.compile(r"\[REDACTED:[a-z_]{1,40}\]")

# Every pattern starts with a literal or a plain character class so the regex engine can
# skip ahead in C; a token boundary is a fixed-width lookbehind placed after that literal,
# or a check in the decide function. Case-insensitive word lists are written as a class of
# first letters followed by `(?<=x)` dispatch, because `(?i:...)` first disables the skip.


def _starts_here(n: int, cls: str = r"[\w-]") -> str:
    """Regex asserting the ``n`` chars just matched start a token; a JSON ``\\n`` is a gap."""
    return rf"(?:(?<!{cls}.{{{n}}})|(?<=\\[ntr].{{{n}}}))"


# PEM and PGP armor: header lines (Proc-Type, DEK-Info, Version, Comment) only at a line
# start, then base64, whitespace and JSON-escaped newlines and tabs; no '-' in the body, so
# it stops at the END line. A line may carry a prefix a tool added: a line number and a tab
# or '→' (`cat -n`, an agent's file reader) or a '> ' quote. Without an END (an excerpt cut
# short) only the key-shaped lines that follow are taken.
_PEM_LABEL = r"(?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
_PEM_HEADER = r"[A-Z][A-Za-z-]{1,30}: (?:[^\n\\\"]|\\++[^nr\n]){0,200}+"
_PEM_LINE_START = r"(?:(?<=\n)|(?<=\\[nt])|(?<=\t)|(?<=→)|(?<=> ))"
_PEM_GAP = r"(?:\s|\\++[nrt]|→|>|\d{1,7}+(?:\t|\\++t|→))++"  # line ends, prefixes
_PEM = (
    r"-----BEGIN " + _PEM_LABEL + r"(?:(?P<body>(?:" + _PEM_LINE_START + _PEM_HEADER
    + r"|\\++[nrt]|[A-Za-z0-9+/=\s>→])*+)-----END " + _PEM_LABEL + r"(?:\\++n)*+"
    + r"|(?P<cut>(?:" + _PEM_GAP + r"(?:" + _PEM_HEADER
    + r"|[A-Za-z0-9+/=]{16,}+|[A-Za-z0-9+/=]++\Z))*+))"
)
_GCP_SA = re.compile(r'private_key\\*"[ \t]{0,8}:[ \t]{0,8}\\*"(?P<s>' + _PEM + ")")
_PRIVATE_KEY = re.compile("(?P<s>" + _PEM + ")")
_KEY_BODY = re.compile(r"[A-Za-z0-9+/]{32}")

_SLACK_WEBHOOK = re.compile(
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{8,}+)"
)
_JWT = re.compile(r"(?P<s>eyJ" + _starts_here(3) + r"[\w-]{8,}+\.eyJ[\w-]{8,}+\.[\w-]*+)")
_AWS_ACCESS = re.compile(
    r"(?P<s>(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|A3T[A-Z0-9])"
    + _starts_here(4, "[A-Za-z0-9]")
    + r"[A-Z0-9]{16})(?![A-Za-z0-9])"
)
_AWS_SECRET = re.compile(  # `key = v`, `key: v`, and the credentials-file/CLI form `key v`
    r"[SsAa](?i:(?<=s)ecret_?access_?key|(?<=a)ws_?secret_?key)"
    r"\\*[\"']?(?:[ \t]{0,4}(?:=>|[=:])[ \t]{0,4}|[ \t]{1,4})\\*[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
# Passwords on command lines, whatever their length (a short one is still a password):
# `curl -u user:pw` / `--user user:pw` (any tool), `--password pw` / `--password=pw`,
# `mysql -p'pw'` / `-ppw` (MySQL family), `-p pw` after `docker|podman|helm ... login` and
# `sshpass`, PGPASSWORD= / MYSQL_PWD= / REDISCLI_AUTH= / SSHPASS=, and `.netrc` lines;
# `curl -uuser:pw` needs no space. Tool-specific slots follow below.
_VAL = (r"(?:'(?P<sq>[^'\n]{1,256}+)'|\\*+\"(?P<dq>[^\"\\\n]{1,256}+)\\*+\""
        r"|(?P<uq>[^\s'\"`;|&<>()\\]{1,256}+))")
_CLI_PASSWORD = re.compile(
    r"[-MmPpRrSs](?:"
    r"(?<=-)(?:u(?<![\w-]-u)(?:=|[ \t]{0,4}+)|(?:-user|a|-auth)(?<![\w-]-a)(?<![\w-]--user)(?<![\w-]--auth)"
    r"(?:[ \t]{1,4}+|=))"
    r"[\"']?[^\s:'\"]{1,128}+:(?P<up>[^\s'\"]{1,256}+)"
    r"|(?<=-)-(?i:password|passwd|pass)(?<![\w-]--password)(?<![\w-]--passwd)(?<![\w-]--pass)(?:[ \t]{1,4}+|=)"
    + _VAL +
    r"|(?<=[Mm])(?i:ysql(?:dump|admin|import|check)?|ariadb(?:-dump)?)\b[^\n]{0,200}?[ \t]-p" + _VAL.replace("?P<", "?P<m") +
    r"|(?<=[Ss])shpass[ \t]{1,4}+-p[ \t]{0,4}+" + _VAL.replace("?P<", "?P<s") +
    r"|(?<=[Rr])edis-cli\b[^\n]{0,200}?[ \t]-a[ \t]{1,4}+" + _VAL.replace("?P<", "?P<a") +
    r"|(?<=[Pp])(?:GPASSWORD|ASSWORD)=(?<![\w]PASSWORD=)" + _VAL.replace("?P<", "?P<g") +
    r"|(?<=[MmRr])(?:YSQL_PWD|EDISCLI_AUTH)=" + _VAL.replace("?P<", "?P<r") +
    r"|(?<=S)SHPASS=" + _VAL.replace("?P<", "?P<e") +
    r")"
)
_LOGIN_P = re.compile(
    r"(?i:docker|podman|nerdctl|helm|oras|skopeo|buildah|(?<![\w-])az|(?<=\\[ntr])az)\b[^\n]{0,120}?\blogin\b[^\n]{0,200}?"
    r"[ \t](?:-p|--password)(?:[ \t]{1,4}+|=)" + _VAL
)

def _tool_val(prefix: str) -> str:
    """``_VAL`` with its groups renamed (one pattern cannot repeat a group name)."""
    return _VAL.replace("?P<", f"?P<{prefix}")


# Tool-specific password slots; `[^\n;|&]` keeps the flag in the same command as the tool.
_CMD = r"\b[^\n;|&]{0,200}?[ \t]"
_TOOL_PASSWORD = re.compile(
    r"(?:sqlcmd|bcp|osql)" + _CMD + r"-P[ \t]{0,4}+" + _tool_val("q")  # SQL Server
    + r"|ldap[a-z]{2,12}+" + _CMD + r"-w[ \t]{0,4}+" + _tool_val("l")  # -W prompts
    + r"|(?:un)?zip(?:cloak)?" + _CMD + r"-P[ \t]{1,4}+" + _tool_val("z")
    + r"|7z[ar]?" + _CMD + r"-p" + _tool_val("s")  # 7-Zip: `-ppw`, no space; bare -p prompts
    + r"|(?:smb[a-z]{0,10}+|rpcclient|mount\.cifs)" + _CMD
    + r"(?:-U|--user(?:name)?=?)[ \t]{0,4}+[\"']?[^\s%'\"]{1,128}+%" + _tool_val("b")  # user%pw
)
# keytool / jarsigner `-storepass pw` (`-storepass:env VAR` and `:file` name no secret),
# openssl `-passin pass:pw` (`env:VAR`, `file:path`, `fd:N`, `stdin` name no secret).
_PASS_FLAG = re.compile(
    r"-(?<![\w-].)(?:(?:src|dest|new)?(?:store|key)pass[ \t]{1,4}+"
    r"|(?:passin|passout|pass|password)[ \t]{1,4}+[\"']?pass:)" + _VAL
)
# `htpasswd -b[c|n|B..] [file] user pw`: with -n no file argument comes first.
_HTPASSWD = re.compile(
    r"htpasswd(?P<ho>(?:[ \t]{1,4}+-(?:[A-Za-z]{0,8}?(?P<hn>n)[A-Za-z]{0,8}+|[A-Za-z]{1,8}+)"
    r"(?:[ \t]{1,4}+\d{1,3}+)?){1,4})[ \t]{1,4}+(?(hn)|[^\s;|&<>]{1,256}+[ \t]{1,4}+)"
    r"[^\s;|&<>-][^\s;|&<>]{0,255}+[ \t]{1,4}+" + _VAL
)
# A password piped or fed to a tool that reads it from stdin: `echo pw | docker login
# --password-stdin`, `echo pw | sudo -S cmd`, `sudo -S cmd <<< pw`.
_STDIN_PASSWORD = re.compile(
    r"(?:echo|printf)[ \t]{1,4}+(?:-[neE]{1,3}+[ \t]{1,4}+)?" + _VAL
    + r"(?=[ \t]{0,4}+\|[ \t]{0,4}+(?:[^\n;|&]{0,200}?--password-stdin|sudo[ \t]{1,4}+(?:-[A-Za-z]*S\b)))"
    + r"|sudo[ \t]{1,4}+(?:-[A-Za-z]*S\b)[^\n;|&<]{0,200}?<<<[ \t]{0,4}+" + _tool_val("h")
)
# A credential prompt echoed into output: git's `Password for 'https://user@host': pw`.
_PROMPT_PASSWORD = re.compile(r"Password for '[^'\n]{1,256}+':[ \t]{1,4}+(?P<uq>[^\s\\]{1,256}+)")
_NETRC = re.compile(
    r"(?i:machine|default)\b(?s:.{0,300}?)(?:\s|\\n){1,8}+(?i:password)[ \t]{1,8}+(?P<uq>[^\s\\]{1,256}+)"
)
_GCP_API = re.compile(r"(?P<s>AIza" + _starts_here(4) + r"[\w-]{35})(?![\w-])")
_AZURE_KEY = re.compile(r"(?i:AccountKey)[ \t]{0,4}=[ \t]{0,4}(?P<s>[A-Za-z0-9+/]{20,}+={0,2})")
_AZURE_CONN = re.compile(
    r"(?i:SharedAccessKey|SharedAccessSignature)[ \t]{0,4}=[ \t]{0,4}(?P<s>[^;\"'\s]{8,}+)"
)
_GITHUB = re.compile(
    r"(?P<s>gh[pousr]_" + _starts_here(4) + r"[A-Za-z0-9]{36,}+"
    r"|github_pat_" + _starts_here(11) + r"\w{22,}+)(?![\w-])"
)
_GITLAB = re.compile(
    r"(?P<s>gl" + _starts_here(2)
    + r"(?:pat|dt|rt|ptt|ft|imt|soat|cbt)-[\w-]{20,}+(?:\.[\w-]{2,}+){0,3})"
)
_SLACK_TOKEN = re.compile(
    r"(?P<s>x" + _starts_here(1) + r"(?:ox[abposer]|app)-[A-Za-z0-9-]{10,}+)"
)
_STRIPE = re.compile(
    r"(?P<s>[sr]k_" + _starts_here(3) + r"(?:live|test)_[A-Za-z0-9]{16,}+"
    r"|whsec_" + _starts_here(6) + r"[A-Za-z0-9]{16,}+)"
)
_ANTHROPIC = re.compile(r"(?P<s>sk-ant-" + _starts_here(7) + r"[a-z0-9]{2,12}-[\w-]{20,}+)")
_OPENAI = re.compile(r"(?P<s>sk-" + _starts_here(3) + r"(?:proj-|svcacct-|admin-)?[\w-]{20,}+)")

_AUTH_SCHEMES = ("bearer", "basic", "token", "digest", "bot", "apikey", "key", "negotiate")
_AUTH_HEADER = re.compile(
    r"(?P<h>[AaPpXx](?i:(?<=a)(?:uthorization|pi-key)|(?<=p)(?:roxy-authorization|rivate-token)"
    r"|(?<=x)-(?:api-key|auth-token|access-token|goog-api-key|vault-token|gitlab-token)))"
    r"\\*[\"']?[ \t]{0,4}[:=][ \t]{0,4}\\*[\"']?"
    r"(?P<scheme>(?i:" + "|".join(_AUTH_SCHEMES) + r")[ \t]{1,4}+)?"
    r"(?P<s>[A-Za-z0-9._~+/=:-]{8,}+)"
)
# scheme://user:pass@host — the password may itself hold '@'; the last '@' wins.
_URL_PASSWORD = re.compile(
    r"://[^\s:/?#@\[\]\"'<>]{0,256}+:(?P<s>[^\s@/?#\"'<>\[]{1,256}+(?:@[^\s@/?#\"'<>]{1,256}+)*)@"
)
_HIGH_ENTROPY = re.compile(
    r"[-?&;SsTtPpAaCc](?:(?<=-)(?:-(?<![\w-]--)(?i:password|passwd|pass|token|secret|api-?key"
    r"|auth-token|access-token|client-secret|key)(?:=|[ \t]{1,4}+)|p(?<!\S-p)(?=[^\s-]))"
    r"|(?<=[?&;])(?i:key|api_?key|token|access_token|auth|sig|signature|secret|password|pass"
    r"|client_secret|private_token|code)="
    r"|(?P<bare>(?i:(?<=s)ecret|(?<=t)oken|(?<=p)assw(?:or)?d|(?<=a)(?:pi[_-]?key|ccess_token"
    r"|uth_token)|(?<=c)lient_secret))[\"']?[ \t]{0,4}[=:][ \t]{0,4}[\"']?)"
    r"(?P<s>[^\s\"'&;,<>()\[\]{}|`\\]{20,}+)"
)
# KEY=value / key: value / "key": "value" where the key names a secret. The match starts
# at the secret word; _env_ok finds the start of the key (at most 40 characters back).
_ENV = re.compile(
    r"(?P<key>[PpSsTtAaCc](?i:(?<=p)(?:assw(?:or)?d|rivate[_.-]?key)|(?<=s)ecret(?!ar)"
    r"|(?<=t)oken(?!i[sz])|(?<=a)(?:pi[_.-]?key|ccess[_.-]?key|uth(?!or(?!iz)))|(?<=c)redential)"
    r"[\w.-]{0,40}+)(?P<kq>\\*+[\"']?)(?P<br>(?<=[\"'])\])?"
    r"(?P<sep>[ \t]{0,4}+(?::=|=>|=(?!=)|:(?![:/]))[ \t]{0,4}+)"
    r"(?:(?P<pfx>[bBrRuUfF]{0,2})(?!\\*.\[REDACTED:)"
    r"(?:(?P<vq>\\+)\"(?P<eq>(?:[^\"\\\n]|\\++(?!\"))*+)(?P=vq)\""
    r"|\"(?P<dq>(?:[^\"\\\n]|\\.)*+)\"|'(?P<sq>[^'\n]*+)')"
    r"|(?P<uq>(?![=:])(?:[^\s\"'`,;&|<>(){}\[\]\\]|&(?![\w.-]+=)|\\(?![ntr\"\\]))++))"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_CHARS = re.compile(r"[\w.-]")
_SECRET_WORD = re.compile(  # on an upper-cased name without separators
    r"PASSW(?:OR)?D|SECRET(?!AR)|TOKEN(?!I[SZ])|APIKEY|ACCESSKEY|PRIVATEKEY|CREDENTIAL"
    r"|AUTH(?!OR(?!IZ))"
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
_DIGIT = re.compile(r"\d")
_LINE_LEAD = re.compile(r"[ \t]*(?:-[ \t]+|export[ \t]+)?")
_FIELD_NAMES = frozenset(
    "password passwd secret token api_key apikey access_token refresh_token id_token "
    "client_secret private_key credentials auth".split()
)
_TYPE_NAMES = frozenset("str bytes int float bool string number boolean any object dict".split())


@dataclass(frozen=True, slots=True)
class RedactResult:
    """Redacted text and the kinds found (sorted, unique; empty when nothing changed)."""

    text: str
    kinds: tuple[str, ...]


def redact(text: str) -> RedactResult:
    """Replace every recognised secret in ``text`` with ``[REDACTED:<kind>]``.

    Args:
        text: any string (code, logs, JSON, CJK, NUL); never raises on a ``str``.

    Returns:
        ``RedactResult(text, kinds)``: ``kinds`` is a sorted tuple of unique names from
        ``KINDS``, empty iff the text is unchanged. Idempotent: redacting the output again
        changes nothing. Time is linear in ``len(text)``: one regex pass per rule whose
        trigger occurs, two to four rounds when something was redacted (about 0.6 s for
        1 MiB of back-to-back secrets). Pure: no side effects, safe on any thread.
    """
    found: set[str] = set()
    for _ in range(_MAX_PASSES):
        # A redaction can change what an earlier rule sees (a value that ended at a '['
        # now ends at a marker), so repeat until nothing changes: that makes it idempotent.
        before = text
        for rule in _triggered_rules(_unmarked_lower(text)):  # markers trigger nothing
            kind, _triggers, pattern, decide = _RULES[rule]
            text = pattern.sub(partial(_replace, kind, decide, found), text)
        if text == before:
            break
    return RedactResult(text, tuple(sorted(found)))


def contains_secret(text: str) -> bool:
    """Return True when ``redact(text)`` would change ``text``.

    Runs the rules of ``redact``'s first round, in its order, and stops at the first value
    a rule would replace: when the first round replaces nothing, ``redact`` returns the
    text unchanged, and when it replaces something the text holds a secret. Cheaper than
    ``redact`` on clean text (no string is rebuilt) and on a secret (it stops there).
    Pure, any thread.
    """
    for rule in _triggered_rules(_unmarked_lower(text)):
        _kind, _triggers, pattern, decide = _RULES[rule]
        if any(_accepts(decide, m) for m in pattern.finditer(text)):
            return True
    return False


def _value_group(m: re.Match[str]) -> str:
    """Name of the group of ``m`` that holds the secret value."""
    return m.lastgroup if m.re in _LASTGROUP_RULES else "s"


def _accepts(decide: _Decide | None, m: re.Match[str]) -> bool:
    """True when the value of match ``m`` is to be replaced: not empty, not already a
    marker, and ``decide`` (None = always) accepts it."""
    value = m.group(_value_group(m))
    return bool(value) and not _MARKER.search(value) and (decide is None or decide(m))


def _replace(kind: str, decide: _Decide | None, found: set[str], m: re.Match[str]) -> str:
    """Swap the value group of ``m`` for a marker when ``decide`` accepts it; else keep ``m``."""
    if not _accepts(decide, m):
        return m.group(0)
    found.add(kind)
    start, end = m.span(_value_group(m))
    return f"{m.string[m.start():start]}[REDACTED:{kind}]{m.string[end:m.end()]}"


def _entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _starts_token(s: str, i: int) -> bool:
    """True when ``s[i]`` does not continue a word, dotted or dashed name (``\\n`` is a gap)."""
    if i == 0 or _KEY_CHARS.match(s, i - 1) is None:
        return True
    return i >= 2 and s[i - 2] == "\\" and s[i - 1] in "ntr"


def _pem_ok(m: re.Match[str]) -> bool:
    """A BEGIN line followed by real key material, not code that mentions the marker."""
    return _KEY_BODY.search(m.group("body") or m.group("cut") or "") is not None


def _openai_ok(m: re.Match[str]) -> bool:
    # "sk-" is a common prefix; only a random-looking body is a key.
    return _entropy(m.group("s")) >= ENTROPY_MIN_BITS


def _header_ok(m: re.Match[str]) -> bool:
    value = m.group("s")
    if not _starts_token(m.string, m.start()) or value.lower() in _AUTH_SCHEMES:
        return False
    if _PLACEHOLDER.fullmatch(value):
        return False
    # "Authorization: <value>" without a scheme word: only a token-length value counts.
    bare_auth = not m.group("scheme") and m.group("h").lower().endswith("authorization")
    return not bare_auth or len(value) >= 16


def _cli_ok(m: re.Match[str]) -> bool:
    """A command-line password: any literal, not a variable, placeholder or ``uid:gid`` pair."""
    value = m.group(m.lastgroup)
    if m.lastgroup == "up" and value.isdigit():
        return False  # docker -u 1000:1000
    return not (value.startswith(("$", "-")) or _PLACEHOLDER.fullmatch(value))


def _htpasswd_ok(m: re.Match[str]) -> bool:
    """``htpasswd`` takes the password on the command line only in batch mode (``-b``)."""
    return "b" in m.group("ho") and _cli_ok(m)


def _url_ok(m: re.Match[str]) -> bool:
    return _PLACEHOLDER.fullmatch(m.group("s")) is None


def _high_entropy_ok(m: re.Match[str]) -> bool:
    value = m.group("s")
    if m.group("bare") and not _starts_token(m.string, m.start()):
        return False
    if _PLACEHOLDER.fullmatch(value) or "://" in value or value.startswith(("/", ".", "~")):
        return False  # a variable, a URL or a file path
    if _DIGIT.search(value) is None and _IDENT.fullmatch(value):
        return False  # settings.openai_api_key: a dotted name in code, not a value
    return _entropy(value) >= ENTROPY_MIN_BITS


@lru_cache(maxsize=1024)
def _secret_name(name: str) -> bool:
    """True when ``name`` (``dbPassword``, ``db-password``, ``DB.PASSWORD``) holds a secret word.

    A name ending in a metadata suffix (``TOKEN_EXPIRY``, ``AUTH_URL``) does not count.
    """
    norm = _CAMEL.sub("_", name.strip("-_.\\\"'")).upper().replace("-", "_").replace(".", "_")
    if norm.endswith(_BENIGN_SUFFIXES):
        return False
    return _SECRET_WORD.search(norm.replace("_", "")) is not None


def _key_start(m: re.Match[str]) -> int:
    """Index where the key around the matched secret word begins, or -1 if not a key.

    The key extends at most 40 characters left of the word (bounded, so linear); a
    quoted key needs the same quote on the left (and ``[`` when a ``]`` follows it);
    ``\\`` before a key (an escape) or a longer run means no key.
    """
    s, i = m.string, m.start()
    lo = max(0, i - 40)
    while i > lo and not _starts_token(s, i):
        i -= 1
    if not _starts_token(s, i):
        return -1  # longer than 40 characters: not a key
    quote = m.group("kq")
    if quote:
        if s[max(0, i - len(quote)) : i] != quote:
            return -1
        i -= len(quote)
    if m.group("br"):  # env["DB_PASSWORD"] = "..."
        return i if i and s[i - 1] == "[" else -1
    return -1 if i and s[i - 1] == "\\" else i


def _at_line_start(s: str, i: int) -> bool:
    """True when only indentation, ``- `` or ``export `` precede index ``i`` on its line.

    A JSON-escaped ``\\n`` or a ``"`` also starts one. The look-back is bounded (linear).
    """
    lo = max(0, i - 40)
    esc = s.rfind("\\n", lo, i)
    begin = max(s.rfind("\n", lo, i), s.rfind('"', lo, i)) + 1  # a JSON string starts one too
    begin = max(begin, esc + 2 if esc >= 0 else 0)
    if begin == 0 and lo > 0:
        return False
    return _LINE_LEAD.fullmatch(s, begin, i) is not None


def _env_ok(m: re.Match[str]) -> bool:
    """Decide whether a secret-named key's value is a literal secret, not code or metadata."""
    value, s = m.group(m.lastgroup), m.string
    folded = value.lower().replace("-", "_")
    if folded in _FIELD_NAMES or _PLACEHOLDER.fullmatch(value.strip()):
        return False  # a field name, "${TOKEN}", "<your-token>", "***", null, a small number
    start = _key_start(m)
    if start < 0:
        return False
    key = s[start : m.end("key")]
    if not _secret_name(key) or folded == key.strip("-\\\"'").lower().replace("-", "_"):
        return False  # not a secret's name, or f(password=password)
    if m.lastgroup != "uq":  # a quoted literal
        return not ("f" in m.group("pfx").lower() and "{" in value)  # f"Bearer {token}"
    has_digit = _DIGIT.search(value) is not None
    after = s[m.end() : m.end() + 1]
    if after and _IDENT.fullmatch(value):
        if after in "([" or (after in "\"'" and len(value) <= 2):
            return False  # get_token(), environ["X"], an f"..." prefix
        if not has_digit and after in ",)":
            return False  # a keyword argument f(token=tok)
    if not has_digit and "." in value and _IDENT.fullmatch(value):
        return False  # settings.token
    if m.group("sep") == "=":
        return True  # KEY=value: .env line, shell assignment or --flag=value
    if has_digit or not _WORDY.fullmatch(value):
        return True
    # "password: hunter" as a YAML line; not "auth: failed" in a log or "token: Token" in code.
    is_type = value.lower() in _TYPE_NAMES or (value[0].isupper() and not value.isupper())
    return m.group("sep").strip() == ":" and _at_line_start(s, start) and not is_type


_Decide = Callable[[re.Match[str]], bool]
_LASTGROUP_RULES = (_ENV, _CLI_PASSWORD, _LOGIN_P, _NETRC, _TOOL_PASSWORD, _PASS_FLAG, _HTPASSWD,
                    _STDIN_PASSWORD, _PROMPT_PASSWORD)  # the value is the last group matched
_AWS_TRIGGERS = ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "a3t")
# A trigger is a substring every match of its rule holds (lower-cased), no looser: "passw"
# and "pass=", not "pass", so pytest's "passed" runs neither rule below.
_HIGH_ENTROPY_TRIGGERS = ("--", "-p", "key", "token", "secret", "passw", "pass=", "sig", "auth", "code")
# (kind, lower-case trigger substrings: the rule runs only if one occurs, pattern, decide
# or None for "always"); most specific first, so a later rule sees a marker, not the value.
_RULES: tuple[tuple[str, tuple[str, ...], re.Pattern[str], _Decide | None], ...] = (
    ("gcp_service_account_key", ("private key",), _GCP_SA, _pem_ok),
    ("private_key", ("private key",), _PRIVATE_KEY, _pem_ok),
    ("slack_webhook", ("hooks.slack.com",), _SLACK_WEBHOOK, None),
    ("jwt", ("eyj",), _JWT, None),
    ("aws_access_key", _AWS_TRIGGERS, _AWS_ACCESS, None),
    ("aws_secret_key", ("secret",), _AWS_SECRET, None),
    ("gcp_api_key", ("aiza",), _GCP_API, None),
    ("azure_storage_key", ("accountkey",), _AZURE_KEY, None),
    ("azure_connection_string", ("sharedaccess",), _AZURE_CONN, None),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), _GITHUB, None),
    ("gitlab_token", ("gl",), _GITLAB, None),
    ("slack_token", ("xox", "xapp-"), _SLACK_TOKEN, None),
    ("stripe_key", ("_live_", "_test_", "whsec_"), _STRIPE, None),
    ("anthropic_key", ("sk-ant-",), _ANTHROPIC, None),
    ("openai_key", ("sk-",), _OPENAI, _openai_ok),
    ("authorization_header", ("authorization", "api-key", "-token"), _AUTH_HEADER, _header_ok),
    ("url_password", ("://",), _URL_PASSWORD, _url_ok),
    ("high_entropy", _HIGH_ENTROPY_TRIGGERS, _HIGH_ENTROPY, _high_entropy_ok),
    ("env_secret", ("passw", "secret", "token", "key", "credential", "auth"), _ENV, _env_ok),
    # Last: what the structural rules above leave (short values, no `=`) on command lines.
    ("cli_password", ("-u", "--user", "-a", "--auth", "--pass", "mysql", "mariadb", "sshpass", "password=",
                      "mysql_pwd=", "rediscli_auth=", "redis-cli"), _CLI_PASSWORD, _cli_ok),
    ("cli_password", ("login",), _LOGIN_P, _cli_ok),
    ("cli_password", ("sqlcmd", "bcp", "osql", "ldap", "zip", "7z", "smb", "rpcclient", "mount.cifs"),
     _TOOL_PASSWORD, _cli_ok),
    ("cli_password", ("pass ", "pass\t", "pass:"), _PASS_FLAG, _cli_ok),
    ("cli_password", ("htpasswd",), _HTPASSWD, _htpasswd_ok),
    ("cli_password", ("sudo", "password-stdin"), _STDIN_PASSWORD, _cli_ok),
    ("cli_password", ("password for '",), _PROMPT_PASSWORD, _cli_ok),
    ("netrc_password", ("machine", "default"), _NETRC, _cli_ok),
)
KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, *_ in _RULES))  # every marker kind, rule order

# Every trigger of every rule is found in one Aho-Corasick pass per round (one `in` scan per
# trigger cost ~20 us on a 1 KB observation). Triggers are ASCII, so they occur in the
# text's UTF-8 exactly where they occur in the text ("surrogatepass" keeps a lone
# surrogate, which a hook payload may carry, encodable).
_TRIGGERS = tuple(sorted({t for _, triggers, _, _ in _RULES for t in triggers}))
_TRIGGER_SCAN = ahocorasick_rs.BytesAhoCorasick([t.encode() for t in _TRIGGERS])
# For each trigger (same index as _TRIGGERS), the rules it starts.
_RULES_OF_TRIGGER = tuple(tuple(n for n, rule in enumerate(_RULES) if t in rule[1]) for t in _TRIGGERS)


def _unmarked_lower(text: str) -> str:
    """``text`` lower-cased with its markers blanked (a marker triggers no rule); the regex
    runs only when a marker can be there (most texts hold none, and this is on every hook)."""
    return (_MARKER.sub(" ", text) if "[REDACTED:" in text else text).lower()


def _triggered_rules(lowered: str) -> list[int]:
    """Indexes into ``_RULES``, in their order, of the rules a trigger occurring in ``lowered``
    (lower-cased, markers blanked) starts: one Aho-Corasick scan, then only those rules (clean
    text, the usual hook field, runs none)."""
    haystack = lowered.encode("utf-8", "surrogatepass")
    hits = {i for i, _, _ in _TRIGGER_SCAN.find_matches_as_indexes(haystack, overlapping=True)}
    if not hits:
        return []
    return sorted({rule for i in hits for rule in _RULES_OF_TRIGGER[i]})
