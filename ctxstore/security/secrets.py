"""The secret scanner (rules + engine) and the per-path policy every write path applies.

**Rules.** ``rules.json``: gitleaks' published default rule set (``gitleaks.toml``, vendored
verbatim, MIT) plus ctx's own rules (``ctx-rules.toml``: passwords written into URLs), built by
``_convert.py``. The choice was measured (``bench/secrets.py``, docs/security.md): recall on a
fixture of real token formats, false positives on real source trees, cost per MB.

**Engine.** The semantics of gitleaks' detector for one fragment of text: a rule runs only when
one of its keywords occurs in the text (case-insensitive); its regular expression finds the
match; the secret is the rule's secret group (else the first non-empty group, else the whole
match); a secret whose Shannon entropy is not above the rule's threshold is dropped, and so is
one the global allowlist or one of the rule's allowlists accepts (regexes on the secret, the
match or the line; stop words; paths, for file content). Expressions are RE2 (``google-re2``),
which runs in time linear in the input whatever the pattern: content from a cloned repository
cannot make a scan hang. ``re2`` is imported, and a rule compiled, only when some text needs
it, so a write path that scans a few words pays microseconds. ``gitleaks:allow`` comments are
not honoured: a note cannot exempt itself.

**Policy** (``[security]`` of config.toml, docs/security.md): each write path is one
``Channel``; explicit writes (``ctx add``, remember, notes) are refused with ``SecretRefused``
(E025) naming the rule and the line, automatic capture (command output, file content,
transcripts, LLM answers) is redacted in place as ``[REDACTED:<rule>]``. A committed config
that lets secrets through (``allow`` on a channel, rules or values allowed, sensitive files
indexed) applies only with ``ctx trust`` in that clone (``consent``); otherwise the defaults
apply and ``Policy.ignored`` says which settings were set aside.

This module never prints, never reads the environment and writes nothing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ctxstore.errors import SecretRefused
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.config import Config

__all__ = [
    "CHANNELS",
    "REDACTION_PREFIX",
    "Action",
    "Channel",
    "Finding",
    "Policy",
    "Scanner",
    "apply_redactions",
    "default_scanner",
    "describe",
    "guard_text",
    "policy_from_config",
    "redact_text",
    "sensitive_file",
]

RULES_PATH = Path(__file__).resolve().parent / "rules.json"
REDACTION_PREFIX = "[REDACTED:"
# Above this many characters the keywords are looked for with one RE2 pass instead of one
# ``in`` per keyword (~330 of them): the crossover measured by bench/secrets.py.
_KEYWORD_SCAN_CHARS = 16_384

Action = Literal["refuse", "redact", "allow"]
Channel = Literal["explicit", "remember", "commands", "files", "transcripts", "llm", "narrative",
                  "summaries"]
# Each write path and its default action. docs/security.md lists the commands of each.
CHANNELS: dict[str, Action] = {
    "explicit": "refuse",     # ctx add (every type, --stdin), update, import, ingest, tag, view, relate
    "remember": "refuse",     # <ctx:remember>, MCP remember, ctx memory promote
    "commands": "redact",     # ctx add command: output, diagnostics, argv
    "files": "redact",        # ctx index, ctx add file: file content, chunks
    "transcripts": "redact",  # transcript memory (memory.sqlite), hook context
    "llm": "redact",          # ctx llm --commit answers
    "narrative": "redact",    # narrative Markdown edited by hand, picked up by ctx commit
    "summaries": "redact",    # <ctx:summarize>
}
_GENERIC = frozenset({"generic-api-key", "url-password"})
_STRENGTH = {"allow": 0, "redact": 1, "refuse": 1}  # refuse and redact both keep a secret out


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret found in a text. The secret itself is never kept: only where it is.

    Attributes:
        rule: The rule id (``github-pat``, ``aws-access-token``, ``private-key`` ...).
        line: The 1-based line of the text where the secret starts.
        start: Character offset of the secret in the text.
        end: Character offset just after it.
        description: What the rule looks for.
    """

    rule: str
    line: int
    start: int
    end: int
    description: str = ""


