"""The secret scanner: recall on real token formats, redaction, what it must not flag."""

from __future__ import annotations

import json
import time

import build_rules as _convert
import pytest
from secret_tokens import TOKENS

from ctxstore.errors import SecretRefused
from ctxstore.security.secrets import (
    REDACTION_PREFIX,
    Policy,
    Scanner,
    default_scanner,
    guard_text,
)

# What the dev-set trees (werkzeug, starlette, ripgrep) hold that the scanner flags: one
# line, a documented example `.env` of starlette whose SECRET_KEY has the shape of a real key
# (gitleaks' own binary flags it too). bench/secrets.py lists every finding on the full trees.
DEVSET_SAMPLE = {
    "docs/config.md": (
        "# Eg. Include \".env\" in your `.gitignore` file.\n"
        "DEBUG=True\n"
        "DATABASE_URL=postgresql://user:password@localhost:5432/database\n"
        "SECRET_KEY=43n080musdfjt54t-09sdgr\n"
        "ALLOWED_HOSTS=127.0.0.1, localhost\n"),
    "tests/test_urls.py": (
        'def test_iri():\n'
        '    assert (\n'
        '        urls.uri_to_iri(b"http://%C3%BCser:p%C3%A4ssword@xn--n3h.net/p%C3%A5th")\n'
        '        == "http://\\u00fcser:p\\u00e4ssword@\\u2603.net/p\\u00e5th"\n'
        '    )\n'),
    "src/werkzeug/security.py": (
        'def gen_salt(length: int) -> str:\n'
        '    """Generate a random string of SALT_CHARS with specified ``length``."""\n'
        '    if length <= 0:\n'
        '        raise ValueError("Salt length must be at least 1.")\n'
        '    return "".join(secrets.choice(SALT_CHARS) for _ in range(length))\n'
        'DEFAULT_PBKDF2_ITERATIONS = 600000\n'
        'api_key = os.environ["API_KEY"]\n'
        'token = request.headers.get("Authorization")\n'
        'password_hash = generate_password_hash(password, method="scrypt")\n'),
    "crates/core/flags/defs.rs": (
        'let key = "--no-ignore-vcs";\n'
        'const PASSWORD_FIELD: &str = "password";\n'
        'fn access_token(&self) -> Option<&str> { self.token.as_deref() }\n'),
}


@pytest.mark.parametrize("token", TOKENS, ids=[t.name for t in TOKENS])
def test_scanner_finds_each_token_format_and_redaction_removes_it(token) -> None:
    scanner = default_scanner()
    text = f"line one\n{token.text}\nline three\n"
    findings = scanner.scan(text)
    assert findings, token.name
    assert findings[0].line == 2
    redacted, _ = scanner.redact(text)
    assert token.secret not in redacted
    assert REDACTION_PREFIX in redacted
    assert redacted.startswith("line one\n") and redacted.endswith("\nline three\n")
    assert scanner.scan(redacted) == []  # idempotent: a redacted text scans clean


def test_scanner_names_specific_rules_before_the_generic_one() -> None:
    by_name = {t.name: t for t in TOKENS}
    scanner = default_scanner()
    assert [f.rule for f in scanner.scan(by_name["github-classic-pat"].text)] == ["github-pat"]
    assert [f.rule for f in scanner.scan(by_name["aws-access-key-id"].text)] == ["aws-access-token"]
    assert [f.rule for f in scanner.scan(by_name["private-key-pem"].text)] == ["private-key"]
    assert [f.rule for f in scanner.scan(by_name["database-url-password"].text)] == ["url-password"]


def test_scanner_flags_only_the_example_key_in_the_devset_sample() -> None:
    scanner = default_scanner()
    flagged = {path: [(f.line, f.rule) for f in scanner.scan(text, path=path)]
               for path, text in DEVSET_SAMPLE.items()}
    assert flagged == {"docs/config.md": [(4, "generic-api-key")], "tests/test_urls.py": [],
                       "src/werkzeug/security.py": [], "crates/core/flags/defs.rs": []}


