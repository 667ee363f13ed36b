from django.apps import AppConfig


class RunLoopConfig(AppConfig):
    name = "agentloom.runloop"
    label = "runloop"
    verbose_name = "Run loop"

    def ready(self) -> None:
        from agentloom.runloop.tasks import dispatch_run
        from sessions.services.dispatch import dispatcher_set

        dispatcher_set(dispatch_run)
