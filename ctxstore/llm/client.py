"""HTTP client for a local LLM server: llama.cpp ``/completion`` or OpenAI ``/v1/chat/completions``.

Owns the wire: choosing the server URL from trusted places (``resolve_server``), detecting
the protocol (``GET /props`` answers on llama.cpp, ``GET /v1/models`` on OpenAI-compatible
servers), one bounded request at a time over ``http.client`` (no new dependency), and
turning every way a server can fail (refused, timed out, an HTTP error, a reply that is
not JSON or too large) into one ``LlmUnavailable`` line. It writes nothing and reads no
environment: the CLI passes the flag, the variable and both configurations in.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import threading
import time
from dataclasses import field
from typing import Literal
from urllib.parse import urlsplit

from ctxstore.config import DEFAULTS
from ctxstore.errors import ConfigInvalid, InvalidInput, LlmUnavailable
from ctxstore.model.codec import JsonValue
from ctxstore.records import dataclass

__all__ = ["PROTOCOLS", "Completion", "LlmClient", "ServerChoice", "is_loopback",
           "resolve_server", "served_model"]

Protocol = Literal["llama", "openai"]
PROTOCOLS = ("auto", "llama", "openai")
_DEFAULT_URL: str = DEFAULTS["llm"]["server_url"]
_READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class ServerChoice:
    """The server URL to use and where it came from (shown in ``--format json``).

    Attributes:
        url: The base URL, without a trailing slash.
        source: ``flag``, ``env``, ``project-config``, ``user-config`` or ``default``.
    """

    url: str
    source: str


def _base_url(url: str) -> str:
    """``url`` without a trailing slash, nor a trailing ``/v1`` (the OpenAI-compatible base).

    Ollama, LM Studio and vLLM document their OpenAI-compatible URL with ``/v1``; ctx adds
    ``/v1/...`` itself, so the base is what comes before it.
    """
    base = url.strip().rstrip("/")
    if urlsplit(base).path.endswith("/v1"):
        base = base[:-len("/v1")].rstrip("/")
    return base


def _check_url(url: str, where: str) -> str:
    """``url`` as a base URL (``_base_url``), if it is an http(s) URL with a host.

    Raises:
        InvalidInput: otherwise, naming ``where`` it came from.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"{where}: {url!r} is not an http:// or https:// URL with a host")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise InvalidInput(f"{where}: {url!r} must not carry credentials, a query or a fragment")
    try:
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise InvalidInput(f"{where}: {url!r} has a bad port") from None
    return _base_url(url)


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8 or ``::1``).

    Names other than ``localhost`` are not resolved: a name is remote until proven otherwise.
    """
    host = urlsplit(url).hostname or ""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_server(*, flag: str | None, env: str | None, project: str, project_is_own: bool,
                   user: str | None) -> ServerChoice:
    """Choose the server URL so that a cloned repository cannot send the context elsewhere.

    Order: ``--server`` (even empty: that is an error), then ``CTX_LLM_SERVER``, then the
    project's ``[llm] server_url`` when it is not the built-in default, then the user
    store's (``~/.ctx/config.toml``), then the default. The project's config.toml is
    committed, so a value there that is not a loopback address applies only when the
    store is the user's own (outside any Git work tree); in a clone it is refused, never
    followed silently. A trailing ``/v1`` (the OpenAI-compatible base) is dropped.

    Args:
        flag: ``--server``, if given (None: not given).
        env: ``CTX_LLM_SERVER``, if set and not empty.
        project: The project store's ``[llm] server_url``.
        project_is_own: True when the project store is not in a Git work tree.
        user: The user store's ``[llm] server_url``, or None when there is no user store
            (or it is the project store itself).

    Returns:
        The URL and its source.

    Raises:
        InvalidInput: if the chosen value is not an http(s) URL.
        ConfigInvalid: (E015) if a cloned repository's config names a remote server.
    """
    if flag is not None:  # an empty --server is a mistake, not a request for the default
        return ServerChoice(_check_url(flag, "--server"), "flag")
    if env:
        return ServerChoice(_check_url(env, "CTX_LLM_SERVER"), "env")
    if _base_url(project) != _DEFAULT_URL:
        url = _check_url(project, "[llm] server_url")
        if not is_loopback(url) and not project_is_own:
            raise ConfigInvalid(
                f"[llm] server_url = {url!r} comes from this repository's committed config.toml "
                "and is not on this machine; ctx will not send your context there on its say-so",
                hint="pass --server URL, set CTX_LLM_SERVER, or put server_url in "
                     "~/.ctx/config.toml")
        return ServerChoice(url, "project-config")
    if user and _base_url(user) != _DEFAULT_URL:
        return ServerChoice(_check_url(user, "~/.ctx/config.toml [llm] server_url"), "user-config")
    return ServerChoice(_DEFAULT_URL, "default")


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer of the server.

    Attributes:
        text: The generated text.
        protocol: ``llama`` or ``openai``.
        model: The model the server says answered (or the one asked for).
        tokens_cached: Prompt tokens the server took from its cache (llama.cpp), if told.
        tokens_prompt: Prompt tokens evaluated, if told.
        tokens_predicted: Tokens generated, if told.
    """

    text: str
    protocol: str
    model: str
    tokens_cached: int | None = None
    tokens_prompt: int | None = None
    tokens_predicted: int | None = None


