"""AgentLoom: the Django project (settings, urls, the Celery app, agents, the run loop)."""
from agentloom.celery import app as celery_app

__all__ = ["celery_app"]
