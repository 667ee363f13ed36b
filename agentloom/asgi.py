import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentloom.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (configured by the line above)

from agentloom.admission import AdmissionLimit  # noqa: E402

application = AdmissionLimit(django_application, limit=settings.AGENTLOOM_WEB_MAX_PENDING)