def _entropy(text: str) -> float:
    """Shannon entropy of ``text`` in bits per character (gitleaks' ``shannonEntropy``)."""
    if not text:
        return 0.0
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_BACKSLASH_RUNS = re.compile(r"\\+")  # each run is matched once, left to right: linear


def _unescape_for_matching(text: str) -> str:
    """``text`` as the rules can match it, of the same length (its offsets are ``text``'s).

    The backslashes of escaped quotes (``\\'``, ``\\\\\\"``) become spaces, and a run of
    backslashes before ``n``, ``r`` or ``t`` (``\\\\n``: JSON inside JSON) is cut to one.
    """
    parts: list[str] = []
    pos = 0
    for m in _BACKSLASH_RUNS.finditer(text):
        start, end = m.span()
        after = text[end:end + 1]
        if after in ("'", '"', "\x60"):
            parts += [text[pos:start], " " * (end - start)]
        elif after in ("n", "r", "t") and end - start > 1:
            parts += [text[pos:start], " " * (end - start - 1) + "\\"]
        else:
            continue
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


class _Allowlist:
    """One allowlist of a rule (or the global one): any (OR) or all (AND) criteria accept."""

    __slots__ = ("condition", "target", "regexes", "stopwords", "paths")

    def __init__(self, raw: dict[str, Any], compile_: Any) -> None:
        self.condition: str = raw.get("condition", "OR")
        self.target: str = raw.get("target", "secret")
        self.regexes = [compile_(p) for p in raw.get("regexes", [])]
        self.stopwords: list[str] = list(raw.get("stopwords", []))
        self.paths = [compile_(p) for p in raw.get("paths", [])]

    def accepts(self, secret: str, match: str, line: str, path: str | None) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        checks: list[bool] = []
        if self.regexes:
            checks.append(any(rx.search(target) for rx in self.regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in self.stopwords))
        if self.paths:
            checks.append(path is not None and any(rx.search(path) for rx in self.paths))
        if not checks:
            return False
        return all(checks) if self.condition == "AND" else any(checks)


class _Rule:
    __slots__ = ("id", "description", "pattern", "secret_group", "entropy", "keywords", "path",
                 "allowlists", "_rx")

    def __init__(self, raw: dict[str, Any]) -> None:
        self.id: str = raw["id"]
        self.description: str = raw.get("description", "")
        self.pattern: str | None = raw.get("regex")
        self.secret_group: int = raw.get("secret_group", 0)
        self.entropy: float = raw.get("entropy", 0.0)
        self.keywords: list[str] = raw.get("keywords", [])
        self.path: str | None = raw.get("path")
        self.allowlists: list[dict[str, Any]] = raw.get("allowlists", [])
        self._rx: Any = None


