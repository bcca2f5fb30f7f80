"""Planted secrets and decoys, generated at test time from fragments (no real key, and nothing in
the repository that a secret scanner would flag).

``planted()`` gives at least 30 shapes across every rule kind: each a text holding one secret,
the kind its marker must name, and the secret's value (so a test can assert it is gone).
``decoys()`` gives texts that look like secrets and are not: git SHAs, UUIDs, lockfile hashes,
base64 image data, file paths, version strings, Pi's own ids, code that names a password.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid
from dataclasses import dataclass

_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "-_"
_B64 = _ALNUM + "+/"


@dataclass(frozen=True)
class Plant:
    """A text holding one secret of ``kind``; ``value`` is what must not survive."""

    shape: str
    kind: str
    value: str
    text: str


def _rand(rng: random.Random, n: int, alphabet: str = _ALNUM) -> str:
    # Every class of the alphabet shows, as in real tokens (some guards ask for them).
    classes = [cls for cls in (str.isupper, str.islower, str.isdigit) if any(map(cls, alphabet))]
    while True:
        out = "".join(rng.choice(alphabet) for _ in range(n))
        if all(any(map(cls, out)) for cls in classes):
            return out


def _join(*parts: str) -> str:
    return "".join(parts)


def planted(seed: int = 7) -> list[Plant]:
    rng = random.Random(seed)
    r = lambda n, a=_ALNUM: _rand(rng, n, a)  # noqa: E731
    sk = _join("s", "k-")
    begin = _join("-----", "BEGIN ")
    end = _join("-----", "END ")
    pk = _join("PRIVATE", " KEY-----")
    key_body = "\n".join(r(64, _B64) for _ in range(4))
    jwt = ".".join(
        [
            base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("="),
            base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"Ada"}').decode().rstrip("="),
            r(43, _URLSAFE),
        ]
    )
    plants: list[tuple[str, str, str, str]] = []

    def add(shape: str, kind: str, value: str, template: str) -> None:
        plants.append((shape, kind, value, template.replace("{v}", value)))

    anthropic = _join(sk, "ant-", "api03-", r(93, _URLSAFE), "AA")
    add("anthropic in prose", "anthropic", anthropic, "my key is {v} please keep it")
    add("anthropic env", "anthropic", anthropic, "ANTHROPIC_API_KEY={v}")
    add("openai legacy", "openai", _join(sk, r(48)), "export OPENAI_API_KEY={v}")
    add("openai project", "openai", _join(sk, "proj-", r(120, _URLSAFE)), 'client = OpenAI(api_key="{v}")')
    add(
        "github classic",
        "github",
        _join("gh", "p_", r(36)),
        "git remote set-url origin https://{v}@github.com/o/r",
    )
    add("github fine-grained", "github", _join("github", "_pat_", r(22), "_", r(59)), "GH_TOKEN={v}")
    add("github app", "github", _join("gh", "s_", r(36)), "token: {v}")
    add(
        "gitlab",
        "gitlab",
        _join("gl", "pat-", r(20, _URLSAFE)),
        "curl --header 'PRIVATE-TOKEN: {v}' https://gitlab.example/api",
    )
    add(
        "slack bot",
        "slack",
        _join("xo", "xb-", str(rng.randrange(10**11, 10**12)), "-", r(24)),
        "SLACK_BOT_TOKEN={v}",
    )
    add(
        "slack webhook",
        "slack",
        _join("https://hooks.", "slack.com/services/T", r(8).upper(), "/B", r(8).upper(), "/", r(24)),
        "posting to {v} now",
    )
    add("stripe live", "stripe", _join("sk", "_live_", r(24)), "stripe.api_key = '{v}'")
    add("stripe webhook", "stripe", _join("wh", "sec_", r(32)), "STRIPE_WEBHOOK={v}")
    add(
        "google api key", "google", _join("AI", "za", r(35, _URLSAFE)), "https://maps.example/api?key={v}&q=1"
    )
    add("google oauth", "google", _join("ya", "29.", r(60, _URLSAFE)), "access_tok {v} expires")
    add("aws key id", "aws-access-key-id", _join("AK", "IA", r(16).upper()), "aws_access_key_id = {v}")
    aws_secret = r(40, _B64)
    add("aws secret ini", "aws-secret-access-key", aws_secret, "aws_secret_access_key = {v}")
    add("aws secret env", "aws-secret-access-key", aws_secret, "AWS_SECRET_ACCESS_KEY={v}")
    add("aws secret json", "aws-secret-access-key", aws_secret, '{"AwsSecretAccessKey": "{v}"}')
    add("npm", "npm", _join("np", "m_", r(36)), "//registry.npmjs.org/:_authToken={v}")
    add("huggingface", "huggingface", _join("h", "f_", r(34, string.ascii_letters)), "HF_TOKEN={v}")
    add(
        "private key",
        "private-key",
        _join(begin, "RSA ", pk, "\n", key_body, "\n", end, "RSA ", pk),
        "id_rsa:\n{v}\n",
    )
    add(
        "private key json",
        "private-key",
        _join(begin, pk, "\\n", key_body.replace("\n", "\\n"), "\\n", end, pk, "\\n"),
        '{"private_key": "{v}", "client_email": "a@b.iam"}',
    )
    add(
        "private key cut", "private-key", _join(begin, "OPENSSH ", pk, "\n", key_body), "$ cat ~/.ssh/id\n{v}"
    )
    add("jwt", "jwt", jwt, "cookie session={v}; Path=/")
    add("bearer header", "bearer", r(32, _URLSAFE), "curl -H 'Authorization: Bearer {v}' https://api.example")
    add("basic header", "bearer", base64.b64encode(r(20).encode()).decode(), "Authorization: Basic {v}")
    add("postgres url", "url-credentials", "hunter2", "DATABASE_URL=postgres://app:{v}@db:5432/app")
    add("redis url", "url-credentials", r(16), "redis://default:{v}@cache.internal:6379/0")
    add("password env", "password", "hunter2", "DB_PASSWORD=hunter2")
    add("password shell", "password", "c0rrect-h0rse!", "export PGPASSWORD='{v}'")
    add("password json", "password", "s3cr3t-Passw0rd", '{"user": "ada", "password": "{v}"}')
    add("password yaml", "password", "Tr0ub4dor&3", "db:\n  user: ada\n  password: {v}\n")
    add("password toml", "password", "P@ssw0rd-2024", '[database]\npassword = "{v}"\n')
    add("password flag", "password", "Zx9-qq2k", "mysqladmin --password {v} status")
    add("secret env", "secret", r(24), "CLIENT_SECRET={v}")
    add("secret yaml", "secret", r(24), "jwt_secret: {v}")
    add("token json escaped", "token", r(30), '{\\"auth_token\\": \\"{v}\\"}')
    add("token toml", "token", r(30), 'token = "{v}"')
    add("api key env", "api-key", r(32), "MAILGUN_API_KEY={v}")
    add("api key header", "api-key", r(32), "X-Api-Key: {v}")
    add("entropy", "high-entropy", r(40, _B64), 'SERVICE_CREDENTIAL = "{v}"')
    add("entropy yaml", "high-entropy", r(32), "signing_seed: {v}")
    return [Plant(shape, kind, value, text) for shape, kind, value, text in plants]


def decoys(seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    sha = lambda: hashlib.sha1(str(rng.random()).encode()).hexdigest()  # noqa: E731
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(600))).decode()
    sri = base64.b64encode(hashlib.sha512(b"left-pad").digest()).decode()
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    return [
        f"commit {sha()}\nAuthor: Ada <ada@example.com>",
        f"git checkout {sha()} && git log {sha()[:12]}..{sha()}",
        f"Merge: {sha()[:7]} {sha()[:7]}",
        f'"sessionId": "{sid}", "id": "{sid[:8]}", "parentId": "{uuid.UUID(int=rng.getrandbits(128)).hex[:8]}"',
        f"session {sid} at ~/.pi/agent/sessions/--work-app--/2025-01-02T03-04-05-678Z_{sid}.jsonl",
        f'"integrity": "sha512-{sri}"',
        f'  resolved "https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz#{sha()}"\n  integrity sha512-{sri}',
        f'checksum = "{hashlib.sha256(b"x").hexdigest()}"',
        f'{{file = "pkg-1.0-py3-none-any.whl", hash = "sha256:{hashlib.sha256(b"y").hexdigest()}"}}',
        f'{{"type": "image", "data": "{png}", "mimeType": "image/png"}}',
        f"![chart](data:image/png;base64,{png})",
        "/home/ada/projects/app/src/components/PasswordResetForm.tsx:42:7",
        "src/pbot_watch/redact/rules.py tests/support/planted.py ../shared/fixtures/pi-sessions/real-v3",
        "version = 1.2.3-beta.4+build.567 and node v20.11.1, python 3.11.9, 2.0.0rc1",
        '"toolCallId": "toolu_01A09q90qw90lq917835lq9X", "id": "call_Ab3dE5gH7jK9mN1pQ3sT5vX7"',
        '"responseId": "chatcmpl-9AbCdEfGh1JkLmNoPqRsTuVwXyZ", "api": "openai-responses"',
        "The risk-based approach and the disk-sk-cleanup task are fine; ask-sk-learn later.",
        "scikit-learn is sk-learn; sk-this-is-a-very-long-kebab-case-name-of-a-thing",
        "password_hash = bcrypt(pw)\nPASSWORD_MIN_LENGTH = 12\nif not password: raise",
        "def login(user: str, password: str, token: str | None = None) -> Session:",
        "token = get_token()\npassword = os.environ['DB_PASSWORD']\nsecret = settings.secret_key",
        "connect(user=user, password=password, token=self.token)",
        'password: ${{ secrets.DB_PASSWORD }}\napi_key: "${OPENAI_API_KEY}"\ntoken: <your-token>',
        '"password": "Mot de passe", "token": "Jeton d\'accès"',
        "max_tokens = 4096\ntoken_count: 1200\n--token-limit 50",
        "Bearer tokens are sent in the Authorization header.",
        "postgres://localhost:5432/app and http://[::1]:8080/x and user@host.example:22",
        f"uuid = {uuid.UUID(int=rng.getrandbits(128))}\nrequest_id={uuid.UUID(int=rng.getrandbits(128))}",
        f'ETag: W/"{hashlib.md5(b"z").hexdigest()}"\netag = {hashlib.sha1(b"q").hexdigest()}',
        f'"sha": "{sha()}", "tree": {{"sha": "{sha()}"}}',
        "AKIA is a prefix; ghp_ is one too; npm_config_cache=/tmp/npm",
        "class AuthTokenProvider(TokenProvider):\n    api_key_env = 'OPENAI_API_KEY'",
        "ModuleNotFoundError: No module named 'hf_transfer'",
        "[redacted:openai] and password=[redacted:password]",
        "export ANTHROPIC_API_KEY=sk-ant-...\nexport GROQ_API_KEY=gsk_...\nexport XAI_API_KEY=xai-…",
        "printf 'OPENAI_API_KEY=sk-...\\n' > ~/.config/env; scheme://user:password@host",
        "or raises, every text counts as holding a secret: nothing leaves",
        '"input_cost_per_token": 0.00003,\n    _input_cost_per_token: float | None = None',
        'api_key = "api_key"\nbearer_token = "bearer_token"\nclient_secret = "CLIENT_SECRET"',
        '- api_key: Optional. The key.\n  "api_key": "os.environ/PERPLEXITYAI_API_KEY"',
        '{"client_secret": "AZURE_CLIENT_SECRET", "token": "watsonx_token", "eos_token": "stop"}',
        'token="__team_scope_auth_check__", api_key="[REDACTED]", apiKey="pat/<token>", x_token=final_value',
        '"access_token": "glpat_***", "api_key": "sk-1****cdef", latency per output token: `{value}s/token`',
    ]
