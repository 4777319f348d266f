"""Development set for transcript memory: seeded multi-session transcripts plus questions.

Writes, deterministically from ``--seed``, a project's Claude Code history in the real
transcript format (../shared/claude-code.md §4: ``<out>/projects/<slug>/<session>.jsonl``;
typed prompts as string content; one content block per assistant line sharing
``message.id``/``requestId``; tool_use lines answered by ``tool_result`` user lines with
``toolUseResult``; ``parentUuid`` chains; system ``turn_duration`` lines;
``file-history-snapshot`` lines without uuid) spread over nine weeks, with noise (status
checks, long tool outputs, acknowledgements) around planted facts:

- single-hop: one turn states a fact about a component (timeout, port, retries, root cause,
  configuration file, batch limit, removal date, latency);
- multi-hop: a person owns a component and a fact is stated about it in another session, or
  a person reports a problem and a later session fixes it (evidence: both turns);
- knowledge-update: a choice for a component (cache backend, queue, ...) made and later
  changed once or twice (evidence: the latest decision);
- temporal: "what did we decide last week about ...", where the component's choice was
  discussed at other times too (evidence: the decision inside the range, ``now`` set so
  the range names it).

Questions are worded the way a person asks them later: a synonym for the component and a
paraphrase of the fact, so sharing terms with the evidence is not enough; and they are not
adversarial (names, numbers' units and topic words overlap as they do in real use).
``questions.jsonl`` rows are ``{"id", "type", "question", "now", "evidence": [uuids]}``.

Usage:
    python bench/memory_devset.py OUT [--seed N] [--sessions N] [--no-questions]
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_SEED = 15
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)  # a Monday
DAYS = 63
CWD = "/home/dev/work/shopfront"
SLUG = "-home-dev-work-shopfront"

# (name, synonyms a person uses for it later, source file)
COMPONENTS = [
    ("rate limiter", ["request throttle", "throttling layer"], "shopfront/limits/ratelimit.py"),
    ("search indexer", ["indexing worker", "search ingestion job"], "shopfront/search/indexer.py"),
    ("checkout service", ["payment flow backend", "checkout backend"], "shopfront/checkout/service.py"),
    ("image resizer", ["thumbnail generator", "picture scaling worker"], "shopfront/media/resize.py"),
    ("email sender", ["mail dispatcher", "notification mailer"], "shopfront/notify/email.py"),
    ("session store", ["login session backend", "auth session storage"], "shopfront/auth/sessions.py"),
    ("inventory sync", ["stock synchronisation job", "warehouse stock importer"], "shopfront/stock/sync.py"),
    ("price calculator", ["pricing engine", "discount computation"], "shopfront/pricing/calc.py"),
    ("webhook dispatcher", ["outgoing webhook sender", "partner callback relay"],
     "shopfront/hooks/dispatch.py"),
    ("report exporter", ["CSV export job", "analytics export"], "shopfront/reports/export.py"),
    ("audit logger", ["audit trail writer", "compliance log"], "shopfront/audit/log.py"),
    ("feature flag client", ["toggle client", "flag evaluation library"], "shopfront/flags/client.py"),
    ("order API", ["orders endpoint", "order REST service"], "shopfront/api/orders.py"),
    ("cart service", ["shopping basket backend", "basket service"], "shopfront/cart/service.py"),
    ("recommendation worker", ["suggestions engine", "related-products job"], "shopfront/recs/worker.py"),
    ("invoice generator", ["billing PDF builder", "invoice PDF job"], "shopfront/billing/invoice.py"),
    ("geo lookup", ["IP location resolver", "geolocation helper"], "shopfront/geo/lookup.py"),
    ("admin dashboard", ["back-office UI", "staff console"], "shopfront/admin/views.py"),
    ("cache warmer", ["preload job", "cache priming task"], "shopfront/cache/warm.py"),
    ("upload handler", ["file upload endpoint", "attachment intake"], "shopfront/media/upload.py"),
    ("tax service", ["VAT calculation module", "sales tax engine"], "shopfront/pricing/tax.py"),
    ("shipping quoter", ["delivery cost estimator", "freight rate lookup"], "shopfront/shipping/quote.py"),
    ("review moderator", ["comment filter", "product review screening"], "shopfront/reviews/moderate.py"),
    ("login throttle", ["brute-force guard", "sign-in lockout"], "shopfront/auth/throttle.py"),
]
PEOPLE = ["Priya", "Marco", "Ingrid", "Tomasz", "Aiko", "Rafael", "Nadia", "Olu", "Greta", "Samir"]
# (aspect, how a person asks for it later, alternatives)
CHOICES = [
    ("cache backend", "caching layer", ["Redis", "Memcached", "an in-process LRU cache"]),
    ("message queue", "queueing system", ["RabbitMQ", "Kafka", "NATS"]),
    ("database", "storage engine", ["PostgreSQL", "SQLite", "MySQL"]),
    ("serialisation format", "wire format", ["JSON", "protobuf", "MessagePack"]),
    ("deployment target", "hosting platform", ["Kubernetes", "plain VMs with systemd", "AWS Lambda"]),
    ("HTTP client library", "library for outbound requests", ["httpx", "requests", "aiohttp"]),
    ("scheduling approach", "way jobs get triggered", ["cron", "Celery beat", "a long-running asyncio loop"]),
]
CAUSES = ["a shared temp directory between parallel workers", "an unpinned clock in the fixtures",
          "a race between the connection pool and the shutdown hook", "test order depending on dict order",
          "a DNS lookup that sometimes took over two seconds", "leftover rows from a previous test run",
          "a timezone-naive datetime compared with an aware one",
          "the retry decorator swallowing the first error"]
CAUSE_Q = ["Why were the {syn} tests intermittently failing?", "What made the {syn} tests flaky?"]
FIXES = ["moved the lock acquisition before the read", "added an idempotency key to each request",
         "stopped reusing the connection after a reset", "made the parser tolerate a trailing comma",
         "bounded the queue and dropped the oldest entries", "normalised the currency codes to upper case"]
PROBLEMS = ["drops messages after a reconnect", "double-charges when the user clicks twice",
            "leaks file handles under load", "rejects valid postcodes with spaces",
            "returns stale prices after a deploy", "times out on carts with more than fifty lines"]

FILLER_PROMPTS = ["Run the {comp} tests again please.", "Can you open {file} and show me the main function?",
                  "What does the {comp} do when the config is missing?",
                  "Let's look at the logs from the {comp}.", "Please tidy up the imports in {file}.",
                  "Check whether the CI is green for the {comp} changes.",
                  "Add a docstring to the {comp} entry point.",
                  "Rename the helper in {file} to something clearer."]
FILLER_REPLIES = ["I ran the {comp} test module; all 14 tests pass.",
                  "Here is the entry point of {file}; it wires the {comp} into the app factory.",
                  "The {comp} logs show normal startup and a few slow requests, nothing unusual.",
                  "Imports in {file} are sorted now and the unused ones are gone.",
                  "CI is green on the branch with the {comp} changes.",
                  "Added a docstring describing what the {comp} expects and returns.",
                  "Renamed the helper and updated the two call sites in {file}."]
ACKS = ["ok thanks", "sounds good", "great", "ok", "perfect, thanks!", "lgtm", "yes go ahead", "nice"]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


@dataclass
class Session:
    """One transcript file being written: entries chained by parentUuid, a clock."""

    rng: random.Random
    sid: str
    clock: datetime
    lines: list[dict[str, Any]] = field(default_factory=list)
    parent: str | None = None

    def _base(self, kind: str) -> dict[str, Any]:
        self.clock += timedelta(seconds=self.rng.randint(4, 90))
        uid = _uuid(self.rng)
        entry = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": CWD,
                 "sessionId": self.sid, "version": "2.1.39", "gitBranch": "main", "type": kind,
                 "uuid": uid, "timestamp": _iso(self.clock)}
        self.parent = uid
        return entry

    def user(self, text: str) -> str:
        if self.rng.random() < 0.5:
            self.lines.append({"type": "file-history-snapshot", "messageId": _uuid(self.rng),
                               "snapshot": {"messageId": "x", "trackedFileBackups": {},
                                            "timestamp": _iso(self.clock)}, "isSnapshotUpdate": False})
        entry = self._base("user")
        entry["message"] = {"role": "user", "content": text}
        entry["permissionMode"] = "default"
        self.lines.append(entry)
        return str(entry["uuid"])

    def assistant(self, text: str, tool: tuple[str, dict[str, Any], str] | None = None) -> str:
        """A response: thinking, optional tool call + result, then the text; the text's uuid."""
        mid = f"msg_{self.rng.getrandbits(64):016x}"
        req = f"req_{self.rng.getrandbits(64):016x}"
        self._block(mid, req, {"type": "thinking", "thinking": "Let me think about what is asked.",
                               "signature": "sig"})
        if tool is not None:
            name, args, output = tool
            tid = f"toolu_{self.rng.getrandbits(64):016x}"
            use = self._block(mid, req, {"type": "tool_use", "id": tid, "name": name, "input": args})
            entry = self._base("user")
            entry["message"] = {"role": "user", "content": [
                {"tool_use_id": tid, "type": "tool_result", "content": output, "is_error": False}]}
            entry["toolUseResult"] = {"stdout": output[:200], "stderr": "", "interrupted": False}
            entry["sourceToolAssistantUUID"] = use
            self.lines.append(entry)
            mid = f"msg_{self.rng.getrandbits(64):016x}"
        uid = self._block(mid, req, {"type": "text", "text": text})
        system = self._base("system")
        system.update(subtype="turn_duration", durationMs=self.rng.randint(2000, 60000), isMeta=False)
        self.lines.append(system)
        return uid

    def _block(self, mid: str, req: str, block: dict[str, Any]) -> str:
        entry = self._base("assistant")
        entry["message"] = {"model": "claude-opus-4-6", "id": mid, "type": "message", "role": "assistant",
                            "content": [block], "stop_reason": None, "stop_sequence": None,
                            "usage": {"input_tokens": 3, "output_tokens": 12}}
        entry["requestId"] = req
        self.lines.append(entry)
        return str(entry["uuid"])