def test_scanner_all_tokens_in_one_large_text_are_found() -> None:
    # Above the keyword-prefilter crossover the keywords are found by one RE2 set pass.
    filler = "plain words about the retry loop and nothing else\n" * 600
    text = filler + "\n".join(t.text for t in TOKENS) + "\n" + filler
    redacted, findings = default_scanner().redact(text)
    assert len(findings) >= len(TOKENS)
    assert not [t.name for t in TOKENS if t.secret in redacted]


def test_scanner_is_linear_on_hostile_input() -> None:
    # Patterns with nested quantifiers take exponential time in a backtracking engine on
    # input like this; RE2 stays linear.
    text = ("api_key = " + "a-" * 50_000 + "!\n") * 4
    t = time.perf_counter()
    default_scanner().scan(text)
    assert time.perf_counter() - t < 5


def test_scanner_disabled_rules_and_allowed_values() -> None:
    by_name = {t.name: t for t in TOKENS}
    rules = json.loads(_convert.HERE.joinpath("rules.json").read_text())
    tok = by_name["github-classic-pat"]
    assert Scanner(rules, disabled=["github-pat", "generic-api-key"]).scan(tok.secret) == []
    assert Scanner(rules, allow_values=[tok.secret[:8]]).scan(tok.text) == []
    assert Scanner(rules).scan(tok.secret)


def test_rules_json_is_built_from_the_vendored_rule_sets() -> None:
    """rules.json is what _convert.py makes of gitleaks.toml and ctx-rules.toml."""
    on_disk = json.loads(_convert.HERE.joinpath("rules.json").read_text())
    assert on_disk == _convert.build_rules()
    ids = [r["id"] for r in on_disk["rules"]]
    assert len(ids) == len(set(ids)) > 200
    import re2

    for rule in on_disk["rules"]:  # every expression is RE2 syntax
        for pattern in [rule["regex"], rule["path"],
                        *[p for a in rule["allowlists"] for p in a["regexes"] + a["paths"]]]:
            if pattern is not None:
                re2.compile(pattern)


def test_guard_text_refuses_redacts_or_allows_by_channel() -> None:
    tok = TOKENS[2]
    text = f"deploy notes\n{tok.text}\n"
    with pytest.raises(SecretRefused) as err:
        guard_text(Policy(), "explicit", text, what="the note")
    assert str(err.value).startswith("E025: the note holds a secret (github-pat on line 2)")
    assert tok.secret not in str(err.value)
    assert guard_text(Policy(), "explicit", text, allow_secret=True) == text
    assert guard_text(Policy(), "commands", text) == \
        'deploy notes\nGITHUB_TOKEN = "[REDACTED:github-pat]"\n'
    allow = Policy(actions=tuple((n, "allow" if n == "commands" else a) for n, a in Policy().actions))
    assert guard_text(allow, "commands", text) == text
    assert allow.weakenings() == ['[security] commands = "allow"']
    assert Policy().weakenings() == []


def test_scanner_finds_tokens_in_escaped_text() -> None:
    # A repr, JSON inside a string, a command line: the quote ending a token follows a
    # backslash, which gitleaks' rules do not expect.
    lines = "\n".join(t.text for t in TOKENS)
    for escaped in (repr(lines), json.dumps(json.dumps(lines))):
        redacted, _ = default_scanner().redact(escaped)
        assert [t.name for t in TOKENS if t.secret in redacted] == [], escaped[:80]
        assert redacted.startswith(escaped[:2]) and redacted.endswith(escaped[-2:])


def test_scanner_escape_handling_is_linear() -> None:
    t = time.perf_counter()
    default_scanner().scan("\\" * 2_000_000 + "x")
    default_scanner().scan("\\a" * 1_000_000)
    assert time.perf_counter() - t < 5


def test_scanner_leaves_ctx_own_metadata_alone() -> None:
    # An agent write's identity (knowledge.remember) is a hash kept as metadata `hook_key`.
    meta = '{"hook_key": "22fe96974a3ebc1efc4db7afc8440df3", "session": "s1"}'
    assert default_scanner().scan(meta) == []
    assert default_scanner().scan('api_key = "22fe96974a3ebc1efc4db7afc8440df3"')
