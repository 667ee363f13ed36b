"""Model connections: a provider endpoint, its encrypted key and its window figures (SPEC §2, §8)."""
from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from context.policy import Budget, budget_under_window, default_safety_margin
from core.crypto import encrypt
from models_catalog.providers import provider_label

PLATFORM_DEFAULT_CONTEXT_WINDOW = 32_768
PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS = 4_096
PLATFORM_DEFAULT_SAFETY_MARGIN = 1_024


class FigureSource(models.TextChoices):
    PROVIDER = "provider", "Provider"
    OFFICIAL_MANIFEST = "official_manifest", "Official manifest"
    PLATFORM_DEFAULT = "platform_default", "Platform default (check it)"
    MANUAL = "manual", "Manual"
    # CAT-8: what the server said it keeps per request (llama.cpp's /props, Ollama's
    # num_ctx, LM Studio's loaded context, or one probe); ``server_context_source`` says how.
    SERVER = "server", "The server"


class ConcurrencySource(models.TextChoices):
    """Where a connection's concurrency (CAT-11) came from; blank: unknown (unlimited)."""

    SERVER = "server", "The server's /props (total_slots)"
    SERVER_KIND = "server_kind", "llama-cpp-python's server answers one request at a time"
    MANUAL = "manual", "Set by an admin"


CONCURRENCY_MAX = 64  # what an admin may set; no local server runs more slots usefully


class ModelConnection(models.Model):
    """A configured model. The key is encrypted and write-only (CAT-6): only the hint is shown.

    ``server_context_window`` is what the server keeps per request as discovery read it
    (Ollama's num_ctx / loaded context / default, llama.cpp's n_ctx…), with
    ``server_context_source`` saying how; it comes only from a discovery token. A
    configured ``context_window`` above it is allowed but never relied on: requests use
    :attr:`effective_context_window`.

    ``context_window_source`` and ``max_output_tokens_source`` say where each figure came
    from (CAT-2); ``*_maximum`` (with ``*_maximum_source``) is what the model is known to
    allow, which no write may exceed (CAT-3, ``models_catalog.maxima``).

    ``provider`` is a name in the provider registry (``models_catalog.providers``); the
    column carries no choices, so registering a provider needs no migration, and
    ``connection_validate`` refuses a name the registry does not know.
    """

    space = models.ForeignKey("spaces.Space", on_delete=models.CASCADE, related_name="model_connections")
    name = models.CharField(max_length=200)
    provider = models.CharField(max_length=32)
    base_url = models.CharField(max_length=500, blank=True)
    api_key = encrypt(models.TextField(blank=True, default=""))
    api_key_hint = models.CharField(max_length=32, blank=True, default="")
    model = models.CharField(max_length=200)
    context_window = models.PositiveIntegerField(default=PLATFORM_DEFAULT_CONTEXT_WINDOW)
    max_output_tokens = models.PositiveIntegerField(default=PLATFORM_DEFAULT_MAX_OUTPUT_TOKENS)
    safety_margin_tokens = models.PositiveIntegerField(default=PLATFORM_DEFAULT_SAFETY_MARGIN)
    # CAT-2: one source per figure. A window from vLLM's max_model_len is the provider's
    # even when the output figure beside it is still the platform's default.
    context_window_source = models.CharField(
        "window source", max_length=32, choices=FigureSource.choices, default=FigureSource.PLATFORM_DEFAULT
    )
    max_output_tokens_source = models.CharField(
        "output source", max_length=32, choices=FigureSource.choices, default=FigureSource.PLATFORM_DEFAULT
    )
    # CAT-3: what the model allows, as discovery or the official manifest said it, with
    # where it came from (``provider`` or ``official_manifest``; blank when unknown). Kept
    # here so that every later write is checked, not only the one carrying the token.
    context_window_maximum = models.PositiveIntegerField(null=True, blank=True)
    context_window_maximum_source = models.CharField(max_length=32, blank=True, default="")
    max_output_tokens_maximum = models.PositiveIntegerField(null=True, blank=True)
    max_output_tokens_maximum_source = models.CharField(max_length=32, blank=True, default="")
    manifest_version = models.CharField(max_length=64, blank=True, default="")
    supports_images = models.BooleanField(default=False)
    # What the server itself keeps, as discovery read it (Ollama's loaded context, llama.cpp's
    # n_ctx…): requests never rely on more, whatever window is configured (CAT-2, CAT-7).
    server_context_window = models.PositiveIntegerField(null=True, blank=True)
    server_context_source = models.CharField(max_length=32, blank=True, default="")
    # CAT-3: a context-overflow refusal below the configured window is a fact about the
    # server, learned with its provenance (``provider_refusal``) and applied to every run
    # of this connection, published versions included.
    learned_context_window = models.PositiveIntegerField(null=True, blank=True)
    learned_window_at = models.DateTimeField(null=True, blank=True)
    learned_window_note = models.CharField(max_length=300, blank=True, default="")
    # CAT-11: how many calls the server answers at once (llama.cpp's /props total_slots,
    # 1 for llama-cpp-python's server, or the admin's figure), with where it came from
    # (``ConcurrencySource``). Null is unknown, which means unlimited: hosted providers
    # queue or refuse with 429 themselves, and a guessed bound would throttle them.
    concurrency = models.PositiveSmallIntegerField(null=True, blank=True)
    concurrency_source = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        # Shown wherever a connection is picked or named: the provider's label, never its id.
        label = provider_label(self.provider)
        return f"{self.name} ({self.model} on {'the ' + label[4:] if label.startswith('The ') else label})"

    def effective_context_window(self, configured: int | None = None) -> int:
        """The window requests may rely on: the configured one (or ``configured``, a
        version's frozen figure), never more than the server keeps (as discovered) nor
        than what it was seen to refuse at (learned)."""
        window = self.context_window if configured is None else configured
        for limit in (self.server_context_window, self.learned_context_window):
            if limit:
                window = min(window, limit)
        return window

    def figures_set(self) -> tuple[bool, bool]:
        """Whether an admin set the safety margin and the output reserve: a margin other than
        the default for the configured window was typed (the rule the connection's own
        validation follows, ``validation._safety_margin``); an output reserve was set when
        its source is ``manual``. What was not set follows a window the server proves (CAT-9)."""
        margin_set = self.safety_margin_tokens != default_safety_margin(self.context_window)
        return margin_set, self.max_output_tokens_source == FigureSource.MANUAL

    def budget(self, frozen: Budget | None = None) -> Budget:
        """CTX-21, CAT-9, RUN-4: the budget a request through this connection may use — the
        one figure every page, the API and the run loop show and decide with.

        ``frozen`` is a version's frozen figures (a run's); without it, this connection's
        own, within the window the server keeps (what a version published now freezes).
        Either is then lowered to the window the server proved (discovered, or learned from
        a refusal or a cut prompt), with the safety margin and output reserve an admin did
        not set following it (``context.budget_under_window``); a larger window changes
        nothing. PolicyError when the figures leave no room for input."""
        if frozen is None:
            frozen = Budget(context_window=min(self.context_window, self.server_context_window or self.context_window),
                            max_output_tokens=self.max_output_tokens, safety_margin_tokens=self.safety_margin_tokens)
        margin_set, output_set = self.figures_set()
        return budget_under_window(frozen, self.effective_context_window(frozen.context_window),
                                   margin_set=margin_set, output_set=output_set)

    @property
    def exceeds_server_context(self) -> bool:
        """Whether the configured window is larger than what the server keeps (the admin is warned)."""
        server = self.server_context_window
        if not server:  # unknown
            return False
        return self.context_window > server


