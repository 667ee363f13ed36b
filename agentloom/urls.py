from __future__ import annotations

from django.contrib import admin
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from agentloom.health import healthz
from core.accounts import api as accounts_api
from models_catalog.api import models_discover_view
from web.security import LimitedAdminAuthenticationForm, limited_login, with_csp

admin.site.site_header = "AgentLoom console"
admin.site.site_title = "AgentLoom"
admin.site.index_title = "Models, agents, sessions"
# The console's door counts failed logins with the chat's and the API's (SPEC §11).
admin.site.login_form = LimitedAdminAuthenticationForm



def favicon(request):
    """``/favicon.ico``, which browsers ask for whatever the page links: the static file."""
    return HttpResponsePermanentRedirect(static("agentloom/favicon.ico"))


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/login/", limited_login(admin.site.login), name="admin-login-limited"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: no inline script under the CSP.
    path("api/docs/", with_csp(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
    path("api/v1/auth/token", accounts_api.obtain_token, name="auth-token"),
    path("api/v1/auth/tokens", accounts_api.tokens_collection, name="auth-tokens"),
    path("api/v1/auth/tokens/current", accounts_api.token_current, name="auth-token-current"),
    path("api/v1/auth/tokens/<int:token_id>", accounts_api.token_detail, name="auth-token-detail"),
    path("api/v1/", include("sessions.urls")),
    path("api/models/discover", models_discover_view, name="models-discover"),
    path("api/v1/", include("models_catalog.urls")),
    path("api/v1/", include("agents.urls")),
    path("api/v1/", include("memory.urls")),
    path("api/v1/", include("toolservers.urls")),
    path("", include("web.urls")),
]

handler400 = "core.api.pages.bad_request"
handler403 = "core.api.pages.forbidden"
handler404 = "core.api.pages.not_found"
handler500 = "core.api.pages.server_error"
