"""Signs and verifies Agent Cards with the official a2a-sdk (a2a.utils.signing),
for crates/heddle-signing/tests/python_sdk.rs.

    card_signing.py sign ALG KID KEYFILE   < card.json   → the signed card, as served
    card_signing.py verify ALG JWK_JSON    < card.json   → "verified", or exit 1
    card_signing.py resolve ALG BASE_URL                 → "verified NAME", or exit 1
                    (A2ACardResolver with the SDK's verifier; the key comes
                    from the signature's `jku`)

KEYFILE is a JWK (`oct`, for HS*) or a PEM private key. The card goes the
SDK's own ways: a server signs the AgentCard model and serves
`agent_card_to_dict` (v1.0 JSON plus the v0.3 members when the card has a 0.3
interface); a client reads with `parse_agent_card`, then verifies.
"""

import asyncio
import json
import sys

import httpx

from google.protobuf.json_format import ParseDict
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCard
from a2a.utils.signing import (
    SignatureVerificationError,
    create_agent_card_signer,
    create_signature_verifier,
)


def read_card() -> AgentCard:
    return ParseDict(json.load(sys.stdin), AgentCard())


def read_served_card() -> AgentCard:
    return parse_agent_card(json.load(sys.stdin))


def sign(alg: str, kid: str, key_file: str) -> None:
    text = open(key_file, encoding="utf-8").read()
    key = PyJWK(json.loads(text)) if text.lstrip().startswith("{") else text
    signer = create_agent_card_signer(key, {"alg": alg, "kid": kid, "typ": "JOSE"})
    card = signer(read_card())
    json.dump(agent_card_to_dict(card), sys.stdout)


def verify(alg: str, jwk_json: str) -> int:
    jwk = json.loads(jwk_json)

    def key_provider(kid, _jku):
        if kid != jwk.get("kid"):
            raise PyJWKError(f"no key with kid {kid!r}")
        return PyJWK(jwk)

    verifier = create_signature_verifier(key_provider, [alg])
    try:
        verifier(read_served_card())
    except SignatureVerificationError as e:
        print(f"not verified: {e!r}")
        return 1
    print("verified")
    return 0


def jku_key_provider(kid, jku):
    if not jku:
        raise PyJWKError("no jku")
    for jwk in httpx.get(jku).json()["keys"]:
        if jwk.get("kid") == kid:
            return PyJWK(jwk)
    raise PyJWKError(f"no key {kid!r} at {jku}")


async def resolve(alg: str, base_url: str) -> int:
    verifier = create_signature_verifier(jku_key_provider, [alg])
    async with httpx.AsyncClient() as client:
        try:
            card = await A2ACardResolver(client, base_url).get_agent_card(
                signature_verifier=verifier
            )
        except SignatureVerificationError as e:
            print(f"not verified: {e!r}")
            return 1
    print(f"verified {card.name}")
    return 0


def main() -> int:
    mode, alg = sys.argv[1], sys.argv[2]
    if mode == "sign":
        sign(alg, sys.argv[3], sys.argv[4])
        return 0
    if mode == "verify":
        return verify(alg, sys.argv[3])
    if mode == "resolve":
        return asyncio.run(resolve(alg, sys.argv[3]))
    print(f"unknown mode {mode}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