def _tool_output(rng: random.Random, comp: str, path: str) -> str:
    """A long, realistic tool result: a file listing with code or a test log."""
    if rng.random() < 0.5:
        body = [f"{i:>5}\t" + rng.choice([f"def handle_{comp.split()[0]}_{i}(request):",
                                         "    value = settings.get(key, default)",
                                         f"    logger.debug('{comp} step %s', step)",
                                         "    return response", "", "# helper"]) for i in range(1, 160)]
        return "\n".join(body)
    tests = [f"tests/{path.split('/')[1]}/test_{comp.split()[0]}.py::test_case_{i} PASSED" for i in range(40)]
    return "\n".join(["============ test session starts ============", *tests, "40 passed in 3.21s"])


@dataclass
class Plan:
    """What to say in which session: (session index, kind, payload)."""

    events: dict[int, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)

    def add(self, session: int, kind: str, **payload: Any) -> dict[str, Any]:
        self.events.setdefault(session, []).append((kind, payload))
        return payload


def _single_facts(rng: random.Random, comp: str, syns: list[str], path: str) -> list[tuple[str, str]]:
    """(statement, question) pairs about one component; the question uses a synonym."""
    syn = rng.choice(syns)
    n = rng.randint(3, 12)
    port = rng.randint(7000, 9900)
    cfg = path.rsplit("/", 1)[0] + f"/{rng.choice(['settings', 'config', 'defaults'])}.toml"
    day = START + timedelta(days=rng.randint(80, 140))
    return [
        (f"FYI the {comp} gives up on upstream calls after {n * 5} seconds, that's the limit set in {path}.",
         f"How long does the {syn} wait before abandoning a request?"),
        (f"In staging the {comp} listens on port {port}.",
         f"Which port is the {syn} bound to on the staging box?"),
        (f"We retry failed {comp} operations {n} times with exponential backoff.",
         f"How many attempts does the {syn} make before it reports a failure?"),
        (f"Turns out the flaky failures in the {comp} tests came from {rng.choice(CAUSES)}.",
         rng.choice(CAUSE_Q).format(syn=syn)),
        (f"The {comp} loads its settings from {cfg} at startup.",
         f"Where does the {syn} read its configuration from?"),
        (f"We capped the {comp} batch size at {n * 50} items because memory spiked above that.",
         f"What's the most items the {syn} processes in one go?"),
        (f"The legacy {comp} endpoint is removed on {day:%B} {day.day}, after the partners migrate.",
         f"When does the old {syn} API go away?"),
        (f"After the change the {comp} p95 latency measured {n * 9} ms.",
         f"How quick was the {syn} at the 95th percentile once the change landed?"),
    ]


