"""SaslHandshake and SaslAuthenticate, as Kafka's SaslServerAuthenticator answers them (see
``sasl`` for the users, the session and what a connection may send before it authenticated)."""

from __future__ import annotations

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from .cluster_view import ServingBroker
from .protocol_codec import Request
from .sasl import (
    ILLEGAL_SASL_STATE,
    MECHANISMS,
    PLAIN,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    AuthenticationFailed,
    authenticated_user,
)

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"
"""KafkaApis' message for a SaslAuthenticate on a connection that needs no authentication."""


def sasl_handshake(broker: ServingBroker, req: Request) -> SaslHandshakeResponse:
    session = req.session
    if session.authenticated:
        # A PLAINTEXT connection, or a SASL one after its authentication (re-authentication,
        # KIP-368, is off by default): Kafka's KafkaApis refuses, and the connection goes on.
        return SaslHandshakeResponse(
            version=req.api_version, error_code=ILLEGAL_SASL_STATE, mechanisms=[]
        )
    if req.body.mechanism != PLAIN:
        req.close_after = True  # Kafka answers, then fails the authentication
        return SaslHandshakeResponse(
            version=req.api_version, error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=MECHANISMS
        )
    session.stage = "handshake" if req.api_version >= 1 else "raw"
    return SaslHandshakeResponse(version=req.api_version, error_code=0, mechanisms=MECHANISMS)


def sasl_authenticate(broker: ServingBroker, req: Request) -> SaslAuthenticateResponse:
    if req.session.authenticated:  # as for SaslHandshake: refused, the principal unchanged
        return SaslAuthenticateResponse(
            version=req.api_version,
            error_code=ILLEGAL_SASL_STATE,
            error_message=AFTER_AUTHENTICATION,
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    try:
        user = authenticated_user(broker.cluster.sasl_users, bytes(req.body.auth_bytes))
    except AuthenticationFailed as exc:
        req.close_after = True
        return SaslAuthenticateResponse(
            version=req.api_version,
            error_code=SASL_AUTHENTICATION_FAILED,
            error_message=str(exc),
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    req.session.user = user
    req.session.stage = "done"
    return SaslAuthenticateResponse(
        version=req.api_version,
        error_code=0,
        error_message=None,
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
