"""Reads for sessions, runs and records, one module per entity; nothing here writes.

- ``sessions``: a session for its creator, what a run asks of it as it starts, a ready summary;
- ``files``: a session's attached files;
- ``runs``: a run for the person who asked it;
- ``records``: record pages, what an instance's context is built from, the reusable views;
- ``instances``: a run's instances, the tool group in flight, the sub-agents still working;
- ``model_calls``: what a model call sent, rebuilt from the call log;
- ``inspector``: each model call beside the call it is compared with (the context inspector);
- ``usage``: an agent version's usage page, aggregated in the database.

Who else may read a session (its space's admins, staff with an audited read) is
``sessions.staff``.
"""