@dataclass
class LlmClient:
    """A client of one server, one request at a time, each bounded in time and size.

    Attributes:
        url: The base URL (``http://127.0.0.1:8080``).
        timeout: Seconds a whole request may take (connect, send, every byte of the reply).
        max_reply_bytes: The largest reply body accepted.
        requests: ``(method, path)`` of every request sent, in order (shown with ``--debug``).
    """

    url: str
    timeout: float
    max_reply_bytes: int
    requests: list[tuple[str, str]] = field(default_factory=list)

    def _connection(self, deadline: float) -> http.client.HTTPConnection:
        parts = urlsplit(self.url)
        left = max(0.001, deadline - time.monotonic())
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return cls(parts.hostname or "", parts.port, timeout=left)

    def _path(self, path: str) -> str:
        return (urlsplit(self.url).path.rstrip("/") or "") + path

    def request(self, method: str, path: str, body: dict[str, JsonValue] | None = None
                ) -> tuple[int, JsonValue]:
        """Send one request and return its status and JSON body.

        Args:
            method: ``GET`` or ``POST``.
            path: The path below the base URL (``/completion``).
            body: A JSON body for ``POST``.

        Returns:
            The HTTP status and the decoded JSON (None for an empty body).

        Raises:
            LlmUnavailable: (E022) refused, timed out, not HTTP, too large or not JSON.
        """
        deadline = time.monotonic() + self.timeout
        self.requests.append((method, path))
        payload = json.dumps(body).encode("utf-8") if body is not None else None
        headers = {"Accept": "application/json", "Connection": "close"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        conn = self._connection(deadline)
        # One wall-clock deadline over the whole exchange: a socket timeout bounds each
        # read alone, so a server sending one header byte every half second would never
        # trip it. At the deadline the watchdog shuts the socket down, which wakes the read
        # blocked on it (headers or body); what was read by then is never used.
        cut = threading.Event()
        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _cut_off, (conn, cut))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.request(method, self._path(path), body=payload, headers=headers)
            resp = conn.getresponse()
            raw = self._read_bounded(resp, deadline)
            status = resp.status
            if cut.is_set():
                raise TimeoutError
        except ConnectionRefusedError:
            raise LlmUnavailable(self.url, "connection refused",
                                 hint="is the server running? start llama-server or pass --server"
                                 ) from None
        except TimeoutError:
            raise LlmUnavailable(self.url, f"no reply within {self.timeout:g} s",
                                 hint="raise --timeout or [llm] timeout_seconds") from None
        except (http.client.HTTPException, OSError) as exc:
            if cut.is_set() or time.monotonic() >= deadline:  # the watchdog ended the read
                raise LlmUnavailable(self.url, f"no reply within {self.timeout:g} s",
                                     hint="raise --timeout or [llm] timeout_seconds") from None
            if isinstance(exc, http.client.HTTPException):
                raise LlmUnavailable(self.url,
                                     f"not a valid HTTP reply ({type(exc).__name__})") from None
            raise LlmUnavailable(self.url, f"cannot connect ({exc.strerror or exc})") from None
        finally:
            watchdog.cancel()
            conn.close()
        return status, self._decode(status, raw, path)

    def _read_bounded(self, resp: http.client.HTTPResponse, deadline: float) -> bytes:
        """The reply body, refused past ``max_reply_bytes`` or the deadline (a trickling server)."""
        declared = resp.getheader("Content-Length")
        if declared and declared.isdigit() and int(declared) > self.max_reply_bytes:
            raise LlmUnavailable(self.url, f"reply of {int(declared)} bytes is larger than the "
                                           f"limit of {self.max_reply_bytes}",
                                 hint="lower --max-tokens or raise [llm] max_reply_bytes")
        chunks: list[bytes] = []
        size = 0
        while chunk := resp.read1(_READ_CHUNK):
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise LlmUnavailable(self.url, f"reply is larger than the limit of "
                                               f"{self.max_reply_bytes} bytes",
                                     hint="lower --max-tokens or raise [llm] max_reply_bytes")
            if time.monotonic() > deadline:
                raise TimeoutError
            chunks.append(chunk)
        return b"".join(chunks)

    def _decode(self, status: int, raw: bytes, path: str) -> JsonValue:
        if status >= 400:
            text = raw[:200].decode("utf-8", "replace").strip().replace("\n", " ")
            raise LlmUnavailable(self.url, f"HTTP {status} from {path}" + (f": {text}" if text else ""))
        if not raw.strip():
            return None
        try:
            value: JsonValue = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            # RecursionError: a reply nested deeper than the parser goes is no answer either.
            raise LlmUnavailable(self.url, f"reply from {path} is not JSON") from None
        return value

    def probe(self, path: str) -> dict[str, JsonValue] | None:
        """``GET path``: its JSON object when the server answers 200, else None.

        Raises:
            LlmUnavailable: (E022) if the server cannot be reached at all.
        """
        try:
            status, value = self.request("GET", path)
        except LlmUnavailable as exc:
            if exc.detail.startswith(("HTTP ", "reply from")):
                return None  # this path is not served: another protocol may be
            raise
        return value if status == 200 and isinstance(value, dict) else None

    def detect(self, protocol: str) -> tuple[Protocol, dict[str, JsonValue] | None]:
        """The protocol to speak, and llama.cpp's ``/props`` when that is what answered.

        Args:
            protocol: ``auto``, ``llama`` or ``openai`` (``[llm] protocol``).

        Returns:
            The protocol, and ``/props`` (None unless the server is llama.cpp).

        Raises:
            ConfigInvalid: (E015) for an unknown protocol name.
            LlmUnavailable: (E022) if the server is down or speaks neither protocol.
        """
        if protocol not in PROTOCOLS:
            raise ConfigInvalid(f"[llm] protocol = {protocol!r} is not one of "
                                + ", ".join(PROTOCOLS))
        if protocol == "openai":
            return "openai", None
        props = self.probe("/props")
        if props is not None or protocol == "llama":
            return "llama", props
        if self.probe("/v1/models") is not None:
            return "openai", None
        raise LlmUnavailable(self.url, "answers neither GET /props (llama.cpp) nor GET /v1/models "
                                       "(OpenAI-compatible)",
                             hint="set [llm] protocol, or check the URL")

    def complete(self, protocol: Protocol, *, system: str, prompt: str, model: str,
                 max_tokens: int, temperature: float, extra: dict[str, JsonValue] | None = None,
                 served_model: str | None = None) -> Completion:
        """Ask for one completion.

        Args:
            protocol: ``llama`` (``POST /completion``, one prompt string) or ``openai``
                (``POST /v1/chat/completions``, a system and a user message).
            system: The system prefix (§14.2).
            prompt: The rest of the prompt.
            model: The model name (sent to OpenAI-compatible servers).
            max_tokens: The response token limit.
            temperature: The sampling temperature.
            extra: More fields of the llama.cpp request (``cache_prompt``, ``id_slot``).
            served_model: The model llama.cpp's ``/props`` names (``served_model``): the
                answer's model before the reply's own ``model`` and ``model``.

        Returns:
            The answer.

        Raises:
            LlmUnavailable: (E022) if the request fails or the reply lacks the text.
        """
        if protocol == "llama":
            body: dict[str, JsonValue] = {"prompt": system + prompt, "n_predict": max_tokens,
                                          "temperature": temperature, "stream": False,
                                          **(extra or {})}
            _, reply = self.request("POST", "/completion", body)
            return self._llama_completion(reply, model, served_model)
        body = {"model": model, "max_tokens": max_tokens, "temperature": temperature,
                "stream": False, "messages": [{"role": "system", "content": system.strip()},
                                              {"role": "user", "content": prompt}]}
        _, reply = self.request("POST", "/v1/chat/completions", body)
        return self._openai_completion(reply, model)

    def _llama_completion(self, reply: JsonValue, model: str, served_model: str | None
                          ) -> Completion:
        if not isinstance(reply, dict) or not isinstance(reply.get("content"), str):
            raise LlmUnavailable(self.url, "reply from /completion has no \"content\" text")
        # The model file /props names wins: llama.cpp's reply may name only an alias
        # ("default", "gpt-3.5-turbo") or nothing at all.
        name = served_model or _text(reply.get("model")) or model
        return Completion(_valid(reply["content"]), "llama", name,
                          tokens_cached=_int(reply.get("tokens_cached")),
                          tokens_prompt=_int(reply.get("tokens_evaluated")),
                          tokens_predicted=_int(reply.get("tokens_predicted")))

    def _openai_completion(self, reply: JsonValue, model: str) -> Completion:
        choices = reply.get("choices") if isinstance(reply, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise LlmUnavailable(self.url, "reply from /v1/chat/completions has no "
                                           "choices[0].message.content text")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        return Completion(_valid(content), "openai", _text(reply.get("model")) or model,
                          tokens_prompt=_int(usage.get("prompt_tokens")),
                          tokens_predicted=_int(usage.get("completion_tokens")))


def server_context(props: dict[str, JsonValue] | None) -> int | None:
    """The context size in tokens llama.cpp's ``/props`` reports (``n_ctx``), if any.

    Args:
        props: ``GET /props`` (None when the server did not answer it).

    Returns:
        ``default_generation_settings.n_ctx`` (or a top-level ``n_ctx``) when a positive
        integer, else None.
    """
    if not props:
        return None
    settings = props.get("default_generation_settings")
    for value in ((settings.get("n_ctx") if isinstance(settings, dict) else None),
                  props.get("n_ctx")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def served_model(props: dict[str, JsonValue] | None) -> str | None:
    """The name of the model file llama.cpp's ``/props`` reports (``model_path``), if any.

    Args:
        props: ``GET /props`` (None when the server did not answer it).

    Returns:
        The file's name (``qwen2.5-7b.gguf`` of ``/models/qwen2.5-7b.gguf``), or None.
    """
    path = props.get("model_path") if props else None
    if not isinstance(path, str):
        return None
    return _text(re.split(r"[/\\]", path.strip().rstrip("/\\"))[-1])


def _int(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: JsonValue) -> str | None:
    return _valid(value) if isinstance(value, str) and value else None


def _valid(text: str) -> str:
    """``text`` with lone surrogates (valid JSON, invalid Unicode) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _cut_off(conn: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The deadline passed: shut down ``conn``'s socket so that a read blocked on it returns."""
    cut.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: the exchange ended meanwhile