class Scanner:
    """A compiled rule set. ``default_scanner()`` is the shared instance.

    Args:
        rules: The rule document (``rules.json``'s shape).
        disabled: Rule ids never reported.
        allow_values: Regular expressions (RE2) of secrets never reported (e.g. a project's
            documented test fixtures).
    """

    def __init__(self, rules: dict[str, Any], *, disabled: Iterable[str] = (),
                 allow_values: Sequence[str] = ()) -> None:
        off = set(disabled)
        # The generic rules go last: on the same span a specific rule (``github-pat``) names
        # the secret better than ``generic-api-key``.
        ordered = sorted(rules["rules"], key=lambda r: r["id"] in _GENERIC)
        self._rules = [_Rule(r) for r in ordered if r["id"] not in off]
        self._global_raw: dict[str, Any] = rules.get("allowlist", {})
        self._allow_values = list(allow_values)
        self._compiled: dict[str, Any] = {}
        self._global: _Allowlist | None = None
        self._rule_allow: dict[str, list[_Allowlist]] = {}
        self._global_paths: list[Any] | None = None
        self._extra_allow: list[Any] | None = None
        self._keyword_rx: Any = None
        self._by_keyword: dict[str, list[_Rule]] = {}
        for rule in self._rules:
            for kw in rule.keywords:
                self._by_keyword.setdefault(kw, []).append(rule)

    @property
    def rule_ids(self) -> list[str]:
        """The ids of the rules this scanner runs."""
        return [r.id for r in self._rules]

    def _compile(self, pattern: str) -> Any:
        rx = self._compiled.get(pattern)
        if rx is None:
            import re2  # linear-time engine; imported only once some text needs a rule

            options = re2.Options()
            options.max_mem = 64 << 20  # the largest generated rule needs ~9 MB of DFA
            rx = self._compiled[pattern] = re2.compile(pattern, options)
        return rx

    def _candidates(self, text: str) -> list[_Rule]:
        """The rules one of whose keywords occurs in ``text`` (case-insensitive), in rule order."""
        low = text.lower()
        if len(text) <= _KEYWORD_SCAN_CHARS:
            present = [kw for kw in self._by_keyword if kw in low]
        else:
            # One linear pass for every keyword at once (an RE2 set reports each pattern
            # that occurs anywhere, overlapping occurrences included).
            if self._keyword_rx is None:
                import re2

                kws = list(self._by_keyword)
                kset = re2.Set.SearchSet(re2.Options())
                for kw in kws:
                    kset.Add(re2.escape(kw))
                kset.Compile()
                self._keyword_rx = (kset, kws)
            kset, kws = self._keyword_rx
            present = [kws[i] for i in kset.Match(low) or ()]
        chosen: set[int] = set()
        for kw in present:
            chosen.update(id(r) for r in self._by_keyword[kw])
        return [r for r in self._rules if id(r) in chosen]

    def path_skipped(self, path: str) -> bool:
        """Whether the rule set's global allowlist excludes a file path (images, lock files ...)."""
        if self._global_paths is None:
            self._global_paths = [self._compile(p) for p in self._global_raw.get("paths", [])]
        return any(rx.search(path) for rx in self._global_paths)

    def path_rules(self, path: str) -> list[str]:
        """The path-only rules (no content pattern) that name this file as sensitive."""
        return [r.id for r in self._rules if r.pattern is None and r.path
                and self._compile(r.path).search(path)]

    def _allowed(self, rule: _Rule, secret: str, match: str, line: str, path: str | None) -> bool:
        if self._global is None:
            self._global = _Allowlist({"regexes": self._global_raw.get("regexes", []),
                                       "stopwords": self._global_raw.get("stopwords", [])},
                                      self._compile)
            self._extra_allow = [self._compile(p) for p in self._allow_values]
        if self._global.accepts(secret, match, line, None):
            return True
        if any(rx.search(secret) for rx in self._extra_allow or ()):
            return True
        lists = self._rule_allow.get(rule.id)
        if lists is None:
            lists = self._rule_allow[rule.id] = [_Allowlist(a, self._compile) for a in rule.allowlists]
        return any(a.accepts(secret, match, line, path) for a in lists)

    def scan(self, text: str, *, path: str | None = None) -> list[Finding]:
        """Every secret in ``text``, in order of position (overlaps: the first rule wins).

        Args:
            text: The text to scan.
            path: The repository-relative path of a file whose content ``text`` is; rules
                restricted to paths run only when it is given.

        Returns:
            The findings, sorted by start offset, none overlapping another.
        """
        if not text or (path is not None and self.path_skipped(path)):
            return []
        # Many rules end a token at a quote, white space or an escaped ``\n``; in escaped
        # text (a repr, JSON inside a string, a shell command line) the quote follows a
        # backslash. Such a backslash becomes a space for matching: same length, so every
        # offset holds, and the findings apply to the text as given.
        if "\\" in text:
            text = _unescape_for_matching(text)
        found: list[Finding] = []
        for rule in self._candidates(text):
            if rule.pattern is None:
                continue
            if rule.path is not None and (path is None or not self._compile(rule.path).search(path)):
                continue
            rx = rule._rx
            if rx is None:
                rx = rule._rx = self._compile(rule.pattern)
            for m in rx.finditer(text):
                start, end = m.span()
                if start == end:
                    continue
                groups = m.groups()
                if rule.secret_group and rule.secret_group <= len(groups):
                    g = rule.secret_group
                elif groups:
                    g = next((i + 1 for i, s in enumerate(groups) if s), 0)
                else:
                    g = 0
                s_start, s_end = m.span(g) if g else (start, end)
                if g == 0:  # gitleaks trims newlines around a whole-match secret
                    chunk = text[s_start:s_end]
                    s_start += len(chunk) - len(chunk.lstrip("\n"))
                    s_end -= len(chunk) - len(chunk.rstrip("\n"))
                if s_start < 0 or s_end <= s_start:
                    continue
                secret = text[s_start:s_end]
                if rule.entropy and _entropy(secret) <= rule.entropy:
                    continue
                line_start = text.rfind("\n", 0, start) + 1
                line_end = text.find("\n", end)
                line = text[line_start:len(text) if line_end < 0 else line_end]
                if self._allowed(rule, secret, text[start:end], line, path):
                    continue
                found.append(Finding(rule.id, text.count("\n", 0, s_start) + 1, s_start, s_end,
                                     rule.description))
        found.sort(key=lambda f: (f.start, -f.end))
        kept: list[Finding] = []
        for f in found:
            if kept and f.start < kept[-1].end:
                continue  # overlapping: the earlier (longer) finding covers it
            kept.append(f)
        return kept

    def redact(self, text: str, *, path: str | None = None) -> tuple[str, list[Finding]]:
        """``text`` with every secret replaced by ``[REDACTED:<rule>]``, and the findings.

        Redaction is idempotent: a redacted text scans clean.
        """
        findings = self.scan(text, path=path)
        return apply_redactions(text, findings), findings


