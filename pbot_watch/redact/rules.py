"""The rule table: which shapes of text are secrets, and the guards that keep look-alikes out.

Each rule is a kind (what the marker ``[redacted:<kind>]`` names), literal *anchors* (the text
a match starts with), a pattern matched at each place where one of its anchors occurs, and a
guard that looks at the match and says whether it really is a secret. The replaced span is the
pattern's group ``secret`` (or ``bare``), else the whole match: ``DB_PASSWORD=hunter2`` becomes
``DB_PASSWORD=[redacted:password]``.

Anchoring is what makes redaction cheap on Pi's tool outputs (hundreds of megabytes on a heavy
user's disk): one scan of a text by ``HOLDS_ANCHOR``, one expression of every anchor run by
RE2, finds the few places worth a look; a text with none costs that scan only. Key words
(``password``, ``token``...) are anchored in their lower, Title and UPPER forms, which covers
``db_password``, ``dbPassword``, ``DB_PASSWORD`` and ``X-Api-Key``.

==========================  =====================================================  ==========================
kind                        shape                                                  guard
==========================  =====================================================  ==========================
``private-key``             ``-----BEGIN … PRIVATE KEY-----`` up to its END line    none: the header is enough
                            (or the end of its base64 run when the END is cut)
``anthropic``               ``sk-ant-<kind><nn>-…``                                 word boundary
``openai``                  ``sk-…``, ``sk-proj-…``, ``sk-svcacct-…``, 20+          word boundary (``risk-based``
                                                                                    is not a key); upper, lower
                                                                                    and digit in the body
``github``                  ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36, ``github_pat_…``     word boundary
``gitlab``                  ``glpat-`` and the other ``gl…-`` token prefixes        letters and digits
``slack``                   ``xox[abposr]-…``, ``xapp-…``, webhook URLs             a digit in the body
``stripe``                  ``sk_live_ sk_test_ rk_… whsec_…``                      word boundary
``google``                  ``AIza`` + 35, ``ya29.…``, ``GOCSPX-…``                 word boundary
``aws-access-key-id``       ``AKIA``/``ASIA``/… + 16 upper-case letters and digits   word boundary
``aws-secret-access-key``   ``aws_secret_access_key = <40 base64>`` in any shape    exactly 40 characters
``npm``                     ``npm_`` + 36                                           word boundary
``huggingface``             ``hf_`` + 34 to 40                                      upper and lower case
``jwt``                     three base64url parts, the first ``eyJ``               none
``bearer``                  ``Bearer <token>``, ``Authorization: Basic|Token …``    token-like (a digit, or
                                                                                    mixed case and 20+)
``url-credentials``         ``scheme://user:<password>@host``                       not a placeholder
``password`` ``secret``     ``KEY=value`` ``export KEY='v'`` ``"key": "v"``          the key *ends* with the word
``token`` ``api-key``       ``key: v`` ``key = "v"`` ``--password v``               (``password_hash`` is not
                                                                                    one); the value is a literal,
                                                                                    not a placeholder, reference,
                                                                                    type, number or prose
``high-entropy``            ``key <op> value`` where the key names a credential     upper, lower and digit;
                            loosely (``*key*``, ``auth``, ``cred``, ``cookie``,      Shannon entropy; not a hex
                            ``salt``, ``seed``, ``signing``) and the value has 20   digest, UUID, path, URL,
                            to 256 token characters                                 lockfile hash, image data or
                                                                                    an id (by key or prefix)
==========================  =====================================================  ==========================

Order matters: when two rules match overlapping text, the earlier one in ``RULES`` names the
kind (``OPENAI_API_KEY=sk-…`` is ``openai``, not ``api-key``). Bare 40-hex strings are never
matched: they are git SHAs. The entropy tier asks for a key that names a credential because a
random-looking value under any key is everyday tool output (ETags, node ids, cursors), and
what a person names ``password``, ``secret``, ``token`` or ``api_key`` has its own rule.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

MARKER_PREFIX = "[redacted:"
"""How a redacted span starts; a value that already is a marker is never redacted again."""

Guard = Callable[[re.Match[str]], bool]

_SECRET_GROUPS = ("secret", "bare")


class LazyPattern:
    """A regular expression compiled on its first use, not when the table is imported.

    Compiling every rule and guard costs a process tens of milliseconds, and most never need
    one: a command's output is scrubbed, but text with no anchor in it (nearly all of it) is
    answered by the prefilter alone. A pattern is compiled where its anchor first occurs.
    """

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled.groupindex

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(text, pos, endpos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the table (see the module's docstring)."""

    kind: str
    pattern: LazyPattern
    """Matched (``Pattern.match``) where an anchor occurs; it may look behind that place."""
    anchors: tuple[str, ...]
    """The literal text a match starts with; only where one occurs is ``pattern`` tried."""
    guard: Guard | None = None
    """``True`` when the match is a secret; ``None`` accepts every match."""

    def span(self, match: re.Match[str]) -> tuple[int, int]:
        """The part of a match that is replaced: group ``secret`` or ``bare``, else the whole match."""
        for name in _SECRET_GROUPS:
            if name in self.pattern.groupindex and match.start(name) >= 0:
                return match.span(name)
        return match.span()