class TokenCalibration(models.Model):
    """What a provider really counted against our estimate (CTX-25), per connection, model
    and estimator, so a new session starts calibrated instead of from nothing.

    ``ratios`` keeps the most recent provider-count / estimate samples, newest last; the
    figure every decision reads is ``context.Calibration(ratios=...).ratio``.
    """

    connection = models.ForeignKey(ModelConnection, on_delete=models.CASCADE, related_name="calibrations")
    model = models.CharField(max_length=200)
    estimator_id = models.CharField(max_length=64)
    ratios = models.JSONField(default=list)
    samples = models.PositiveIntegerField(default=0, help_text="Every sample ever recorded.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["connection", "model", "estimator_id"],
                                               name="calibration_unique_target")]


def api_key_hint(key: str) -> str:
    """A masked hint that identifies a key to its owner without revealing it."""
    if not key:
        return ""
    if len(key) <= 8:
        return "…" + key[-2:]
    return f"{key[:3]}…{key[-4:]}"


class ModelPrice(models.Model):
    """What a model's tokens cost, per million, as an admin enters it: the usage page of an
    agent version shows cost from these (tokens only for a model without a price).

    Matched to model calls by provider and model id exactly as the calls record them.
    Cached input and cache writes cost the input price unless a price of their own is set
    (OpenAI bills cache reads at a discount; Anthropic also bills cache writes higher).
    """

    provider = models.CharField(max_length=32)  # a registry name; the admin form offers the registered ones
    model = models.CharField(max_length=200, help_text="The model id the calls record, e.g. gpt-4o-mini.")
    currency = models.CharField(max_length=8, default="USD", help_text="A label shown beside the amounts.")
    input_per_million = models.DecimalField(
        "input", max_digits=12, decimal_places=6, validators=[MinValueValidator(0)],
        help_text="Price of a million uncached input tokens.")
    cached_input_per_million = models.DecimalField(
        "cached input", max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="A million input tokens read from the provider's prompt cache. Empty: the input price.")
    cache_write_per_million = models.DecimalField(
        "cache write", max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="A million input tokens written to the prompt cache (Anthropic). Empty: the input price.")
    output_per_million = models.DecimalField(
        "output", max_digits=12, decimal_places=6, validators=[MinValueValidator(0)],
        help_text="Price of a million output tokens.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model"]
        constraints = [models.UniqueConstraint(fields=["provider", "model"], name="modelprice_unique_model")]

    def __str__(self) -> str:
        return f"{provider_label(self.provider)}: {self.model}"


class ModelSlotLease(models.Model):
    """One of a model server's request slots, held by one call (CAT-11, ``models_catalog.slots``).

    ``server`` is the server's normalised base URL, so every connection to one server
    shares its slots. ``slot`` is below the server's concurrency; the unique pair is what
    makes two processes racing for the last slot get one each at most, on SQLite and
    PostgreSQL alike. A lease expires unless its holder renews it: a killed worker's slot
    frees itself.
    """

    server = models.CharField(max_length=500)
    slot = models.PositiveSmallIntegerField()
    holder = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)  # "action" or "background"
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "slot"], name="slot_lease_unique")]


class ModelSlotWaiter(models.Model):
    """A call waiting for a slot (CAT-11): action calls go before background summaries, and
    each in the order it came. Renewed while it waits; one that stops being renewed (its
    worker died) stops counting when it expires."""

    server = models.CharField(max_length=500)
    kind = models.CharField(max_length=16)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["server", "kind"], name="slot_waiter_server")]
