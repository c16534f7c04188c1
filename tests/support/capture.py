"""A chat-completions server in a thread that records every request body and answers as told: the
fidelity tests send the same page through ocrserve and through Chandra's own client to it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD = '<div data-bbox="10 10 500 60" data-label="Text"><p>Hello world, a fine page.</p></div>'


class Capture:
    """A chat-completions server that records every request body and answers `content` / `finish`."""

    def __init__(self, content: str = GOOD, finish: str = "stop", root: str | None = None) -> None:
        self.bodies: list[dict] = []
        self.content, self.finish = content, finish
        self.card = {"id": "chandra", "object": "model", "owned_by": "vllm", **({"root": root} if root else {})}
        cap = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, obj):
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._json({"object": "list", "data": [cap.card]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                cap.bodies.append(body)
                self._json(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": cap.finish,
                                "message": {"role": "assistant", "content": cap.content},
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                    }
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
