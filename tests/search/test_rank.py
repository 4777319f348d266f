"""The ranking library on in-memory documents: the query cleaner, tokens, each scoring step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.search.rank import Corpus, Document, Params, defined_names
from ctxstore.search.task import clean_query, parse_query
from ctxstore.search.tokenize import (
    cached_is_test_path,
    held_terms,
    is_test_path,
    path_tokens,
    tokenize,
)
from ctxstore.search.tokenize import (
    terms as all_terms,
)


def _doc(path: str, text: str, defs: tuple[str, ...] = (), imports: tuple[str, ...] = ()) -> Document:
    return Document(path, tokenize(text), defs, imports)


DOCS = [
    _doc("src/app/http.py", "parse the request header value cookie date", ("parse_date",)),
    _doc("src/app/serving.py", "def log_request(self): write the request line to the log",
         ("log_request",), ("src/app/http.py",)),
    _doc("src/app/routing.py", "rule map converter float number", ("FloatConverter",)),
    _doc("tests/test_http.py", "parse request header cookie cookie cookie date test"),
]


def test_rank_tokens_split_identifiers_and_drop_noise() -> None:
    assert tokenize("get_pager_file HTTPTransport a 42 the") == [
        "get_pager_file", "get", "pager", "file", "httptransport", "http", "transport"]
    assert path_tokens("crates/ignore/src/default_types.rs") == [
        "crates", "ignore", "src", "default_types", "default", "types", "crate", "default_type",
        "type"]


def test_rank_query_cleaner_strips_merge_lines_trailers_urls_and_numbers() -> None:
    subject, body = clean_query(
        "Merge pull request #12 from a/b\nFix cookie dates (#99)\n\n* see https://x.y/z 0123456789abcdef0\n"
        "Signed-off-by: A <a@b>\nCloses #3")
    assert subject == "Fix cookie dates"
    assert body == "* see"


def test_rank_query_pairs_and_code_names() -> None:
    query = parse_query("escape characters in request log for `Map.bind` and get_host()")
    assert {"request_log", "log_request", "requestlog"} <= set(query.weights)
    assert {"bind", "get_host", "map"} <= query.names  # a member and its owner
    assert {"Map", "bind"} <= query.spelled and "escape" not in query.spelled


def test_rank_a_method_named_with_its_class_finds_the_class_file() -> None:
    docs = [_doc(f"pkg/m{i}.py", f"class C{i}:\n def __init__(self): pass", (f"C{i}", "__init__"))
            for i in range(30)] + [_doc("pkg/repo.py", "class Store:\n def __init__(self): pass",
                                        ("Store", "__init__"))]
    hits = Corpus.from_documents(docs).rank(parse_query("Store.__init__ opens the lock"))
    assert hits[0].path == "pkg/repo.py" and "store" in hits[0].defines


def test_rank_a_named_class_means_the_product_not_a_test_double() -> None:
    """A fixture defining the same class, full of the task's words, does not take its boost."""
    docs = [_doc("pkg/repo.py", "class Store:\n def open(self): read the objects", ("Store",)),
            _doc("tests/fakes.py", "class Store:\n store lock lock lock crash crash writes",
                 ("Store",)),
            *[_doc(f"pkg/m{i}.py", f"def f{i}(): pass", (f"f{i}",)) for i in range(20)]]
    hits = Corpus.from_documents(docs).rank(parse_query("`Store` loses writes after a lock crash"))
    assert hits[0].path == "pkg/repo.py" and hits[0].defines == ["store"]
    fake = next(h for h in hits if h.path == "tests/fakes.py")
    assert fake.defines == []
    # only a test file defines it: the test file keeps the boost
    only = Corpus.from_documents(docs[1:]).rank(parse_query("`Store` loses writes"))
    assert only[0].path == "tests/fakes.py" and only[0].defines == ["store"]


@given(st.text(max_size=400))
def test_rank_any_text_parses_and_ranks(text: str) -> None:
    hits = Corpus.from_documents(DOCS).rank(parse_query(text))
    assert sorted(h.path for h in hits) == sorted(d.path for d in DOCS)
    assert all(h.score >= 0 for h in hits)


def test_rank_a_named_definition_ranks_its_file_first() -> None:
    hits = Corpus.from_documents(DOCS).rank(parse_query("FloatConverter uses scientific notation"))
    assert hits[0].path == "src/app/routing.py" and hits[0].defines == ["floatconverter"]


def test_rank_file_names_in_the_query() -> None:
    query = parse_query("fix the date bug in http.py and ./src/app/routing.py; e.g. v1.2, a.b.c")
    assert query.files == {"http.py", "src/app/routing.py"}
    assert "py" not in query.weights and "py" not in query.names  # an extension is no word
    assert parse_query("see docs for main.c and x.h").files == set()  # "see ...": a trailer
    assert parse_query("main.c and x.h").files == {"main.c", "x.h"}