def apply_redactions(text: str, findings: Sequence[Finding]) -> str:
    """Replace each finding's span of ``text`` (non-overlapping, sorted) by its marker."""
    if not findings:
        return text
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos:f.start])
        parts.append(f"{REDACTION_PREFIX}{f.rule}]")
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


@lru_cache(maxsize=1)
def _rule_document() -> dict[str, Any]:
    with open(RULES_PATH, "rb") as fh:  # shipped with the package, read-only
        doc: dict[str, Any] = json.loads(fh.read())
    return doc


@lru_cache(maxsize=8)
def _scanner(disabled: tuple[str, ...], allow_values: tuple[str, ...]) -> Scanner:
    return Scanner(_rule_document(), disabled=disabled, allow_values=allow_values)


def default_scanner() -> Scanner:
    """The built-in rule set, compiled once per process (rules compile on first use)."""
    return _scanner((), ())


# -- sensitive files ------------------------------------------------------------------------------

# Files that hold credentials by their nature, whatever their content looks like: ``ctx index``
# never reads them unless ``[security] index_sensitive_files`` (docs/security.md). Matched on
# the file name (``fnmatch``, case-insensitive), or on the path for the entries with a ``/``.
SENSITIVE_FILES: tuple[tuple[str, str], ...] = (
    (".env", "environment file"), (".env.*", "environment file"), ("*.env", "environment file"),
    (".envrc", "environment file"),
    ("*.pem", "key or certificate"), ("*.key", "private key"), ("*.p12", "keystore"),
    ("*.pfx", "keystore"), ("*.jks", "keystore"), ("*.keystore", "keystore"),
    ("*.bks", "keystore"), ("*.kdbx", "password database"), ("*.ppk", "private key"),
    ("*.gpg", "encrypted secret"), ("*.asc", "PGP key"), ("secring.*", "PGP key"),
    ("id_rsa", "SSH private key"), ("id_dsa", "SSH private key"), ("id_ecdsa", "SSH private key"),
    ("id_ed25519", "SSH private key"), ("id_*_sk", "SSH private key"),
    (".netrc", "credentials"), ("_netrc", "credentials"), (".pgpass", "credentials"),
    (".npmrc", "credentials"), (".pypirc", "credentials"), (".git-credentials", "credentials"),
    (".htpasswd", "credentials"), (".dockercfg", "credentials"), ("*.tfstate", "credentials"),
    ("*.tfstate.backup", "credentials"), ("credentials", "credentials"),
    ("credentials.json", "credentials"), ("client_secret*.json", "credentials"),
    ("service-account*.json", "credentials"), ("secrets.yml", "credentials"),
    ("secrets.yaml", "credentials"), ("secrets.json", "credentials"), ("*.secret", "credentials"),
    (".aws/*", "credentials"), (".docker/config.json", "credentials"), (".ssh/*", "SSH key"),
    (".gnupg/*", "PGP key"), (".kube/config", "credentials"),
)


