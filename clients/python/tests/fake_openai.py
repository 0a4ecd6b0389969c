"""A stand-in for OpenAI's Responses API on 127.0.0.1, so that the examples' "a key is set" path runs
for real in the suite: the Agents SDK's and pydantic-ai's own OpenAI clients send their requests
here (OPENAI_BASE_URL), with the tools' schemas and the tools' outputs, and get answers in the API's
wire format. The model's choices are the examples' SCRIPT (examples/scripted_models.py); the
server keeps every request it was sent, for the test to read."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scripted_models import SCRIPT, answer


class FakeOpenAI:
    def __init__(self, api_key: str):
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                fake.requests.append(
                    {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
                )
                if self.path != "/v1/responses" or self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    return self.answer(
                        404 if self.path != "/v1/responses" else 401,
                        {"error": {"message": "not the Responses API with the key", "type": "invalid_request_error"}},
                    )
                self.answer(200, fake.respond(body))

            def answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """One model turn: the next scripted tool call, or the answer once every call has its output."""
        items = body.get("input") if isinstance(body.get("input"), list) else []
        outputs = [
            item.get("output")
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        n = len(self.requests)
        if len(outputs) < len(SCRIPT):
            name, arguments = SCRIPT[len(outputs)]
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        else:
            text = outputs[-1] if isinstance(outputs[-1], str) else json.dumps(outputs[-1])
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer(text), "annotations": []}],
            }
        usage = {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 0,
            "model": body.get("model", ""),
            "status": "completed",
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }
