"""Chat completions (``POST /v1/chat/completions``): the ARC path's own form, so the adapter
translates nothing. It decides only what ARC takes when no session is named: text content
and one choice; the rest (image parts, ``n`` > 1) plain vLLM serves as without ``--arc``.
"""

from __future__ import annotations

from arc_vllm.core.transcript import content_text
from arc_vllm.serving.apis import ConversationAPI, Declined, Translation
from arc_vllm.serving.chat import check_body
from arc_vllm.serving.conversation_keys import CHAT


class ChatAPI(ConversationAPI):
    name = CHAT
    paths = ("/v1/chat/completions",)

    async def translate(self, body: dict, app, headers: dict[str, str]) -> Translation:
        check_body(body)
        return Translation(body)

    def declines(self, body: dict) -> None:
        if not isinstance(body.get("messages"), list):
            return  # a bad body: translate says what is wrong
        if (body.get("n") or 1) > 1:  # several choices: plain vLLM's, as without --arc
            raise Declined("n > 1")
        try:
            for index, message in enumerate(body["messages"]):
                if isinstance(message, dict):
                    content_text(message, f"messages[{index}]")
        except ValueError as error:
            raise Declined(str(error)) from None

    def answer(self, translation: Translation, response: dict, app) -> dict:
        return response

    def stream(self, translation: Translation, events, app):
        return events
