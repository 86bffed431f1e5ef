"""The SASL state machine on its own (no sockets): the exchanges that succeed, the order it
enforces, Kafka's error codes, and fuzzed exchanges that must end in an answer or a close,
never in an exception or an authenticated stranger."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.zk.scram_users import new_credential
from wire.api import (
    ApiVersionsRequest,
    DescribeClusterRequest,
    ProduceRequest,
    Request,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from wire.credentials import SCRAM_MECHANISMS, ScramCredential
from wire.errors import ErrorCode
from wire.sasl import PLAIN, SaslClient, SaslCredentials, SaslServer, SaslState

# As Kafka keeps them: SCRAM users in the credential store (`/config/users`), PLAIN users in
# the listener's PlainLoginModule entry; alice is both, scram-only and plain-only one each.
USERS = {
    (name, m): new_credential(m, "alice-secret") for m in SCRAM_MECHANISMS for name in ("alice", "scram-only")
}
PLAIN_USERS = {"alice": "alice-secret", "plain-only": "alice-secret"}


def lookup(username: str, mechanism: str) -> ScramCredential | None:
    return USERS.get((username, mechanism))


def server(*, tls: bool = True) -> SaslServer:
    return SaslServer([*SCRAM_MECHANISMS, PLAIN], lookup, tls=tls, plain_users=PLAIN_USERS)


def exchange(sasl: SaslServer, credentials: SaslCredentials) -> int:
    """Run a client's whole exchange against `sasl`; the last error code (0: none)."""
    client = SaslClient(credentials)
    step = sasl.receive(client.handshake())
    assert step is not None and isinstance(step.response, SaslHandshakeResponse)
    if step.response.error_code:
        return step.response.error_code
    token: bytes | None = client.first_token()
    while token is not None:
        step = sasl.receive(SaslAuthenticateRequest(auth_bytes=token))
        assert step is not None and isinstance(step.response, SaslAuthenticateResponse)
        if step.response.error_code:
            assert step.close and step.failed_authentication
            return step.response.error_code
        token = client.respond(step.response.auth_bytes)
    assert client.complete
    return 0


@pytest.mark.parametrize("mechanism", [*SCRAM_MECHANISMS, PLAIN])
def test_the_right_password_authenticates_as_the_user(mechanism: str) -> None:
    sasl = server()
    assert exchange(sasl, SaslCredentials(mechanism, "alice", "alice-secret")) == 0
    assert (sasl.state, sasl.principal) == (SaslState.COMPLETE, "User:alice")
    assert sasl.receive(ProduceRequest()) is None, "after authentication requests go to the handler"


@pytest.mark.parametrize("mechanism", [*SCRAM_MECHANISMS, PLAIN])
@pytest.mark.parametrize(("username", "password"), [("alice", "wrong"), ("mallory", "alice-secret")])
def test_a_wrong_password_or_unknown_user_fails_with_58(mechanism: str, username: str, password: str) -> None:
    sasl = server()
    assert (
        exchange(sasl, SaslCredentials(mechanism, username, password)) == ErrorCode.SASL_AUTHENTICATION_FAILED
    )
    assert (sasl.state, sasl.principal) == (SaslState.FAILED, None)


def rounds_until_refused(credentials: SaslCredentials) -> tuple[int, list[bytes]]:
    """How many SaslAuthenticate rounds a client's exchange gets through before it is refused,
    and the server's answers on the way."""
    sasl = server()
    client = SaslClient(credentials)
    sasl.receive(client.handshake())
    token: bytes | None = client.first_token()
    answers = []
    rounds = 0
    while token is not None:
        rounds += 1
        step = sasl.receive(SaslAuthenticateRequest(auth_bytes=token))
        assert step is not None and isinstance(step.response, SaslAuthenticateResponse)
        if step.response.error_code:
            return rounds, answers
        answers.append(step.response.auth_bytes)
        try:
            token = client.respond(step.response.auth_bytes)
        except Exception:  # the client's own check of a server's final message
            return rounds, answers
    return rounds, answers


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_an_unknown_scram_user_is_refused_where_a_wrong_password_is(mechanism: str) -> None:
    """RFC 5802 §5.1: a made-up salt and iteration count, the same each time for a name, so
    that the exchange fails at the client's proof for both, and which users exist is not told."""
    wrong = rounds_until_refused(SaslCredentials(mechanism, "alice", "wrong"))
    unknown = rounds_until_refused(SaslCredentials(mechanism, "mallory", "anything"))
    assert wrong[0] == unknown[0] == 2, "refused at the client's final message, not its first"
    salt_and_count = [a.decode().split(",")[1:] for a in unknown[1]]
    again = [
        a.decode().split(",")[1:] for a in rounds_until_refused(SaslCredentials(mechanism, "mallory", "x"))[1]
    ]
    assert salt_and_count == again, "the same made-up salt and iterations for the same name"
    assert salt_and_count[0][1] == wrong[1][0].decode().split(",")[2], "the iteration count of a real user"


