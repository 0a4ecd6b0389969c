"""How many times one recall request crosses from one of the project's modules into another.

    .venv/bin/python bench/recall_hops.py [--db bench_hops]

Issue 23 measured "a recall request visits `visibility` 4 times and `service` 3 times". This
traces one `POST /api/agent/v1/memories/recall` (Django's test client, a member holding 20
memories; the second of two identical requests, so that nothing is loaded on the way) with
`sys.setprofile` and counts, per project module, how often a call enters it from another
module (calls inside one module are not hops). Prints the modules in the order the request
first reaches them, each with its entry count, and the totals. Runs on any tree that has a
`config.settings` (or, before issue 23's move, `memoryapp.settings`), so a before/after is two
runs of this script on two checkouts.
"""

# move_packages: names the old modules on purpose (memoryapp.settings: the "before" checkout of a before/after)
from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections import Counter

from _setup import ROOT, setup

PROJECT = ("memoryapp", "governance", "retention", "credits", "core", "config")


def _module_of(frame) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name.split(".")[0] in PROJECT else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="bench_hops")
    args = parser.parse_args()
    if not (ROOT / "config" / "settings.py").exists():  # a checkout from before the move
        import os

        os.environ["DJANGO_SETTINGS_MODULE"] = "memoryapp.settings"
    setup(args.db)
    from django.test import Client

    from governance import actions

    workspace, _owner = actions.create_workspace("Hops", owner_email="hops-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    member = actions.add_member(workspace, "hops@x.test", role="editor")
    _credential, token = actions.create_credential(member, name="hops", scopes=["memory:read", "memory:write"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for i in range(20):
        body = {"namespace": "hops", "key": f"k{i}", "text": f"Note {i}: prefers aisle seats on trains to Osaka"}
        assert (
            client.post(
                "/api/agent/v1/memories/remember", json.dumps(body), content_type="application/json"
            ).status_code
            == 201
        )
    query = json.dumps({"query": "which seat on the train to Osaka"})
    client.post("/api/agent/v1/memories/recall", query, content_type="application/json")  # warm

    entries: Counter[str] = Counter()  # calls into a module from another (a loop's calls each count)
    edges: dict[str, set[tuple[str, str]]] = {}  # distinct (caller function, callee function) per module
    order: list[str] = []
    stack: list[tuple[str | None, str]] = []

    def profile(frame, event, _arg):
        if event == "call":
            module = _module_of(frame)
            resumed = frame.f_code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE) and frame.f_lasti >= 0
            caller_module, caller_function = stack[-1] if stack else (None, "")
            function = f"{module}.{frame.f_code.co_qualname}" if module else caller_function
            if module is not None and module != caller_module and not resumed:
                entries[module] += 1
                edges.setdefault(module, set()).add((caller_function, function))
                if module not in order:
                    order.append(module)
            stack.append((module, function) if module is not None else (caller_module, caller_function))
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        response = client.post("/api/agent/v1/memories/recall", query, content_type="application/json")
    finally:
        sys.setprofile(None)
    assert response.status_code == 200, response.content
    print(f"tree {ROOT.name}: one recall, {len(response.json()['memories'])} memories answered")
    print("  calls in  distinct edges  module")
    for module in order:
        print(f"  {entries[module]:8d}  {len(edges[module]):14d}  {module}")
    print(
        f"modules reached: {len(order)}; calls across modules: {sum(entries.values())}; distinct cross-module "
        f"edges: {sum(map(len, edges.values()))}"
    )


if __name__ == "__main__":
    main()