def cased(*words: str) -> tuple[str, ...]:
    """Each word in lower, Title and UPPER case: how key names are written."""
    return tuple(dict.fromkeys(form for word in words for form in (word, word.title(), word.upper())))


def _classes(value: str) -> tuple[bool, bool, bool]:
    return (
        any(c.isupper() for c in value),
        any(c.islower() for c in value),
        any(c.isdigit() for c in value),
    )


def _mixed(group: str) -> Guard:
    """Upper case, lower case and a digit: a random token, not a kebab-case name."""

    def guard(match: re.Match[str]) -> bool:
        return all(_classes(match.group(group)))

    return guard


def _letters_and_digits(group: str) -> Guard:
    def guard(match: re.Match[str]) -> bool:
        upper, lower, digit = _classes(match.group(group))
        return digit and (upper or lower)

    return guard


def _cases(group: str) -> Guard:
    def guard(match: re.Match[str]) -> bool:
        upper, lower, _ = _classes(match.group(group))
        return upper and lower

    return guard


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


_PLACEHOLDER = LazyPattern(
    r"""^(?:
        \$.*                      # $VAR, ${VAR}, $(cmd)
      | %.*                       # %s, %(name)s
      | .*\{\{.*                  # {{ template }}, ${{ secrets.X }}
      | .*\{[A-Za-z_][\w.]*\}.*   # {name}: a format string
      | .*(?:\*{3,}|[xX]{4,}).*    # sk-1****cdef, glpat_***, xxxx: masked
      | <[^>]*>?                  # <your-token>
      | [*xX.•#-]{3,}             # ****, xxxx, ..., ----
      | .*(?:\.\.\.|…).*           # sk-ant-..., gsk_…: a prefix shown, the rest left out
      | \[redacted.*              # already redacted (by us or by the tool that printed it)
      | .*<[^>]*>.*               # pat/<token>
      | \{.*                      # {file: ...}: a template
      | (?:your|my|the|example|sample|dummy|fake|test)[-_ ]?(?:password|passwd|secret|token|api[-_]?key|key)s?
    )$""",
    re.VERBOSE | re.IGNORECASE,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_NOT_VALUES = _words(  # and the keywords that follow ``if not password:``
    """null none nil true false undefined required optional empty string str int bytes bool
    boolean number any object secret secrets password passwords passwd token tokens key keys
    apikey api_key redacted hidden masked unset default env environ raise return pass continue
    break yield await lambda not and or if else in is self this new const let var float dict list
    tuple set unknown never void nothing"""
)
"""Words that stand where a value would, in code, schemas and docs: ``password: string``."""

_REFERENCE = LazyPattern(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$")
"""``self.token``, ``os.environ.X``, ``settings.api_key``: a dotted name, not a literal."""

_IDENTIFIER = LazyPattern(r"^[A-Za-z_]\w*$")

_KIND_WORDS = LazyPattern(r"pass|secret|token|key|auth|cred", re.IGNORECASE)

_PROSE = LazyPattern(r"^[^\W\d_]+(?:[ ,.'!?-]+[^\W\d_]+)+[.!?]?$")
"""Two or more words of letters: a label or a sentence (``"password": "Mot de passe"``)."""

_TYPE_NAMES = LazyPattern(r"^(?:[A-Z][A-Za-z]*|Optional\[.*|list\[.*|dict\[.*)$")
"""A type in an annotation (``token: SecretStr``); a value with a digit in it is no type name."""


_NUMBER = LazyPattern(r"^[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_ENVIRONMENT = ("os.environ", "process.env", "env.", "env:", "ENV[", "secrets.", "vault:")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.")
_SYMBOLS = LazyPattern(r"[\d!@#$%^&*+=?~/|]")


def _key_before(text: str, end: int) -> tuple[str, str]:
    """The key that ends at ``end`` (the anchor word starts its last part) and what precedes it on its line."""
    start = end
    while start > 0 and text[start - 1] in _KEY_CHARS and end - start < 64:
        start -= 1
    line_start = text.rfind("\n", 0, start) + 1
    return text[start:end], text[line_start:start]


_SNAKE = LazyPattern(r"^_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+_*$|^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
"""``final_value``, ``input_rate``, ``AZURE_CLIENT_SECRET``: a variable or a variable's name."""

_GENERIC = LazyPattern(r"^[A-Z]\w*\[.*\]$")
"""``"Token[Mapping[str, str] | None]"``: a type in quotes."""


def _literal_value(match: re.Match[str], value: str, value_end: int, *, words_too: bool = False) -> bool:
    """Whether an assignment's value is a literal secret rather than code, a schema, prose or a placeholder."""
    op = match.group("op")
    if _PLACEHOLDER.match(value):
        return False
    value = value.rstrip(".,;:")  # a sentence's end is not the value's
    if len(value) < 4 or not value.strip():
        return False
    if _PLACEHOLDER.match(value) or value.casefold() in _NOT_VALUES or _NUMBER.match(value):
        return False
    if value.isdigit() and len(value) < 8:
        return False  # max_token = 1000, a port
    if value[0] in "/~" or value.startswith(("./", "../", *_ENVIRONMENT)) or "://" in value:
        return False  # a path, a URL (URL credentials have their own rule), the environment
    key, before = _key_before(match.string, match.end("op") - len(op))
    if value == key or value.casefold() == key.casefold():
        return False  # api_key = "api_key": a name, as enums and constants have
    if not words_too and value.isalpha() and value.islower() and len(value) < 16:
        return False  # "eos_token": "stop": a token or key is random, a password may be a word
    if _SNAKE.match(value) or (_IDENTIFIER.match(value) and _KIND_WORDS.search(value)):
        return False  # output_token=final_value, "token": "watsonx_token", "AZURE_CLIENT_SECRET"
    if match.group("quote"):
        return not _PROSE.match(value) and not _GENERIC.match(value)
    # An unquoted value: keep what is plainly code out.
    after = match.string[value_end : value_end + 1]
    if after in ("(", "[", "."):
        return False  # get_token(), tokens[0], a.b
    if _REFERENCE.match(value) or (_IDENTIFIER.match(value) and _KIND_WORDS.search(value)):
        return False  # password=password, token = self._token
    bare_op = op.strip().lstrip("\\\"'")
    spaced = op != op.strip()
    if not bare_op:
        # ``--password hunter2``: a value after blanks only follows a long option.
        return key.startswith("--")
    if bare_op == ":":
        if _TYPE_NAMES.match(value) or not spaced:
            return False  # token: Optional[str], password: SecretStr; a:b is no YAML
        if before.strip(" \t-#*>") and not _SYMBOLS.search(value):
            return False  # mid-sentence "holding a secret: nothing"; "my password: hunter2" still goes
        if re.match(r" +[A-Za-z]", match.string[value_end : value_end + 3]):
            return False  # "- access_token: gitlab access token": a description, not a value
    return not (bare_op in ("=", ":=") and spaced and _IDENTIFIER.match(value))  # a variable in code


# The value of an assignment: a quoted string (JSON-in-JSON quotes ``\"`` included) or a bare run.
_VALUE = r"""(?P<quote>\\?["'`])(?P<secret>(?:[^"'`\\\n]|\\[^"'`\n]){1,256})
           | (?P<bare>[^\s"'`,;(){}\[\]<>]{1,256})"""

_OP = r"""\\?["']?[ \t]*(?:=>|:=|[:=])[ \t]*"""
"""Between a key and its value: ``=``, ``: ``, ``" = "``, ``\\": \\"``, ``=>``, ``:=``."""


def _assignment(words: str) -> LazyPattern:
    """``<key ending in one of words> <op> <value>`` in env, shell, JSON, YAML, TOML and flag shapes."""
    return LazyPattern(
        rf"""(?:{words})(?![A-Za-z0-9])
             (?P<op>{_OP}|[ \t]+)
             (?:{_VALUE})""",
        re.VERBOSE | re.IGNORECASE,
    )


def _assignment_guard(words_too: bool) -> Guard:
    def guard(match: re.Match[str]) -> bool:
        name = "secret" if match.start("secret") >= 0 else "bare"
        return _literal_value(match, match.group(name), match.end(name), words_too=words_too)

    return guard


def _assignment_rule(kind: str, words: str, anchors: tuple[str, ...]) -> Rule:
    return Rule(kind, _assignment(words), anchors, guard=_assignment_guard(words_too=kind == "password"))


_AWS_SECRET = LazyPattern(
    rf"""aws_?secret(?:_?access)?_?key{_OP}\\?["']?
        (?P<secret>[A-Za-z0-9/+=]{{40}})(?![A-Za-z0-9/+=])""",
    re.VERBOSE | re.IGNORECASE,
)

_HINTS = ("key", "auth", "cred", "cookie", "salt", "seed", "sign")

# The entropy tier: a key naming a credential loosely, then a long run of token characters.
_ENTROPY = LazyPattern(
    rf"""(?i:{"|".join(_HINTS)})(?P<rest>[\w.\-]{{0,40}}?){_OP}\\?["']?
        (?P<secret>[A-Za-z0-9+/_\-.~]{{20,}}={{0,2}})(?![A-Za-z0-9+/_\-.~=])""",
    re.VERBOSE,
)

_KEY_PART = LazyPattern(r"[A-Za-z0-9]+$")
_LAST_WORD = LazyPattern(r"(?:[A-Z]?[a-z0-9]+|[A-Z0-9]+)$")

_NOT_SECRET_WORDS = _words(
    """id ids uid uuid guid hash sha sha1 sha256 sha512 md5 digest checksum integrity etag commit
    rev revision ref version url uri href src path file filename dir name type mime mimetype data
    image content text message title description cursor offset parent tool model timestamp
    nonce signature sig hint prompt label class style color font locale lang count len length
    size format mode algorithm alg kind field column index idx"""
)
"""The last word of a key whose value, however random it looks, is not a credential."""

_NOT_SECRET_VALUES = LazyPattern(
    r"""^(?:
        [0-9a-fA-F]+                                  # a hex digest
      | [0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}   # a UUID
      | (?:sha\d+|md5)[-:].*                          # lockfile and SRI hashes
      | (?:iVBORw0KGgo|/9j/|R0lGOD|UklGR|PHN2Zy|JVBERi).*  # base64 PNG, JPEG, GIF, WebP, SVG, PDF
      | (?:toolu_|call_|msg_|chatcmpl-|resp_|fc_|rs_|req_|srvtoolu_).*  # providers' ids
      | [\w.\-]*/[\w.\-/]*\.\w{1,8}                   # a path with an extension
      | v?\d+(?:\.\d+)+[\w.+\-]*                      # a version
    )$""",
    re.VERBOSE,
)

_ENTROPY_MAX = 256
"""Longer runs are data (images, blobs), not credentials."""


def _threshold(n: int) -> float:
    """Bits per character a random token of n characters clears comfortably and words do not."""
    return min(4.5, 0.78 * math.log2(n))


def _high_entropy(match: re.Match[str]) -> bool:
    secret = match.group("secret").rstrip(".-")
    if not 20 <= len(secret) <= _ENTROPY_MAX:
        return False
    before = _KEY_PART.search(match.string, max(0, match.start() - 64), match.start())
    key = (before.group() if before else "") + match.group()[: match.end("rest") - match.start()]
    last = _LAST_WORD.search(key.rstrip("_.-"))
    if (last and last.group().lower() in _NOT_SECRET_WORDS) or key.lower().endswith("id"):
        return False
    if _NOT_SECRET_VALUES.match(secret) or "://" in secret:
        return False
    if secret[0] in "/~." or secret.count("/") > 2:
        return False  # a path
    if not all(_classes(secret)):
        return False
    return entropy(secret) >= _threshold(len(secret))


_B = r"(?<![A-Za-z0-9_\-])"  # a token's left word boundary: risk-based does not hold sk-
_E = r"(?![A-Za-z0-9_\-])"

_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA")

RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        LazyPattern(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]{0,65536}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:\\[nr]|[\sA-Za-z0-9+/=:,\-])*)"
        ),
        ("-----BEGIN",),
    ),
    Rule(
        "anthropic",
        LazyPattern(rf"{_B}sk-ant-[a-z]{{2,10}}\d{{0,3}}-[A-Za-z0-9_\-]{{20,}}{_E}"),
        ("sk-",),
    ),
    Rule(
        "openai",
        LazyPattern(rf"{_B}sk-(?:(?:proj|svcacct|admin|None)-)?(?P<body>[A-Za-z0-9_\-]{{20,}}){_E}"),
        ("sk-",),
        guard=_mixed("body"),
    ),
    Rule(
        "github",
        LazyPattern(rf"{_B}(?:gh[pousr]_[A-Za-z0-9]{{36,251}}|github_pat_[A-Za-z0-9_]{{40,}}){_E}"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Rule(
        "gitlab",
        LazyPattern(
            rf"{_B}gl(?:pat|dt|rt|ptt|ft|soat|cbt|oas|imt|agent)-(?P<body>[A-Za-z0-9_\-]{{20,}}){_E}"
        ),
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "gloas-", "glimt-", "glagent-"),
        guard=_letters_and_digits("body"),
    ),
    Rule(
        "slack",
        LazyPattern(
            rf"{_B}(?:xox[abposr]-(?P<body>[A-Za-z0-9\-]{{10,}})|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)"
            r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"
        ),
        ("xox", "xapp-", "hooks.slack.com/"),
        guard=lambda m: m.start("body") < 0 or any(c.isdigit() for c in m.group("body")),
    ),
    Rule(
        "stripe",
        LazyPattern(rf"{_B}(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}}|whsec_[A-Za-z0-9]{{24,}}){_E}"),
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
    ),
    Rule(
        "google",
        LazyPattern(
            rf"{_B}(?:AIza[0-9A-Za-z_\-]{{35}}|ya29\.[0-9A-Za-z_\-]{{30,}}|GOCSPX-[0-9A-Za-z_\-]{{28}}){_E}"
        ),
        ("AIza", "ya29.", "GOCSPX-"),
    ),
    Rule(
        "aws-access-key-id",
        LazyPattern(rf"(?<![A-Za-z0-9])(?:{'|'.join(_AWS_PREFIXES)})[A-Z0-9]{{16}}(?![A-Za-z0-9])"),
        _AWS_PREFIXES,
    ),
    Rule("aws-secret-access-key", _AWS_SECRET, cased("aws")),
    Rule("npm", LazyPattern(rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}"), ("npm_",)),
    Rule(
        "huggingface",
        LazyPattern(rf"{_B}hf_(?P<body>[A-Za-z0-9]{{34,40}}){_E}"),
        ("hf_",),
        guard=_cases("body"),
    ),
    Rule(
        "jwt",
        LazyPattern(rf"{_B}eyJ[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}\.[A-Za-z0-9_\-]{{10,}}{_E}"),
        ("eyJ",),
    ),
    Rule(
        "bearer",
        LazyPattern(
            r"""(?:[Bb]earer|BEARER
                  |(?i:authorization)\\?["']?[ \t]*[:=][ \t]*\\?["']?(?:(?:Basic|Token|token|Digest|Bearer|bearer)(?=[ \t]))?)
                [ \t]*(?P<secret>[A-Za-z0-9\-._~+/]{12,}=*)""",
            re.VERBOSE,
        ),
        (*cased("bearer"), *cased("authorization")),
        guard=lambda m: (
            any(c.isdigit() for c in m.group("secret"))
            or (all(_classes(m.group("secret"))[:2]) and len(m.group("secret")) >= 20)
        ),
    ),
    Rule(
        "url-credentials",
        LazyPattern(
            r"(?<=[A-Za-z0-9])://[^\s:/@?#\"'<>\[\]]{1,128}:(?P<secret>[^\s@/\"'<>]{1,256})@(?=[A-Za-z0-9\[])"
        ),
        ("://",),
        guard=lambda m: (
            not _PLACEHOLDER.match(m.group("secret")) and m.group("secret").casefold() not in _NOT_VALUES
        ),
    ),
    _assignment_rule("password", r"pass(?:word|wd|phrase)|(?<=[_.\-])pass", cased("pass")),
    _assignment_rule("secret", r"secret(?:[_\-]?key)?|private[_\-]?key", cased("secret", "private")),
    _assignment_rule("token", r"token", cased("token")),
    _assignment_rule(
        "api-key", r"api[_\-]?key|access[_\-]?key|auth[_\-]?key", cased("api", "access", "auth")
    ),
    Rule("high-entropy", _ENTROPY, cased(*_HINTS), guard=_high_entropy),
)
"""The rules, in priority order (see the module's docstring)."""

KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in RULES))
"""Every kind a marker can name."""