def sensitive_file(path: str) -> str | None:
    """Why ``path`` (repository-relative, ``/``-separated) is a sensitive file, or None.

    Public keys (``*.pub``) are not sensitive; nor is an SSH ``known_hosts`` file. ``ctx index``
    asks this of every listed file on every run, so most names are turned away by a set lookup
    and a suffix test (``_sensitive_screen``) before any ``fnmatch``.
    """
    from fnmatch import fnmatch

    low = path.lower()
    name = low.rsplit("/", 1)[-1]
    if name.endswith(".pub") or name in ("known_hosts", "authorized_keys"):
        return None
    exact, suffixes, others, literals = _sensitive_screen()
    if not (name in exact or name.endswith(suffixes) or others.match(name) is not None
            or any(lit in low for lit in literals)):
        return None
    for pattern, reason in SENSITIVE_FILES:  # a candidate: the first pattern says why
        if "/" in pattern:
            if fnmatch(low, pattern) or fnmatch(low, "*/" + pattern):
                return reason
        elif fnmatch(name, pattern):
            return reason
    return None


@lru_cache(maxsize=1)
def _sensitive_screen() -> tuple[frozenset[str], tuple[str, ...], re.Pattern[str], tuple[str, ...]]:
    """``SENSITIVE_FILES`` split for a fast first test.

    Returns:
        (names without wildcards, suffixes of the ``*.x`` patterns, the other name patterns
        as one expression (``fnmatch.translate``; matched once against a file name), the
        literal text before the first wildcard of each path pattern).
    """
    from fnmatch import translate

    exact, suffixes, others, literals = set(), [], [], []
    for pattern, _ in SENSITIVE_FILES:
        if "/" in pattern:
            literals.append(pattern.split("*", 1)[0])
        elif not any(c in pattern for c in "*?["):
            exact.add(pattern)
        elif pattern.startswith("*") and not any(c in pattern[1:] for c in "*?["):
            suffixes.append(pattern[1:])
        else:
            others.append(pattern)
    return (frozenset(exact), tuple(suffixes), re.compile("|".join(translate(p) for p in others)),
            tuple(literals))


