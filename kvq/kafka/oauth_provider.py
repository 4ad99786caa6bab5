"""kafka-python's OAUTHBEARER token provider for kvq's client-credentials login
(`kvq.kafka.oauth` has the login itself).

Apart from `kvq.kafka.oauth` because kafka-python's package imports its whole client (about
0.4 s): reading and checking settings (`--check-config`, `--help`) never needs it, only a session
that connects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from kafka.net.sasl.oauth import AbstractTokenProvider

from kvq.kafka.oauth import (
    REFRESH_AT,
    OAuthTokenError,
    OidcClient,
    Token,
    fetch_token,
    oidc_client,
)

log = logging.getLogger("kvq.kafka.oauth")
"""The login's logger: its records are those of `kvq.kafka.oauth`."""


class ClientCredentialsTokenProvider(AbstractTokenProvider):
    """kafka-python's `sasl_oauth_token_provider`: a token from the client-credentials grant,
    kept and replaced when 80 % of its lifetime has passed.

    kafka-python asks for a token at every SASL authentication (a new connection, a
    re-authentication when the broker's connections.max.reauth.ms says so). When a new token
    cannot be had but the one kept is still valid, that one is used and the failure logged.
    """

    def __init__(self, client: OidcClient, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Token | None = None
        self.last_error: str | None = None
        """Why the last token request failed, None once one succeeds: what a failed connection
        is reported with (kafka-python only says it could not bootstrap)."""

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            kept = self._token
            if kept is not None and now < kept.refresh_at:
                return kept.value
            try:
                fresh = fetch_token(self.client, self._clock)
            except OAuthTokenError as exc:
                self.last_error = str(exc)
                if kept is not None and now < kept.expires_at:
                    log.warning("%s; using the current token until it expires", exc)
                    return kept.value
                raise
            self._token = fresh
            self.last_error = None
            log.info(
                "OAUTHBEARER token for client %r, valid %.0f s (replaced after %.0f s)",
                self.client.client_id,
                fresh.lifetime,
                REFRESH_AT * fresh.lifetime,
            )
            return fresh.value


def token_provider(settings: Mapping[str, str]) -> ClientCredentialsTokenProvider:
    """kafka-python's token provider for translated (librdkafka-named) settings."""
    return ClientCredentialsTokenProvider(oidc_client(settings))
