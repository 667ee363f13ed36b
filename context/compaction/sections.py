"""CTX-34: the nine sections of a summary, and the two a shortened summary treats apart.

The prompt asks for them (prompt.py) and the fitting that shortens a summary over its room
reads them (cleaning.py): section 6 lists every user message in order, so it loses its
oldest sentences first, never its newest, however it is laid out; section 9 is the step the
model takes next, so it is kept whole while any other section shows more than one sentence,
and emptied after every section but 6, whose newest sentence goes last of all: the user's
latest summarized words are found nowhere else in the compacted view, while the next step
follows from them. No section is emptied while another shows more than one sentence.
"""

from __future__ import annotations

SECTION_TITLES = (
    "Primary requests and intent",
    "Key technical concepts",
    "Files, resources and code",
    "Errors and fixes",
    "Problem solving progress",
    "All user messages",
    "Pending tasks",
    "Current work",
    "Next step",
)
USER_MESSAGES = 6  # shortened from its oldest entries
NEXT_STEP = 9  # shortened last
