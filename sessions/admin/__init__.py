"""The operator console for sessions and runs (SPEC §10).

- ``console``: the ModelAdmins (read-only system rows, lists that never decrypt, actions
  that call services) and the URLs of the console pages;
- ``pages``: the records, compactions, event-timeline and context-inspector pages, each
  audited when it shows decrypted content;
- ``display`` and ``chart``: plain-Python presentation (messages, events, the SVG chart);
- ``waits`` and ``wait_chart``: what each compaction cost the person in waiting (CTX-45);
- ``summary_check``: the check's verdict on each summary reply, and a summary written by
  code (CTX-48);
- ``prepared``: the summaries prepared in the background, read-only, never their text;
- ``inputs``: the tool servers' questions to the person (TOOL-10), read-only, never their content;
- ``file_list``: every attached file (size, owner, session, space, when), never its name or bytes;
- ``memory``: people's memory (§7c): owners and sizes, the change log, never the text; the
  files on an audited read page only;
- ``reads``: the console's own reads (its one write, the access audit, is
  ``sessions.services.access_audit``, shared with the API).
"""
from sessions.admin import (  # noqa: F401  (registers the ModelAdmins)
    approvals,
    console,
    file_list,
    inputs,
    memory,
    prepared,
)
