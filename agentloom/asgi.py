import logging
import os

import django

# uvicorn sets up its logging before it loads this module; Django's LOGGING (applied by the
# line below) then gives its loggers the secrets filter, and would also undo what uvicorn
# was told: ``--no-access-log`` (no handler, no propagation) and ``--log-level``. Those
# two are put back once Django is set up.
_ACCESS = logging.getLogger("uvicorn.access")
_ACCESS_OFF = not _ACCESS.handlers and not _ACCESS.propagate
_LEVELS = {name: logging.getLogger(name).level for name in ("uvicorn.error", "uvicorn.access", "uvicorn.asgi")}

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentloom.settings")
django.setup(set_prefix=False)  # what get_asgi_application() does before making Django's handler

from agentloom.handler import OneHopHandler  # noqa: E402  (needs Django set up)

django_application = OneHopHandler()

for _name, _level in _LEVELS.items():
    if _level != logging.NOTSET:  # set by uvicorn's --log-level
        logging.getLogger(_name).setLevel(_level)
if _ACCESS_OFF:
    _ACCESS.handlers = []
    _ACCESS.propagate = False

from django.conf import settings  # noqa: E402  (configured by django.setup above)

from agentloom.admission import AdmissionLimit  # noqa: E402
from agentloom.collector import SettleAtStartup  # noqa: E402
from agentloom.request_body import BodyLimits  # noqa: E402

door = AdmissionLimit(django_application, limit=settings.AGENTLOOM_WEB_MAX_PENDING,
                      per_client=settings.AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT, body=BodyLimits.from_settings())
application = SettleAtStartup(door)
