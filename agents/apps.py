from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents.server_tools import agents_using_server
        from toolservers.services import IN_USE_CHECKS

        # A server whose tools a draft or a latest version uses is not deleted or renamed under it.
        if agents_using_server not in IN_USE_CHECKS:
            IN_USE_CHECKS.append(agents_using_server)
