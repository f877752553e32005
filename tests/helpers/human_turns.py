"""How a view shows one of the user's own messages, read from the view's text alone.

    how_shown(view_messages, text, id)   # "verbatim", "head" or None (reduced to an id, or absent)

"head" only when the view holds the message's first characters of the human's own words
(client context left out) followed by the stub line that names ``id``, exactly as
``core/formats.human_head`` writes it; anything shorter, or a bare ``§id``, is None.
"""

import re

from arc_vllm.core.transcript import content_text, human_words

HEAD_LINE = re.compile(r"… \[ARC: its first ([\d,]+) of ([\d,]+) characters; `_recall §([0-9a-f]+)` returns it whole\]")


def texts_of(messages: list[dict]) -> list[str]:
    return [content_text(message) for message in messages]


def how_shown(messages: list[dict], text: str, id: str) -> str | None:
    contents = texts_of(messages)
    if any(text in content for content in contents):
        return "verbatim"
    words = human_words(text)
    for content in contents:
        for match in HEAD_LINE.finditer(content):
            shown, chars = (int(group.replace(",", "")) for group in match.group(1, 2))
            if match.group(3) != id or chars != len(text) or not 0 < shown <= len(words):
                continue
            if content[:match.start()].endswith(words[:shown]):
                return "head"
    return None