def _trie(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words``, factored by prefix so each place costs one path."""
    tree: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict) -> str:  # type: ignore[type-arg]
        ends = "" in node
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if ends:
            return f"(?:{body})?" if len(branches) > 1 or len(body) > 1 else body + "?"
        return body

    return emit(tree)


ANCHORS: tuple[str, ...] = tuple(dict.fromkeys(anchor for rule in RULES for anchor in rule.anchors))


def _prefilter() -> tuple[Callable[[str], bool], Callable[[str], Sequence[re.Match[str]]]]:
    """Whether a text holds any anchor, and the ``finditer`` of one expression matching every
    anchor, the longest at each place.

    RE2 scans with a DFA: one pass costs the same for a hundred anchors as for one, five times
    less CPU than Python's engine on Pi's texts (bench/redaction.py), whose branches are tried
    at every position that starts like an anchor. Without RE2 (a platform it has no wheel for)
    the same anchors, folded into a trie, run on Python's engine: slower, the same places.

    Nearly every text holds no anchor (189 of 938,303 texts of a generated 127 MB history), so
    the question "any anchor?" is what redaction costs, and it is asked of hundreds of
    thousands of short texts: it is asked on the text's UTF-8 bytes, where RE2's wrapper has
    no character offsets to map back (half the time of a ``str`` search). Positions are only
    looked for in the few texts that answer yes.
    """
    longest_first = sorted(ANCHORS, key=len, reverse=True)
    slow = LazyPattern(_trie(ANCHORS))  # for the rare text RE2 cannot read
    try:
        import re2  # type: ignore[import-untyped]  # noqa: PLC0415 - optional at run time
    except ImportError:  # pragma: no cover - the wheel is a dependency; this is its fallback
        return (lambda text: slow.search(text) is not None), (lambda text: list(slow.finditer(text)))
    options = re2.Options()
    options.never_capture = True
    expression = "|".join(re.escape(anchor) for anchor in longest_first)
    fast = re2.compile(expression, options).finditer
    # The anchors are ASCII: a match in the bytes is a match in the text, and no anchor holds
    # a byte of a multi-byte character.
    in_bytes = re2.compile(expression.encode("ascii"), options).search

    def holds_anchor(text: str) -> bool:
        try:
            return in_bytes(text.encode("utf-8")) is not None
        except UnicodeEncodeError:  # half a character (a lone surrogate): RE2 reads UTF-8 only
            return slow.search(text) is not None

    def finditer(text: str) -> Sequence[re.Match[str]]:
        try:
            return list(fast(text))
        except UnicodeEncodeError:
            return list(slow.finditer(text))

    return holds_anchor, finditer


HOLDS_ANCHOR, PREFILTER_FINDITER = _prefilter()
"""``HOLDS_ANCHOR(text)``: whether any anchor occurs in ``text`` (one scan, nothing more);
``PREFILTER_FINDITER(text)``: every place one occurs (the longest anchor at each place)."""


def _rules_at() -> dict[str, tuple[Rule, ...]]:
    """Each anchor's rules, found by looking up the anchor's prefixes (not every rule against every anchor)."""
    by_anchor: dict[str, set[Rule]] = {}
    for rule in RULES:
        for anchor in rule.anchors:
            by_anchor.setdefault(anchor, set()).add(rule)
    table = {}
    for found in ANCHORS:
        starting = set().union(*(by_anchor.get(found[:end], ()) for end in range(1, len(found) + 1)))
        table[found] = tuple(rule for rule in RULES if rule in starting)
    return table


RULES_AT: dict[str, tuple[Rule, ...]] = _rules_at()
"""For each anchor the prefilter can report, the rules to try there (their anchor starts it)."""
