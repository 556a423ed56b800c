"""Secret redactor (DESIGN.md invariant 6): a corpus of secrets that must go, ordinary text
that must stay byte-identical, idempotence and linear time.

The secrets are fake but format-valid. They are assembled at import time from a seeded
generator, so no scanner-shaped literal sits in the repository.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import time

import pytest

from aimem_common import redact as redact_mod
from aimem_common.redact import KINDS, RedactResult, contains_secret, redact

ALNUM = string.ascii_letters + string.digits
UPNUM = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def fake(alphabet: str, n: int, seed: str) -> str:
    """``n`` deterministic pseudo-random characters of ``alphabet``."""
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def pem(label: str, seed: str, headers: str = "", nl: str = "\n") -> str:
    lines = [fake(B64, 64, f"{seed}{i}") for i in range(5)] + [fake(B64, 20, seed) + "=="]
    body = nl.join(lines)
    return f"-----BEGIN {label}-----{nl}{headers}{body}{nl}-----END {label}-----"


JWT = ".".join(
    [b64url({"alg": "HS256", "typ": "JWT"}), b64url({"sub": "1234567890", "name": "Jo", "iat": 1516239022}),
     fake(URLSAFE, 43, "jwtsig")]
)  # fmt: skip
AWS_ID = "AKIA" + fake(UPNUM, 16, "aws1")
AWS_STS_ID = "ASIA" + fake(UPNUM, 16, "aws2")
AWS_SECRET = fake(B64, 40, "aws3")
GCP_KEY = "AIza" + fake(URLSAFE, 35, "gcp")
AZ_KEY = fake(B64, 86, "az") + "=="
AZ_SB_KEY = fake(B64, 43, "azsb") + "="
GHP = "ghp_" + fake(ALNUM, 36, "ghp")
GHO = "gho_" + fake(ALNUM, 36, "gho")
GHS = "ghs_" + fake(ALNUM, 36, "ghs")
GH_PAT = "github_pat_" + fake(ALNUM, 22, "pat1") + "_" + fake(ALNUM, 59, "pat2")
GLPAT = "glpat-" + fake(URLSAFE, 20, "gl")
XOXB = "xoxb-" + fake(string.digits, 12, "x1") + "-" + fake(string.digits, 13, "x2") + "-" + fake(ALNUM, 24, "x3")
XOXP = "xoxp-" + fake(string.digits, 12, "p1") + "-" + fake(string.digits, 12, "p2") + "-" + fake(ALNUM, 32, "p3")
SLACK_HOOK_PATH = "T" + fake(UPNUM, 8, "t") + "/B" + fake(UPNUM, 10, "b") + "/" + fake(ALNUM, 24, "h")
SK_LIVE = "sk_" + "live_" + fake(ALNUM, 99, "stripe1")
RK_LIVE = "rk_" + "live_" + fake(ALNUM, 99, "stripe2")
SK_TEST = "sk_" + "test_" + fake(ALNUM, 24, "stripe3")
OPENAI_PROJ = "sk-proj-" + fake(URLSAFE, 156, "oai1")
OPENAI_OLD = "sk-" + fake(ALNUM, 48, "oai2")
ANTHROPIC = "sk-ant-api03-" + fake(URLSAFE, 93, "ant") + "AA"
RSA = pem("RSA PRIVATE KEY", "rsa")
EC = pem("EC PRIVATE KEY", "ec")
OPENSSH = pem("OPENSSH PRIVATE KEY", "ossh")
PGP = pem("PGP PRIVATE KEY BLOCK", "pgp", headers="Version: GnuPG v2\n\n")
ENC_HEADERS = "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\n"
ENC_RSA = pem("RSA PRIVATE KEY", "enc", headers=ENC_HEADERS)
SA_KEY = pem("PRIVATE KEY", "sa", nl="\\n") + "\\n"
HI = fake(ALNUM + "+/", 32, "hi")  # high-entropy value for slot tests
HI2 = fake(ALNUM, 40, "hi2")
PASSWORD = "Tr0ub4dor&3-horse"

# (expected kind, line as it appears in a log / shell / JSON blob, the secret substring)
SECRETS: list[tuple[str, str, str]] = [
    ("aws_access_key", f"export AWS_ACCESS_KEY_ID={AWS_ID}", AWS_ID),
    ("aws_access_key", f'{{"Credentials": {{"AccessKeyId": "{AWS_STS_ID}"}}}}', AWS_STS_ID),
    ("aws_secret_key", f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET),
    ("aws_secret_key", f'{{"SecretAccessKey": "{AWS_SECRET}", "Expiration": "2024-01-01"}}', AWS_SECRET),
    ("gcp_api_key", f"curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x&key={GCP_KEY}'", GCP_KEY),
    ("gcp_api_key", f'  "apiKey": "{GCP_KEY}",', GCP_KEY),
    ("gcp_service_account_key",
     f'{{"type": "service_account", "project_id": "demo-1", "private_key": "{SA_KEY}", '
     f'"client_email": "ci@demo-1.iam.gserviceaccount.com"}}', SA_KEY[40:120]),
    ("azure_storage_key",
     f"DefaultEndpointsProtocol=https;AccountName=demostore;AccountKey={AZ_KEY};EndpointSuffix=core.windows.net",
     AZ_KEY),
    ("azure_connection_string",
     "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
     f"SharedAccessKey={AZ_SB_KEY}", AZ_SB_KEY),
    ("github_token", f"git clone https://{GHP}@github.com/acme/private.git", GHP),
    ("github_token", f"export GH_TOKEN={GHO}", GHO),
    ("github_token", f"2024-05-01T10:00:00Z INFO using installation token {GHS} for acme/api", GHS),
    ("github_token", f"GITHUB_TOKEN={GH_PAT}", GH_PAT),
    ("gitlab_token", f'curl --header "PRIVATE-TOKEN: {GLPAT}" https://gitlab.example.com/api/v4/projects', GLPAT),
    ("slack_token", f"SLACK_BOT_TOKEN={XOXB}", XOXB),
    ("slack_token", f'client = WebClient(token="{XOXP}")', XOXP),
    ("slack_webhook", f"curl -X POST -d '{{\"text\":\"hi\"}}' https://hooks.slack.com/services/{SLACK_HOOK_PATH}",
     SLACK_HOOK_PATH),
    ("stripe_key", f"stripe.api_key = '{SK_LIVE}'", SK_LIVE),
    ("stripe_key", f"[2024-05-01 10:00:01] restricted key {RK_LIVE} loaded", RK_LIVE),
    ("stripe_key", f"STRIPE_SECRET={SK_TEST}", SK_TEST),
    ("openai_key", f"export OPENAI_API_KEY={OPENAI_PROJ}", OPENAI_PROJ),
    ("openai_key", f'openai.OpenAI(api_key="{OPENAI_OLD}")', OPENAI_OLD),
    ("anthropic_key", f"$ ANTHROPIC_API_KEY={ANTHROPIC} claude -p 'hi'", ANTHROPIC),
    ("anthropic_key", f'{{"headers": {{"x-api-key": "{ANTHROPIC}"}}}}', ANTHROPIC),
    ("jwt", f"DEBUG auth ok session={JWT} user=42", JWT),
    ("jwt", f'{{"id_token": "{JWT}"}}', JWT),
    ("private_key", f"$ cat ~/.ssh/id_rsa\n{RSA}\n$ ", RSA[40:100]),
    ("private_key", f"ec.pem:\n{EC}", EC[40:100]),
    ("private_key", OPENSSH, OPENSSH[40:100]),
    ("private_key", f"gpg --export-secret-keys -a\n{PGP}", PGP[60:120]),
    ("private_key", ENC_RSA, ENC_RSA[120:180]),
    ("private_key", RSA[:250], RSA[40:100]),  # excerpt cut off before END: still redacted
    ("url_password", "DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/app", "s3cr3t-Pa55"),
    ("url_password", "Connecting to mongodb+srv://admin:Hunter2xyz@cluster0.ab1cd.mongodb.net/test", "Hunter2xyz"),
    ("url_password", "redis-cli -u redis://:redisPass99@127.0.0.1:6379/0", "redisPass99"),
    ("url_password", "pip install --index-url https://deploy:p@ss!word@pypi.corp.example/simple pkg", "p@ss!word"),
    ("authorization_header", f'curl -H "Authorization: Bearer {HI2}" https://api.example.com/v1/me', HI2),
    ("authorization_header", "> Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
    ("authorization_header", f"requests.get(url, headers={{'X-Api-Key': '{HI[:24]}'}})", HI[:24]),
    ("authorization_header", f'{{"headers": {{"authorization": "token {HI2}"}}}}', HI2),
    ("env_secret", f"DB_PASSWORD={PASSWORD}", PASSWORD),
    ("env_secret", "export REDIS_PASSWORD='correct horse battery'", "correct horse battery"),
    ("env_secret", f'{{"username": "deploy", "password": "{PASSWORD}"}}', PASSWORD),
    ("env_secret", "  POSTGRES_PASSWORD: example", "example"),
    ("env_secret", 'SECRET_KEY = "django-insecure-abc123!xyz"', "django-insecure-abc123!xyz"),
    ("env_secret", "Server=tcp:db.example.com;Database=app;User ID=sa;Password=Pa55w0rd!;", "Pa55w0rd!"),
    ("env_secret", "//registry.npmjs.org/:_authToken=npm_" + fake(ALNUM, 36, "npm"), fake(ALNUM, 36, "npm")),
    ("env_secret", '"{\\"client_secret\\": \\"GOCSPX-abc123def\\"}"', "GOCSPX-abc123def"),
    ("env_secret", "mysql --user=root --password=hunter2 app", "hunter2"),
    ("env_secret", 'os.environ["DB_PASSWORD"] = "hunter2"', "hunter2"),
    ("env_secret", 'var secretKey = "mysecretpassword";', "mysecretpassword"),
    ("env_secret", "users:\n  - name: bob\n    password: hunter", "hunter"),
    ("env_secret", "api_key: ABCDEFGHIJ", "ABCDEFGHIJ"),
    ("url_password", "jdbc:mysql://user:secret99@localhost:3306/db", "secret99"),
    ("high_entropy", f"mysql -u root -p{HI} -h db.internal", HI),
    ("high_entropy", f"vault login --token {HI2}", HI2),
    ("high_entropy", f"GET /v1/data?apikey={HI2}&format=json HTTP/1.1", HI2),
    ("high_entropy", f"https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&sig={HI}", HI),
    ("high_entropy", f"secret={HI2}", HI2),
    # Command-line passwords, however short (a short one is still a password).
    ("cli_password", "curl -u alice:pw1 https://api.example.com", "pw1"),
    ("cli_password", "curl --user bob:s3cr https://h", "s3cr"),
    ("cli_password", "wget --user=me:hunter2 http://h/f", "hunter2"),
    ("cli_password", "mysql -u root -p'pw' app", "pw"),
    ("cli_password", 'mysqldump -uroot -p"x9y" app', "x9y"),
    ("cli_password", "mysql -uroot -phunter2 app", "hunter2"),
    ("cli_password", "deploy --password abc1", "abc1"),
    ("env_secret", "deploy --passwd=abc2 now", "abc2"),
    ("env_secret", "PGPASSWORD=pgpw psql -h db", "pgpw"),
    ("cli_password", "MYSQL_PWD=mypw mysql", "mypw"),
    ("cli_password", "docker login -u me -p dockpw registry.example.com", "dockpw"),
    ("cli_password", "echo x | sshpass -p sshpw ssh host", "sshpw"),
    ("cli_password", "redis-cli -h cache -a redpw ping", "redpw"),
    ("cli_password", "http -a user:pa55 example.org", "pa55"),
    ("aws_secret_key", "aws configure set aws_secret_access_key " + fake(B64, 40, "awsspace").replace("=", "A"),
     fake(B64, 40, "awsspace").replace("=", "A")),
    ("cli_password", "curl -uadmin:pw7 https://api.example.com", "pw7"),
    ("cli_password", "SSHPASS=sshenvpw sshpass -e ssh deploy@host", "sshenvpw"),
    ("cli_password", "az login --service-principal -u app -p azpw1 --tenant t", "azpw1"),
    ("cli_password", "sqlcmd -S db -U sa -P sqlpw1 -Q 'select 1'", "sqlpw1"),
    ("cli_password", "ldapsearch -x -D cn=admin,dc=x -w ldappw1 -b dc=x", "ldappw1"),
    ("cli_password", "openssl pkcs12 -export -in c.pem -passout pass:sslpw1 -out c.p12", "sslpw1"),
    ("cli_password", "openssl rsa -in k.pem -passin 'pass:sslpw2'", "sslpw2"),
    ("cli_password", "keytool -list -keystore ks.jks -storepass storepw1", "storepw1"),
    ("cli_password", "keytool -genkeypair -alias a -keypass keypw1 -keystore ks.jks", "keypw1"),
    ("cli_password", "zip -P zippw1 out.zip notes.txt", "zippw1"),
    ("cli_password", "7z a -p7zpw1 -mhe=on out.7z dir", "7zpw1"),
    ("cli_password", "smbclient //srv/share -U 'CORP\\alice%smbpw1'", "smbpw1"),
    ("cli_password", "htpasswd -cb /etc/nginx/.htpasswd alice htpw1", "htpw1"),
    ("cli_password", "htpasswd -nbB -C 10 alice htpw2 2>/dev/null", "htpw2"),
    ("cli_password", "echo 'regpw1' | docker login -u me --password-stdin reg.example.com", "regpw1"),
    ("cli_password", "sudo -S apt-get update <<< sudopw1", "sudopw1"),
    ("cli_password", "echo sudopw2 | sudo -S systemctl restart nginx", "sudopw2"),
    ("cli_password", "Password for 'https://alice@github.com': gitpw1", "gitpw1"),
    ("netrc_password", "machine api.example.com login me password netpw", "netpw"),
    ("netrc_password", "machine git.example.com\n  login me\n  password netpw2", "netpw2"),
]


SECRET_IDS = [f"{i}-{kind}" for i, (kind, _, _) in enumerate(SECRETS)]


def leftovers(line: str, secret: str, out: str, width: int = 6) -> list[str]:
    """Pieces of ``secret`` (``width`` chars) still in ``out`` that occur nowhere else in ``line``.

    Catches a partial redaction such as ``Tr0ub4dor[REDACTED]&3-horse``.
    """
    rest = line.replace(secret, "\x00")
    out = re.sub(r"\[REDACTED:[a-z_]+\]", "\x00", out)
    w = min(width, len(secret))
    pieces = {secret[i : i + w] for i in range(len(secret) - w + 1)}
    return sorted(p for p in pieces if p in out and p not in rest)


@pytest.mark.parametrize(("kind", "line", "secret"), SECRETS, ids=SECRET_IDS)
def test_secret_is_redacted(kind: str, line: str, secret: str) -> None:
    assert secret in line  # the sample really carries the secret
    res = redact(line)
    assert secret not in res.text
    assert leftovers(line, secret, res.text) == []
    assert f"[REDACTED:{kind}]" in res.text
    assert kind in res.kinds
    assert contains_secret(line)


def _encode(text: str, depth: int) -> str:
    """``text`` as it appears inside ``depth`` levels of JSON string encoding (no quotes)."""
    for _ in range(depth):
        text = json.dumps(text)[1:-1]
    return text


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize(("kind", "line", "secret"), SECRETS, ids=SECRET_IDS)
def test_secret_inside_a_json_hook_payload_is_redacted(kind: str, line: str, secret: str, depth: int) -> None:
    # Hook bodies are often JSON (tool_input, tool_response), sometimes JSON inside JSON.
    payload = '{"tool_input": {"command": "' + _encode("ok\n" + line + "\ndone", depth) + '"}}'
    encoded = _encode(secret, depth)
    res = redact(payload)
    assert encoded not in res.text
    assert leftovers(payload, encoded, res.text) == []
    assert kind in res.kinds


def test_cli_lookalikes_are_not_passwords() -> None:
    for line in ("docker run -u 1000:1000 img", "ssh -p 22 host", "docker run -p 8080:80 img",
                 "echo --password $PW", "git commit -a -m x", "mysql -p", "deploy --password ${PASS}"):
        assert redact(line).text == line, line


@pytest.mark.parametrize(
    "line",
    [
        "curl -u admin https://h", "git diff -u a b", "top -u1000:1000", "az group list",
        "sqlcmd -S db -E -Q 'select 1'", "ldapsearch -W -D cn=admin -b dc=x",
        "openssl rsa -passin env:KEY_PASS -in k.pem", "openssl rsa -passin file:/run/pw -in k.pem",
        "openssl pkcs12 -passout stdin -out c.p12", "keytool -list -storepass:env STOREPASS -keystore ks.jks",
        "zip -r out.zip dir", "zip -r a.zip dir && rsync -P a.zip host:", "7z x archive.7z",
        "7z x -p archive.7z", "smbclient -U alice //srv/share", "htpasswd -c .htpasswd alice",
        "htpasswd -D .htpasswd alice", "echo $PW | docker login --password-stdin",
        "cat pw.txt | docker login -u me --password-stdin", "echo hi | sudo tee /etc/motd",
        "sudo -S true", 'sudo -S cat <<< "$PW"', "Password for 'https://alice@github.com': ",
        "SSHPASS=$PW sshpass -e ssh host",
    ],
)
def test_tool_password_lookalikes_stay(line: str) -> None:
    assert redact(line).text == line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("curl -uadmin:pw https://h", "curl -uadmin:[REDACTED:cli_password] https://h"),
        ("7z a -ppw out.7z d", "7z a -p[REDACTED:cli_password] out.7z d"),
        ("smbclient -U user%pw //s/x", "smbclient -U user%[REDACTED:cli_password] //s/x"),
        ("openssl rsa -passin pass:pw", "openssl rsa -passin pass:[REDACTED:cli_password]"),
        ("htpasswd -b f user pw", "htpasswd -b f user [REDACTED:cli_password]"),
        ("htpasswd -nb user pw", "htpasswd -nb user [REDACTED:cli_password]"),
    ],
)
def test_tool_password_keeps_the_flag(line: str, expected: str) -> None:
    assert redact(line).text == expected


GPG_BODY = [fake(B64, 64, f"gpg{i}") for i in range(4)] + [fake(B64, 12, "gpgtail"), "=" + fake(B64, 4, "crc")]
GPG_ARMOR = ["-----BEGIN PGP PRIVATE KEY BLOCK-----", "Comment: User-ID:\tAlice <a@example.org>", "",
             *GPG_BODY, "-----END PGP PRIVATE KEY BLOCK-----"]  # fmt: skip


@pytest.mark.parametrize("form", ["plain", "cat -n", "arrow", "quoted"])
@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize("depth", [0, 1, 2])
def test_pgp_armor_is_redacted_as_a_tool_printed_it(form: str, cut: bool, depth: int) -> None:
    # A file reader prefixes line numbers (tab or arrow), a mail or markdown quote adds '> ';
    # an excerpt may stop before the END line.
    lines = GPG_ARMOR[:5] if cut else GPG_ARMOR
    prefix = {"cat -n": "{:6}\t", "arrow": "{:6}\u2192", "quoted": "> "}.get(form, "")
    text = "".join(prefix.format(i) + line + "\n" for i, line in enumerate(lines, 1))
    for _ in range(depth):
        text = json.dumps(text, ensure_ascii=False)
    res = redact(text)
    assert [b for b in GPG_BODY[:3] if b[:16] in res.text] == []
    assert res.kinds == ("private_key",)


def test_corpus_covers_every_kind_and_is_large() -> None:
    assert len(SECRETS) >= 40
    assert {k for k, _, _ in SECRETS} == set(KINDS)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("postgres://user:hunter2@host/db", "postgres://user:[REDACTED:url_password]@host/db"),
        (f"Authorization: Bearer {HI2}", "Authorization: Bearer [REDACTED:authorization_header]"),
        ("X-Api-Key: abcd1234efgh5678", "X-Api-Key: [REDACTED:authorization_header]"),
        ("export API_TOKEN=abc123", "export API_TOKEN=[REDACTED:env_secret]"),
        ('{"password": "pw1", "user": "bob"}', '{"password": "[REDACTED:env_secret]", "user": "bob"}'),
        (f"token: {GHP}", "token: [REDACTED:github_token]"),
        (f"k = '{RSA}'", "k = '[REDACTED:private_key]'"),
        (f'{{"private_key": "{SA_KEY}", "x": 1}}',
         '{"private_key": "[REDACTED:gcp_service_account_key]", "x": 1}'),
        (f"https://hooks.slack.com/services/{SLACK_HOOK_PATH}",
         "https://hooks.slack.com/services/[REDACTED:slack_webhook]"),
    ],
)
def test_structure_around_the_secret_is_kept(line: str, expected: str) -> None:
    assert redact(line).text == expected


def test_several_secrets_in_one_blob() -> None:
    blob = f"GITHUB_TOKEN={GHP}\nDATABASE_URL=mysql://root:toor99@db/app\nAWS_ACCESS_KEY_ID={AWS_ID}\n"
    res = redact(blob)
    assert res == RedactResult(
        "GITHUB_TOKEN=[REDACTED:github_token]\nDATABASE_URL=mysql://root:[REDACTED:url_password]@db/app\n"
        "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]\n",
        ("aws_access_key", "github_token", "url_password"),
    )


ORDINARY = [
    "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
    "HEAD is now at 9fceb02d0ae598e95dc970b74767f19372d61af8 fix: retry on 429",
    "request_id=550e8400-e29b-41d4-a716-446655440000 status=200 duration_ms=12",
    '"integrity": "sha512-v2kDEe57lecTulaDIuNTPy3Ry4gLGJ6Z1O3vE1krgXZNrsQ+LFTGHVxVjcXGOmvjUo1ySmNQVPSx3ejsXbAbaA==",',
    'checksum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
    '{file = "requests-2.31.0-py3-none-any.whl", '
    'hash = "sha256:58cd2187c01e70e6e26505bca751777aa9f2ee0b7f4300988b709f44e013003f"}',
    'img.src = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk'
    'YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";',
    "password = get_password()",
    'token = os.environ["TOKEN"]',
    'api_key = os.environ.get("OPENAI_API_KEY", "")',
    "TOKEN_EXPIRY=3600",
    "PASSWORD_MIN_LENGTH=12",
    "MAX_TOKENS=4096",
    "AUTH_URL=https://auth.example.com/oauth/token",
    "https://github.com/acme/widgets/pull/42/files?diff=split",
    "git@github.com:acme/widgets.git",
    "http://localhost:8080/api/v1/users?page=2&limit=50",
    "The Authorization header is missing from the request.",
    'curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com/user',
    'headers = {"Authorization": f"Bearer {token}"}',
    "export GITHUB_TOKEN=$(gh auth token)",
    'DB_PASSWORD="${DB_PASSWORD:-}"',
    "/home/dev/projects/aimem/libs/aimem-common/src/aimem_common/redact.py",
    r"C:\Users\dev\AppData\Local\Programs\Python\Python311\python.exe",
    "added 312 packages, and audited 313 packages in 4s",
    "Successfully installed certifi-2024.2.2 idna-3.6 requests-2.31.0 urllib3-2.2.1",
    'File "/usr/lib/python3.11/site-packages/app/auth.py", line 42, in get_token',
    "KeyError: 'API_KEY'",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
    "def authenticate(self, username: str, password: str) -> bool:",
    "    password: str",
    "    token: Optional[str] = None",
    "client = Client(base_url=url, token=token, timeout=5)",
    "    api_key=settings.openai_api_key,",
    "INFO auth: login succeeded for user bob",
    'author = "Jane Doe <jane@example.com>"',
    'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")',
    "mkdir -p /home/dev/projects/aimem/libs/aimem-common/tests/unit",
    "docker run -p 8080:80 -v /srv/data:/data nginx:1.25",
    "ssh -i ~/.ssh/id_ed25519 deploy@10.0.0.5",
    'PEM_HEADER = "-----BEGIN RSA PRIVATE KEY-----"',
    '"token_type": "Bearer", "expires_in": 3600',
    "const apiKey = process.env.OPENAI_API_KEY;",
    "fetch(url, { credentials: 'include' })",
    "secret_name: app-tls-cert",
    "kubectl get secret db-credentials -o yaml",
    "pip install scikit-learn task-runner sk-video",
    "if not token or token_expired(token):",
    "日本語のテキスト 🔑 パスワードはありません\x00 trailing NUL",
    "    at Object.<anonymous> (/app/node_modules/jsonwebtoken/verify.js:89:21)",
    "AWS_REGION=us-east-1 AWS_PROFILE=dev",
    "2024-05-01T10:00:00.123Z WARN token refresh scheduled in 300s",
    'headers["X-Api-Key"] = api_key',
    "login(user, password=password)",
    'fields = ["username", "password"]',
    "    token=settings.token",
    "tokens: 5",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJRTES\n"
    "-----END CERTIFICATE-----",
]


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_text_is_untouched(line: str) -> None:
    res = redact(line)
    assert res.text == line
    assert res.kinds == ()
    assert not contains_secret(line)


@pytest.mark.parametrize("depth", [1, 2])
def test_ordinary_text_inside_json_is_untouched(depth: int) -> None:
    for line in ORDINARY:
        payload = '{"stdout": "' + _encode(line, depth) + '"}'
        assert redact(payload).text == payload


def test_ordinary_corpus_is_large() -> None:
    assert len(ORDINARY) >= 40


def test_ordinary_text_survives_as_one_document() -> None:
    doc = "\n".join(ORDINARY)
    assert redact(doc).text == doc


@pytest.mark.parametrize("line", [line for _, line, _ in SECRETS] + ORDINARY)
def test_redact_is_idempotent(line: str) -> None:
    once = redact(line)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.kinds == ()  # a marker is never re-flagged


def test_markers_alone_are_not_secrets() -> None:
    text = " ".join(f"{k}=[REDACTED:{k}] '[REDACTED:{k}]' Authorization: Bearer [REDACTED:{k}]" for k in KINDS)
    assert not contains_secret(text)


def test_kinds_are_sorted_and_unique() -> None:
    res = redact(f"{GHP} {GHO} {AWS_ID} {GHS}")
    assert res.kinds == ("aws_access_key", "github_token")
    assert res.text.count("[REDACTED:github_token]") == 3


def test_contains_secret_matches_redact() -> None:
    assert contains_secret(f"token {GHP}") is True
    assert contains_secret("nothing to see here") is False
    assert contains_secret("") is False
    assert redact("") == RedactResult("", ())


N = 1 << 20  # 1 MiB


def _fill(unit: str) -> str:
    return (unit * (N // len(unit) + 1))[:N]


ADVERSARIAL = {
    "letters": "a" * N,
    "whitespace": " \t\n" * (N // 3),
    "jwt-prefix": _fill("eyJ"),
    "jwt-segments": _fill("eyJaaaaaaaaa."),
    "pem-begin": _fill("-----BEGIN PRIVATE KEY-----"),
    "pem-headers": _fill("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"),
    "pem-unterminated": "-----BEGIN PRIVATE KEY-----\n" + _fill("MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"),
    "env-pairs": _fill("password=x "),
    "env-quotes": _fill('"password": "'),
    "env-escaped": _fill('\\"password\\": \\"a'),
    "env-open-quote": 'password="' + _fill('a\\"'),
    "url-no-at": _fill("a://a:"),
    "url-many": _fill("a://b:c@"),
    "url-at-run": "postgres://u:" + _fill("p@"),
    "auth-header": _fill("Authorization: Bearer "),
    "dashes": _fill("x-"),
    "key-dashes": _fill("password-"),
    "aws-prefix": _fill("AKIA"),
    "openai-prefix": _fill("sk-"),
    "yaml-colons": _fill("token: "),
    "short-flag": _fill(" -p"),
    "query": _fill("&sig=a"),
    "cjk-emoji-nul": _fill("日本語🔑\x00"),
    "escaped-keys": _fill('password\\\\\\": \\\\\\"a'),
    "escaped-quotes": _fill('password: \\"\\\\'),
    "escaped-pem": _fill("-----BEGIN PRIVATE KEY-----\\\\\\\\n"),
    "yaml-lines": _fill('"\n  - password: x'),
    "tool-flags": _fill("sqlcmd ldapx zip 7z smbclient -U u"),
    "tool-far-flag": _fill("ldapsearch " + "a" * 190 + " -w"),
    "pass-flags": _fill("-storepass -passin pass:"),
    "htpasswd-opts": _fill("htpasswd -b -n -c 12 "),
    "stdin-pipes": _fill("echo a | sudo -S x <<< "),
    "prompts": _fill("Password for 'x': "),
    "pem-numbered": "-----BEGIN PRIVATE KEY-----\n" + _fill("  12\tMIIEvQIBADANBgkq\n> "),
    "mixed": _fill(
        'password=ghp_AKIA eyJ.eyJ sk-ant- postgres://a:b@ -----BEGIN PRIVATE KEY-----\n"private_key": "'
    ),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_one_mebibyte_adversarial_line_is_fast(name: str) -> None:
    text = ADVERSARIAL[name]
    # CPU time of this process, not wall time: a busy CI box must not fail a linear scan,
    # while catastrophic backtracking on 1 MiB would still take minutes of CPU.
    t0 = time.process_time()
    res = redact(text)
    elapsed = time.process_time() - t0
    assert elapsed < 5.0, f"{name}: {elapsed:.2f}s CPU for 1 MiB"  # linear: ~1 s; backtracking: minutes
    assert isinstance(res.text, str)


FRAGMENTS = [
    "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", '"private_key": "', "Proc-Type: 4",
    "password", "Token", "api_key", "auth", "=", ":", " = ", '"', "'", "\\n", "\\", "\n", " ", "://",
    "@", "Authorization: Bearer ", "X-Api-Key: ", "eyJ", ".", "AKIA", "ghp_", "sk-", "sk-ant-",
    "--token ", "-p", "?key=", "&sig=", "[REDACTED:jwt]", "[", "]", "(", ")", ",", "f", "${", "}",
    "AccountKey=", "xoxb-", "glpat-", "sqlcmd -P ", "htpasswd -nb ", "7z -p", "-storepass ", " | sudo -S",
    "<<< ", "echo ", "Password for '", "': ", "→", "\t", HI, PASSWORD, "日本🔑", "\x00", "\ud800", "é",
]  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_any_string_never_raises_and_stays_idempotent(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 40)))
        res = redact(text)
        assert isinstance(res, RedactResult) and set(res.kinds) <= set(KINDS)
        assert redact(res.text).text == res.text, text
        assert contains_secret(text) == (res.text != text)


@pytest.mark.parametrize(
    "text",
    ["", "-----BEGIN PRIVATE KEY----------END PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----",
     '"private_key": "-----BEGIN PRIVATE KEY-----', "://:@", "password=", '"password": "',
     "Authorization: ", "\\", "-p", "--token ", "AccountKey=", "sk-", "eyJ", "\x00" * 10],
)  # fmt: skip
def test_degenerate_fragments_pass_through(text: str) -> None:
    assert redact(text) == RedactResult(text, ())


def test_triggers_only_skip_rules_that_cannot_match(monkeypatch) -> None:
    # A rule runs only when one of its triggers occurs; a trigger is a substring every
    # match of the rule holds. Running every rule on every text must change nothing.
    texts = [line for _, line, _ in SECRETS] + ORDINARY
    rng = random.Random(7)
    texts += ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 40))) for _ in range(1000)]
    texts += ["all 12 tests passed", "PASSWORD=Zq1pwA9x", "https://h/?pass=Qx8vZr2LmN4pT6wY9sKd", "passwd: hunter2x"]
    gated = [(redact(t), contains_secret(t)) for t in texts]
    every = list(range(len(redact_mod._RULES)))
    monkeypatch.setattr(redact_mod, "_triggered_rules", lambda lowered: every)
    assert [(redact(t), contains_secret(t)) for t in texts] == gated
    assert sum(found for _, found in gated) >= len(SECRETS)


def test_the_trigger_scan_starts_exactly_the_rules_whose_trigger_occurs_in_order() -> None:
    assert all(t.isascii() for t in redact_mod._TRIGGERS)  # the scan runs over UTF-8
    rng = random.Random(11)
    texts = [line for _, line, _ in SECRETS] + ORDINARY + ["", "\ud800pass=", "日本--passwd\x00"]
    texts += ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 40))) for _ in range(1000)]
    for text in texts:
        lowered = redact_mod._MARKER.sub(" ", text).lower()
        wanted = [n for n, rule in enumerate(redact_mod._RULES) if any(t in lowered for t in rule[1])]
        assert redact_mod._triggered_rules(lowered) == wanted, text
