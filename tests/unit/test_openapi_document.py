"""The OpenAPI document names exactly the routes the server answers, with the same verbs."""

from __future__ import annotations

import re

from barca import __version__
from barca.server.app import build_app
from barca.server.http import Served
from barca.server.openapi import document


def test_the_document_and_the_router_name_the_same_operations():
    app = build_app(Served(options=None, pipeline=None))
    routed = set()
    for route in app.routes:
        methods = getattr(route, "methods", None)
        path = re.sub(r"\{(\w+)(:\w+)?\}", r"{\1}", route.path)
        if methods is None or path in ("/", "/ui"):
            continue  # the web UI's files and its redirects are not API
        routed |= {(m, path) for m in methods if m != "HEAD"}
    documented = {(m.upper(), path) for path, item in document(__version__)["paths"].items()
                  for m in item}
    assert routed == documented
    assert documented  # the check compares something


def test_the_document_is_openapi_3_1_with_an_optional_bearer_token():
    doc = document(__version__)
    assert doc["openapi"].startswith("3.1") and doc["security"] == [{"bearer": []}, {}]
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert doc["paths"]["/health"]["get"]["security"] == [{}]
    assert "415" in doc["paths"]["/runs"]["post"]["responses"]
    refs = set(re.findall(r'"#/components/schemas/(\w+)"', str(doc).replace("'", '"')))
    assert refs <= set(doc["components"]["schemas"])