def test_rank_a_named_file_ranks_first() -> None:
    docs = [*DOCS, _doc("src/app/py.typed", ""), _doc("docs/routing.md", "routing rule map routing")]
    corpus = Corpus.from_documents(docs)
    hits = corpus.rank(parse_query("update routing.py for the cookie date header"))
    assert hits[0].path == "src/app/routing.py" and hits[0].named == ["routing.py"]
    assert [h.path for h in hits].index("src/app/py.typed") > 1
    # no file of that name: nothing named; a name every file has points nowhere
    assert all(not h.named for h in corpus.rank(parse_query("fix nothere.py")))
    off = Corpus.from_documents(docs, Params(file_boost=0.0))
    assert off.rank(parse_query("update routing.py for the cookie date header"))[0].path \
        == "docs/routing.md"  # without the boost the document wins


def test_rank_word_pairs_find_the_identifier() -> None:
    hits = Corpus.from_documents(DOCS).rank(parse_query("escape characters in request log"))
    assert hits[0].path == "src/app/serving.py"
    assert "log_request" in hits[0].terms


def test_rank_test_prior_demotes_tests() -> None:
    query = parse_query("cookie header date")
    with_prior = Corpus.from_documents(DOCS).rank(query)
    without = Corpus.from_documents(DOCS, Params(test_prior=1.0)).rank(query)
    assert without[0].path == "tests/test_http.py"
    assert with_prior[0].path == "src/app/http.py"
    assert is_test_path("tests/test_http.py") and is_test_path("crates/x/src/tests.rs")
    assert not is_test_path("src/werkzeug/test.py")
    assert is_test_path("bench/retrieval.py") and is_test_path("benchmarks/suite/run.py")
    assert not is_test_path("src/benchmarking.py")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["src", "Tests", "test", "testing", "benches", "lib",
                                          "examples", "test_a.py", "a_test.go", "x.spec.ts",
                                          "conftest.py", "tests.rs", "mod.rs", "TEST_B.PY",
                                          "a.test.js", ""]), min_size=1, max_size=4)
                .map("/".join), max_size=30))
def test_the_folder_caching_checker_agrees_with_is_test_path(paths: list[str]) -> None:
    check = cached_is_test_path()
    assert [check(p) for p in paths] == [is_test_path(p) for p in paths]


_PIECES = ["get", "Pager", "file", "_", "__init__", "HTTP", "Transport", "x", "42", "ing", " ",
           "\n", "-", ".", "İ", "ß", "the", "Request", "request", "log", "ÉTÉ", "::", "a_b"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join),
       st.lists(st.sampled_from(["get", "pager", "get_pager", "file", "init", "__init__", "http",
                                 "httptransport", "transport", "ing", "request", "log", "a_b",
                                 "x", "42", "-x", "Get", "", "ét", "the"]), max_size=8))
def test_held_terms_is_the_filter_of_the_texts_terms(text: str, terms: list[str]) -> None:
    # The pack's exact matched_terms of a chosen chunk: the same answer as tokenizing it all
    # (non-ASCII letters whose lower case is longer must not shift what is found).
    held = set(all_terms(text))
    assert held_terms(text, terms) == [t for t in terms if t in held]


def test_rank_explain_limits_which_hits_list_their_terms() -> None:
    corpus = Corpus.from_documents(DOCS)
    full = corpus.rank(parse_query("parse request header cookie"), matched_only=True)
    told = corpus.rank(parse_query("parse request header cookie"), matched_only=True, explain=1)
    assert [(h.path, h.score) for h in told] == [(h.path, h.score) for h in full]
    assert told[0].terms == full[0].terms and full[1].terms and told[1].terms == []


def test_rank_graph_lifts_an_imported_file_with_its_edge() -> None:
    docs = [_doc("a.py", "alpha beta", imports=("b.py",)), _doc("b.py", "gamma"), _doc("c.py", "delta")]
    hits = Corpus.from_documents(docs).rank(parse_query("alpha"))
    assert [h.path for h in hits][:2] == ["a.py", "b.py"]
    assert hits[1].via == ("a.py", "Imports")
    flat = Corpus.from_documents(docs, Params(graph_weight=0.0)).rank(parse_query("alpha"))
    assert flat[1].score == 0.0 and flat[1].via is None


def test_rank_defined_names_skip_test_modules_and_plain_kinds() -> None:
    rows = [("crate::walk::Walk", "Walk", "struct"), ("crate::walk::tests::it", "it", "function"),
            ("crate::walk", "walk", "module"), ("crate::walk::Walk::new", "new", "method")]
    assert defined_names(rows) == ["Walk", "new"]
