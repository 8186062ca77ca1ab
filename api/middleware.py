"""Pure ASGI wrappers around the whole service (cheap: no request objects).

- :class:`SecurityHeaders`: ``X-Content-Type-Options: nosniff`` on every answer,
  and on every HTML answer (pages, error pages, ``/docs``) a
  Content-Security-Policy that allows no script from anywhere.
- :class:`HeadAsGet`: ``HEAD`` on any ``GET`` route answers what ``GET`` would,
  headers and all, without the body.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# No script runs on our pages, from anywhere; the evidence is shown as text.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HTML_HEADERS = {"Content-Security-Policy": CSP, "Referrer-Policy": "same-origin"}


class SecurityHeaders:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                headers.append((b"x-content-type-options", b"nosniff"))
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if ctype.startswith(b"text/html"):
                    for k, v in HTML_HEADERS.items():
                        if k.lower().encode() not in names:
                            headers.append((k.lower().encode(), v.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)
