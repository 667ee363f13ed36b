from django.apps import AppConfig


class RunLoopConfig(AppConfig):
    name = "runloop"
    label = "runloop"
    verbose_name = "Run loop"

    def ready(self) -> None:
        import tools  # noqa: F401  (registers the built-in tools agents choose from)
        from runloop.housekeeping import worker_hooks_connect
        from runloop.tasks import dispatch_compaction, dispatch_preparation, dispatch_run
        from sessions.services.dispatch import compaction_dispatcher_set, dispatcher_set, preparation_dispatcher_set

        dispatcher_set(dispatch_run)
        compaction_dispatcher_set(dispatch_compaction)
        preparation_dispatcher_set(dispatch_preparation)
        worker_hooks_connect()