@pytest.mark.parametrize(
    ("mechanism", "username"), [(PLAIN, "scram-only"), *((m, "plain-only") for m in SCRAM_MECHANISMS)]
)
def test_scram_and_plain_users_are_separate_as_kafkas(mechanism: str, username: str) -> None:
    """PLAIN knows only the listener's `user_<name>` entries, SCRAM only the credential store."""
    sasl = server()
    assert exchange(sasl, SaslCredentials(mechanism, username, "alice-secret")) == 58
    assert sasl.principal is None


def test_plain_is_not_offered_without_tls() -> None:
    sasl = server(tls=False)
    assert (
        exchange(sasl, SaslCredentials(PLAIN, "alice", "alice-secret"))
        == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    )
    assert sasl.mechanisms == list(SCRAM_MECHANISMS)


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones_then_closed() -> None:
    step = server().receive(SaslHandshakeRequest(mechanism="GSSAPI"))
    assert step is not None and isinstance(step.response, SaslHandshakeResponse)
    assert step.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert step.response.mechanisms == [*SCRAM_MECHANISMS, PLAIN]
    assert step.close


def test_only_api_versions_passes_before_authentication() -> None:
    sasl = server()
    assert sasl.receive(ApiVersionsRequest()) is None
    step = sasl.receive(DescribeClusterRequest())
    assert step is not None and step.response is None and step.close
    assert "DESCRIBE_CLUSTER before SASL authentication" in step.reason


def test_out_of_order_requests_are_illegal_sasl_state() -> None:
    early = server().receive(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"))
    assert early is not None and early.response is not None and early.close
    assert early.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    sasl = server()
    sasl.receive(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    again = sasl.receive(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    assert again is not None and again.response is not None and again.close
    assert again.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    done = server()
    exchange(done, SaslCredentials("SCRAM-SHA-512", "alice", "alice-secret"))
    after = done.receive(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    # After authentication Kafka answers 34 and keeps the connection.
    assert after is not None and after.response is not None and not after.close
    assert after.response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert done.principal == "User:alice"


requests = st.one_of(
    st.builds(SaslHandshakeRequest, mechanism=st.sampled_from([*SCRAM_MECHANISMS, PLAIN, "GSSAPI", ""])),
    st.builds(SaslAuthenticateRequest, auth_bytes=st.binary(max_size=200)),
    st.builds(
        SaslAuthenticateRequest,
        auth_bytes=st.sampled_from(
            [b"n,,n=alice,r=abc", b"\0alice\0wrong", b"alice\0alice\0x", b"c=biws,r=abc,p=AAAA", b"n,,"]
        ),
    ),
    st.just(ApiVersionsRequest()),
    st.just(ProduceRequest()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(requests, max_size=8))
def test_fuzzed_exchanges_answer_or_close_and_never_authenticate_a_stranger(sequence: list[Request]) -> None:
    sasl = server()
    for request in sequence:
        step = sasl.receive(request)
        if step is None:
            assert isinstance(request, ApiVersionsRequest | ProduceRequest)
            assert isinstance(request, ApiVersionsRequest) or sasl.authenticated
            continue
        if step.response is not None:
            assert step.response.error_code in (
                0,
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                ErrorCode.ILLEGAL_SASL_STATE,
            )
        if step.close:
            assert sasl.state is SaslState.FAILED
            break
    # Without alice's password no sequence of bytes gets in.
    assert sasl.principal is None


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_fuzzed_scram_messages_fail_with_58(first: bytes, final: bytes) -> None:
    sasl = server()
    sasl.receive(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    for token in (first, final):
        step = sasl.receive(SaslAuthenticateRequest(auth_bytes=token))
        assert step is not None and step.response is not None
        if step.close:
            assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            break
    assert sasl.principal is None