def build(out: Path, seed: int = DEFAULT_SEED, sessions: int = 36, questions: bool = True) -> dict[str, Any]:
    """Write the transcripts (and ``questions.jsonl``) under ``out``; return counts."""
    rng = random.Random(seed)
    days = sorted(rng.sample(range(DAYS), min(sessions, DAYS))) if sessions <= DAYS else \
        sorted(rng.randrange(DAYS * max(1, sessions // DAYS)) for _ in range(sessions))
    plan = Plan()
    qs: list[dict[str, Any]] = []
    last = len(days) - 1
    owners = rng.sample(PEOPLE * 3, len(COMPONENTS))
    used_aspects: set[tuple[int, int]] = set()
    for ci, (comp, syns, path) in enumerate(COMPONENTS):
        facts = _single_facts(rng, comp, syns, path)
        rng.shuffle(facts)
        owner_at = rng.randrange(0, last // 2 + 1)
        owner_ev = plan.add(owner_at, "owner", comp=comp, person=owners[ci], path=path)
        for k, (statement, question) in enumerate(facts[:4]):
            ev = plan.add(rng.randrange(0, last + 1), "fact", text=statement, comp=comp, path=path)
            if k < 3:
                qs.append({"type": "single-hop", "question": question, "ev": [ev]})
            else:  # the same fact reached through its owner
                via_owner = question
                for syn in syns:
                    via_owner = via_owner.replace(f"the {syn}", f"the component {owners[ci]} looks after")
                qs.append({"type": "multi-hop", "question": via_owner, "ev": [owner_ev, ev]})
        # a choice that changes over time
        for _ in range(2 if ci % 2 == 0 else 1):
            ai = rng.randrange(len(CHOICES))
            if (ci, ai) in used_aspects:
                continue
            used_aspects.add((ci, ai))
            aspect, asked, options = CHOICES[ai]
            order = rng.sample(options, rng.choice([2, 3]))
            slots = sorted(rng.sample(range(0, last + 1), len(order)))
            chain = [plan.add(s, "decision", comp=comp, aspect=aspect, choice=c, before=order[:i], path=path,
                              person=rng.choice(PEOPLE))
                     for i, (s, c) in enumerate(zip(slots, order, strict=True))]
            syn = rng.choice(syns)
            qs.append({"type": "knowledge-update", "ev": [chain[-1]], "question": rng.choice([
                f"What {asked} are we on now for the {syn}?",
                f"Which {asked} does the {syn} currently use?",
                f"What's the current choice of {asked} for the {syn}?"])})
            k = rng.randrange(len(chain) - 1) if len(chain) > 1 else 0
            qs.append({"type": "temporal", "ev": [chain[k]], "slot": slots[k],
                       "question": f"What did we decide {{when}} about the {asked} for the {syn}?"})
        # a problem reported by someone and fixed later
        if ci % 2 == 0:
            s1, s2 = sorted(rng.sample(range(0, last + 1), 2))
            person = rng.choice(PEOPLE)
            problem, fix = rng.choice(PROBLEMS), rng.choice(FIXES)
            rep = plan.add(s1, "report", comp=comp, person=person, problem=problem, path=path)
            fixed = plan.add(s2, "fix", comp=comp, problem=problem, fix=fix, path=path)
            qs.append({"type": "multi-hop", "ev": [rep, fixed],
                       "question": f"How did we end up solving the bug {person} ran into?"})
    turns = _write(out, rng, days, plan)
    if not questions:
        return {"sessions": len(days), "questions": 0, "turns": turns}
    end = START + timedelta(days=DAYS + 1)
    rows = []
    for i, q in enumerate(qs):
        now = end
        text = q["question"]
        if q["type"] == "temporal":
            text, now = _temporal(rng, text, START + timedelta(days=days[q["slot"]]))
        rows.append({"id": f"q{i:03d}", "type": q["type"], "question": text, "now": _iso(now),
                     "evidence": [ev["uuid"] for ev in q["ev"]]})
    with (out / "questions.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return {"sessions": len(days), "questions": len(rows), "turns": turns}


def _temporal(rng: random.Random, template: str, day: datetime) -> tuple[str, datetime]:
    """A time phrase that names ``day`` and the question date that makes it do so."""
    kind = rng.choice(["week", "days", "weekday", "yesterday"])
    if kind == "week":
        return template.format(when="last week"), day + timedelta(days=7, hours=6)
    if kind == "days":
        n = rng.randint(2, 5)
        word = ["two", "three", "four", "five"][n - 2]
        return template.format(when=f"{word} days ago"), day + timedelta(days=n, hours=5)
    if kind == "weekday":
        k = rng.randint(2, 6)
        return template.format(when=f"on {day:%A}"), day + timedelta(days=k, hours=4)
    return template.format(when="yesterday"), day + timedelta(days=1, hours=3)


def _write(out: Path, rng: random.Random, days: list[int], plan: Plan) -> int:
    root = out / "projects" / SLUG
    root.mkdir(parents=True, exist_ok=True)
    turns = 0
    for si, day in enumerate(days):
        start = START + timedelta(days=day, minutes=rng.randint(0, 8 * 60))
        session = Session(rng, _uuid(rng), start)
        events = plan.events.get(si, [])
        filler = rng.randint(4, 9)
        script: list[tuple[str, dict[str, Any]]] = events + [("filler", {}) for _ in range(filler)]
        rng.shuffle(script)
        for kind, payload in script:
            _say(session, rng, kind, payload)
            turns += 1
        with (root / f"{session.sid}.jsonl").open("w") as fh:
            for entry in session.lines:
                fh.write(json.dumps(entry) + "\n")
    return turns


def _say(s: Session, rng: random.Random, kind: str, p: dict[str, Any]) -> None:
    """One exchange; the planted statement's uuid goes into ``p["uuid"]``."""
    comp, _, path = p.get("comp"), None, p.get("path")
    if kind == "filler":
        comp, _, path = rng.choice(COMPONENTS)
        s.user(rng.choice(FILLER_PROMPTS).format(comp=comp, file=path))
        tool = ("Read", {"file_path": f"{CWD}/{path}"}, _tool_output(rng, comp, path)) \
            if rng.random() < 0.7 else None
        s.assistant(rng.choice(FILLER_REPLIES).format(comp=comp, file=path), tool)
        if rng.random() < 0.4:
            s.user(rng.choice(ACKS))
            s.assistant("Glad that helps.")
        return
    if kind == "fact":
        if rng.random() < 0.5:
            p["uuid"] = s.user(p["text"])
            s.assistant(f"Noted, I'll keep that in mind when touching the {comp}.")
        else:
            s.user(f"Can you check something in the {comp} for me?")
            p["uuid"] = s.assistant(p["text"], ("Read", {"file_path": f"{CWD}/{path}"},
                                                _tool_output(rng, str(comp), str(path))))
        return
    if kind == "owner":
        p["uuid"] = s.user(f"{p['person']} owns the {comp} now, so route review requests for {path} to them.")
        s.assistant(f"Understood, {p['person']} will be the reviewer for changes to the {comp}.")
        return
    if kind == "decision":
        choice, before = p["choice"], p["before"]
        if before:
            text = rng.choice([f"Let's switch the {comp} {p['aspect']} to {choice} instead of {before[-1]}; "
                               f"{p['person']} measured it and it holds up better.",
                               f"We decided to move the {comp} off {before[-1]} and use {choice} for its "
                               f"{p['aspect']} from now on."])
        else:
            text = rng.choice([f"Let's go with {choice} as the {p['aspect']} for the {comp}.",
                               f"Decision: the {comp} uses {choice} for its {p['aspect']}."])
        s.user(f"What should the {comp} use for its {p['aspect']}?")
        p["uuid"] = s.assistant(text)
        return
    if kind == "report":
        p["uuid"] = s.user(f"{p['person']} says the {comp} {p['problem']}. Can you take a look?")
        s.assistant(f"I'll reproduce it first. Looking at {path} now.",
                    ("Read", {"file_path": f"{CWD}/{path}"}, _tool_output(rng, str(comp), str(path))))
        return
    if kind == "fix":
        s.user(f"Any progress on the {comp} bug?")
        p["uuid"] = s.assistant(f"Fixed the {comp}: I {p['fix']} in {path}, and the regression test passes.",
                                ("Bash", {"command": "pytest -q"}, _tool_output(rng, str(comp), str(path))))


def main(argv: list[str] | None = None) -> int:
    """Write the development set; print its size."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--sessions", type=int, default=36)
    ap.add_argument("--no-questions", action="store_true")
    args = ap.parse_args(argv)
    counts = build(args.out, args.seed, args.sessions, not args.no_questions)
    size = sum(f.stat().st_size for f in args.out.rglob("*.jsonl"))
    print(f"{counts['sessions']} sessions, {counts['turns']} exchanges, {counts['questions']} questions, "
          f"{size / 1e6:.1f} MB under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