# -- policy ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Policy:
    """The ``[security]`` settings in force for one store.

    Attributes:
        actions: Each channel's action (``CHANNELS`` keys).
        disabled_rules: Rule ids never reported.
        allow_values: RE2 expressions of values never reported.
        index_sensitive_files: Whether ``ctx index`` reads ``.env`` files, keys, keystores ...
        ignored: Settings of config.toml set aside because they weaken the policy and this
            clone has not consented to them (``ctx trust``); empty when all apply.
    """

    actions: tuple[tuple[str, str], ...] = tuple(CHANNELS.items())
    disabled_rules: tuple[str, ...] = ()
    allow_values: tuple[str, ...] = ()
    index_sensitive_files: bool = False
    ignored: tuple[str, ...] = ()

    def action(self, channel: str) -> Action:
        """The action of one write path."""
        for name, value in self.actions:
            if name == channel:
                return value  # type: ignore[return-value]
        raise KeyError(channel)

    def scanner(self) -> Scanner:
        """The scanner with this policy's rules and allowed values."""
        return _scanner(self.disabled_rules, self.allow_values)

    def weakenings(self) -> list[str]:
        """The settings that let through something the defaults stop (need consent in a clone)."""
        out = [f"[security] {name} = \"{value}\"" for name, value in self.actions
               if _STRENGTH[value] < _STRENGTH[CHANNELS[name]]]
        if self.disabled_rules:
            out.append(f"[security] disabled_rules = {list(self.disabled_rules)}")
        if self.allow_values:
            out.append(f"[security] allow_values = {list(self.allow_values)}")
        if self.index_sensitive_files:
            out.append("[security] index_sensitive_files = true")
        return out

    def fingerprint(self) -> dict[str, Any]:
        """The weakening values as data (what ``ctx trust`` records consent to)."""
        return {"actions": {n: v for n, v in self.actions if _STRENGTH[v] < _STRENGTH[CHANNELS[n]]},
                "disabled_rules": sorted(self.disabled_rules),
                "allow_values": sorted(self.allow_values),
                "index_sensitive_files": self.index_sensitive_files}


DEFAULT_POLICY = Policy()


def policy_from_config(config: Config) -> Policy:
    """The policy config.toml asks for, before any consent check (``consent.policy_for``)."""
    section = config.values.get("security", {})
    actions = tuple((name, section.get(name, default)) for name, default in CHANNELS.items())
    return Policy(actions=actions,
                  disabled_rules=tuple(section.get("disabled_rules", ())),
                  allow_values=tuple(section.get("allow_values", ())),
                  index_sensitive_files=bool(section.get("index_sensitive_files", False)))


def describe(findings: Sequence[Finding], limit: int = 3) -> str:
    """``github-pat on line 3, aws-access-token on line 7`` (the first ``limit``)."""
    parts = [f"{f.rule} on line {f.line}" for f in findings[:limit]]
    if len(findings) > limit:
        parts.append(f"and {len(findings) - limit} more")
    return ", ".join(parts)


def guard_text(policy: Policy, channel: str, text: str, *, what: str = "content",
               path: str | None = None, allow_secret: bool = False) -> str:
    """Apply ``channel``'s action to ``text``: the text to write, or ``SecretRefused``.

    Args:
        policy: The store's policy (``consent.policy_for``).
        channel: One of ``CHANNELS``.
        text: What the write path is about to write.
        what: What the text is, for the error (``content``, ``the note``, ``node 01J... content``).
        path: The file the text is the content of, if any.
        allow_secret: The user's ``--allow-secret`` for this one explicit write.

    Returns:
        ``text`` itself (nothing found, ``allow``, or ``allow_secret``) or its redaction.

    Raises:
        SecretRefused: (E025) when the channel refuses and the text holds a secret.
    """
    action = policy.action(channel)
    if action == "allow" or allow_secret or not text:
        return text
    redacted, findings = policy.scanner().redact(text, path=path)
    if not findings:
        return text
    if action == "refuse":
        raise SecretRefused(what, findings[0].rule, findings[0].line, describe(findings))
    return redacted


def redact_text(text: str, policy: Policy = DEFAULT_POLICY) -> str:
    """``text`` with every secret the policy's scanner finds replaced (whatever the channel)."""
    if not text:
        return text
    return policy.scanner().redact(text)[0]
