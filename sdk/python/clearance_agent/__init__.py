"""clearance_agent: the Python agent SDK of Clearance.

* keys: AgentKey (Ed25519, kid = RFC 7638 thumbprint, PEM/JWK export);
* intents: new_intent, sign_intent (RFC 8785 payload, compact JWS);
* Client: the agent's HTTP routes, problem+json as ProblemError;
* Agent.run_guarded: sign → enforce-and-bind → claim → run → finalize;
* verify_attestation: offline check of a claim attestation (downstream);
* verify_webhook: X-Clearance-Signature of a webhook delivery.

Only the standard library and ``cryptography``.
"""

from .attestation import AUD_ATTESTATION, TYP_ATTESTATION, verify_attestation
from .client import Client, Response
from .errors import (
    AttestationError,
    ClearanceError,
    FinalizeError,
    OutcomeUnknown,
    ProblemError,
    TransportError,
    WebhookSignatureError,
)
from .guarded import COMMITTED, FAILED, INDETERMINATE, Agent, Execution, GuardedResult
from .intent import TYP_INTENT, digest, intent_hash, new_intent, sign_compact, sign_intent
from .jcs import canonicalize, format_number
from .keys import AgentKey, thumbprint
from .webhook import DEFAULT_TOLERANCE, SIGNATURE_HEADER, sign_webhook, verify_webhook

__version__ = "0.1.0"

__all__ = [
    "AUD_ATTESTATION",
    "COMMITTED",
    "DEFAULT_TOLERANCE",
    "FAILED",
    "INDETERMINATE",
    "SIGNATURE_HEADER",
    "TYP_ATTESTATION",
    "TYP_INTENT",
    "Agent",
    "AgentKey",
    "AttestationError",
    "ClearanceError",
    "Client",
    "Execution",
    "FinalizeError",
    "GuardedResult",
    "OutcomeUnknown",
    "ProblemError",
    "Response",
    "TransportError",
    "WebhookSignatureError",
    "canonicalize",
    "digest",
    "format_number",
    "intent_hash",
    "new_intent",
    "sign_compact",
    "sign_intent",
    "thumbprint",
    "verify_attestation",
    "verify_webhook",
]
