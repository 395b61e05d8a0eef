# -*- coding: utf-8 -*-
# Copyright: gpufleet engineers
# Apache-2.0 (see galaxy.yml)
"""What gpufleet prints fits the terminal: COLUMNS when set, the terminal's width, else 80."""

from __future__ import annotations

import argparse
import re
import shutil
import textwrap

DEFAULT_WIDTH = 80
MIN_WIDTH = 40  # below this nothing is readable; lines are laid out for 40 and the terminal wraps them


def width() -> int:
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the cut marked with '...'."""
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def names(items: list[str], limit: int) -> str:
    """A comma-separated list that fits `limit` characters: as many names as fit, whole, then 'and N more'."""
    shown: list[str] = []
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        candidate = ", ".join(shown + [item]) + (f" and {rest} more" if rest else "")
        if len(candidate) > limit and shown:
            return ", ".join(shown) + f" and {len(items) - len(shown)} more"
        shown.append(item)
    return ", ".join(shown)


def clip_middle(text: str, limit: int) -> str:
    """`text` in `limit` characters with its middle cut out (' ... '): a failure's cause is at its end and
    what failed at its start, so both stay."""
    if len(text) <= limit:
        return text
    if limit < 9:
        return clip(text, limit)
    tail = (limit - 5) // 2
    return text[: limit - 5 - tail] + " ... " + text[len(text) - tail:]


def play_and_task(play: str, task: str, limit: int) -> str:
    """"PLAY / TASK" in `limit` characters: the play's name is cut first (the task says what runs now),
    then the task's middle."""
    joined = f"{play} / {task}"
    if len(joined) <= limit:
        return joined
    room = limit - len(task) - 3
    if room >= 8:
        return f"{clip(play, room)} / {task}"
    return clip_middle(task, limit)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help in the terminal's width : paragraphs are filled to it, while indented lines
    (the stage list) keep their layout."""

    def __init__(self, prog):
        super().__init__(prog, width=width() - 2)

    def _fill_text(self, text, width, indent):
        lines = []
        for line in text.splitlines():
            if len(line) <= width:
                lines.append(indent + line)
                continue
            # "  name  what it does": continuation lines start under "what".
            hanging = re.match(r"^(\s+\S+\s+)", line) if line.startswith(" ") else None
            lines.extend(textwrap.wrap(line, width, initial_indent=indent, break_on_hyphens=False,
                                       subsequent_indent=indent + " " * (len(hanging.group(1)) if hanging else 0)))
        return "\n".join(lines)
