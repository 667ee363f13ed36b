"""The run loop (SPEC §7): the Celery task, the step machine, events and their sinks."""
