"""Realistic fake credentials: the right shape for each format, random values, never real.

Each value is generated from a fixed seed, so every run plants the same strings. They are
not valid credentials of any service (random characters of the documented alphabet and
length); they exist to test that ctx recognises the formats that leak in real work.
``bench/secrets.py`` measures recall on the same set.
"""

from __future__ import annotations

import base64
import json
import random
import string
from typing import NamedTuple

ALNUM = string.ascii_letters + string.digits


class Token(NamedTuple):
    name: str      # the format
    secret: str    # the credential itself (what must never be stored)
    text: str      # the credential as it appears in real work (a line of code, an env file)


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_tokens(seed: int = 31) -> list[Token]:
    """The fixture: one token per format, each in a context it is found in."""
    rng = random.Random(seed)
    upper27 = string.ascii_uppercase + "234567"
    aws_id = "AKIA" + _r(rng, upper27, 16)
    aws_secret = _r(rng, ALNUM + "+/", 40)
    ghp = "ghp_" + _r(rng, ALNUM, 36)
    gh_fine = "github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59)
    glpat = "glpat-" + _r(rng, ALNUM + "-_", 20)
    slack = f"xoxb-{_r(rng, string.digits, 12)}-{_r(rng, string.digits, 13)}-{_r(rng, ALNUM, 24)}"
    stripe = "sk_live_" + _r(rng, ALNUM, 24)
    openai = "sk-proj-" + _r(rng, ALNUM + "-_", 74) + "T3BlbkFJ" + _r(rng, ALNUM + "-_", 74)
    anthropic = "sk-ant-api03-" + _r(rng, ALNUM + "-_", 93) + "AA"
    google = "AIza" + _r(rng, ALNUM + "-_", 35)
    key_body = base64.b64encode(rng.randbytes(600)).decode()
    pem = ("-----BEGIN RSA PRIVATE KEY-----\n"
           + "\n".join(key_body[i:i + 64] for i in range(0, len(key_body), 64))
           + "\n-----END RSA PRIVATE KEY-----")
    db_password = _r(rng, ALNUM, 18)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": _r(rng, string.digits, 10), "name": "Deploy Bot",
                                  "iat": 1700000000 + rng.randrange(10**6)}).encode())
    jwt = f"{header}.{payload}.{_b64url(rng.randbytes(32))}"
    npm = "npm_" + _r(rng, ALNUM, 36)
    hf = "hf_" + _r(rng, string.ascii_letters, 34)
    webhook = (f"https://hooks.slack.com/services/T{_r(rng, ALNUM.upper(), 8)}/"
               f"B{_r(rng, ALNUM.upper(), 10)}/{_r(rng, ALNUM, 24)}")
    generic = _r(rng, ALNUM, 32)
    return [
        Token("aws-access-key-id", aws_id, f"AWS_ACCESS_KEY_ID={aws_id}"),
        Token("aws-secret-access-key", aws_secret, f"AWS_SECRET_ACCESS_KEY={aws_secret}"),
        Token("github-classic-pat", ghp, f'GITHUB_TOKEN = "{ghp}"'),
        Token("github-fine-grained-pat", gh_fine, f"export GH_TOKEN={gh_fine}"),
        Token("gitlab-pat", glpat, f"git clone https://oauth2:{glpat}@gitlab.com/acme/app.git"),
        Token("slack-bot-token", slack, f'slack = WebClient(token="{slack}")'),
        Token("stripe-secret-key", stripe, f"stripe.api_key = '{stripe}'"),
        Token("openai-api-key", openai, f"OPENAI_API_KEY={openai}"),
        Token("anthropic-api-key", anthropic, f"client = Anthropic(api_key=\"{anthropic}\")"),
        Token("google-api-key", google, f"maps_url = f\"https://maps.googleapis.com/api?key={google}\""),
        Token("private-key-pem", pem, pem),
        Token("database-url-password", db_password,
              f"DATABASE_URL=postgres://app_user:{db_password}@db.internal:5432/orders"),
        Token("jwt", jwt, f"Authorization: Bearer {jwt}"),
        Token("npm-token", npm, f"//registry.npmjs.org/:_authToken={npm}"),
        Token("huggingface-token", hf, f"HF_TOKEN={hf}"),
        Token("slack-webhook-url", webhook, f"SLACK_WEBHOOK={webhook}"),
        Token("generic-assignment", generic, f'db_password = "{generic}"'),
    ]


TOKENS = make_tokens()
