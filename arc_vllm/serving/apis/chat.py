"""Chat completions (``POST /v1/chat/completions``): the ARC path's own form, so the adapter
translates nothing (the ARC path validates the body: ``chat.check_body``, ``ChatEngine.check``); it writes
the stream's events from ARC's chunks. It decides only
what ARC takes when no session is named: messages it can read, text content and one choice;
the rest (image parts, ``n`` > 1, a body without messages) plain vLLM answers as without
``--arc``.
"""

from __future__ import annotations

import json

from arc_vllm.core.transcript import content_text
from arc_vllm.serving.apis import ConversationAPI, Translation
from arc_vllm.serving.errors import Declined
from arc_vllm.serving.step.chat import check_messages
from arc_vllm.serving.metrics import CHAT


class ChatAPI(ConversationAPI):
    name = CHAT
    paths = ("/v1/chat/completions",)

    async def translate(self, body: dict, app, caller: str = "", size: int = 0) -> Translation:
        check_messages(body)  # the shape the route reads before the ARC path runs (handles, turns)
        return Translation(body)

    def declines(self, body: dict) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise Declined("no messages ARC can read")
        if not isinstance(body.get("n") or 1, int) or (body.get("n") or 1) > 1:  # several choices: plain vLLM's, as without --arc
            raise Declined("n > 1")
        try:
            for index, message in enumerate(body["messages"]):
                if isinstance(message, dict):
                    content_text(message, f"messages[{index}]")
        except ValueError as error:
            raise Declined(str(error)) from None

    def answer(self, translation: Translation, response: dict, app) -> dict:
        return response

    async def stream(self, translation: Translation, chunks, app):
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"
