"""A tool's questions (:mod:`toolexec.asking`) over MCP, in both protocol eras.

* 2026-07-28 (multi-round-trip requests): a call whose tool asks returns an ``input_required`` result whose
  ``inputRequests`` hold one form elicitation; the client retries ``tools/call`` with ``inputResponses`` and the
  ``requestState`` it was given, and the tool runs again with the answers. Nothing is kept between rounds: the
  state carries the call id, the answers so far and the question asked, sealed (AES-256-GCM) by the SDK's
  :class:`~mcp.server.request_state.RequestStateBoundary` and bound to the tool, its arguments, the client's
  OAuth principal (when there is one) and an expiry. A state the server did not mint, or minted for another call, is refused; so is an
  answer to a question that was not asked. Replicas sharing ``mcp.state_key_env``'s key accept each other's.
* Handshake era: the server sends ``elicitation/create`` while the call is in flight (the slot given up while
  the user answers) and runs the tool again with the answer.
* A client that declared no form elicitation (or a connection with no way back, such as stateless HTTP in the
  handshake era) gets the tool as it ran before: ``LLM_INPUT_REQUEST`` is not set, nobody is asked.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolexec.asking import check_response
from toolexec.config import Config
from toolexec.errors import BadRequest, ToolexecError
from toolexec.records import InputRequest, InputResponse, ToolCall, ToolResult
from toolexec.recordtype import replace
from toolexec.runtimes.process import CallControl

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from toolexec.asking import Asker

    # Made per call: given the call's control, the call path's answerer (toolexec.calls.Calls.execute's ``ask``).
    Answerer: TypeAlias = Callable[[CallControl], Asker]

__all__ = ["STATE_TTL_SECONDS", "answerer", "input_required", "resumed", "state_boundary"]

# How long a client has to answer a question (a person reading it) before the requestState expires.
STATE_TTL_SECONDS = 3600.0
_STATE_VERSION = 1


def state_boundary(config: Config) -> RequestStateBoundary:
    """The middleware sealing and verifying ``requestState``: under the key in ``mcp.state_key_env`` (read once and
    removed from the environment, so no tool inherits it), else a key of this process alone."""
    name = config.mcp.state_key_env
    if name is None:
        security = RequestStateSecurity.ephemeral(ttl=STATE_TTL_SECONDS)
    else:
        key = os.environ.pop(name, "")
        if len(key.encode()) < 32:
            raise BadRequest(
                f"mcp.state_key_env names {name}, which must hold a secret of at least 32 bytes "
                f"(it holds {len(key.encode())}): generate one with `openssl rand -hex 32`"
            )
        security = RequestStateSecurity(keys=[key], ttl=STATE_TTL_SECONDS)
    return RequestStateBoundary(security, default_audience="toolexec")


def can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared form elicitation (an empty ``elicitation`` capability means form, as before
    URL mode existed)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def resumed(call: ToolCall, params: types.CallToolRequestParams) -> ToolCall:
    """``call`` with the answers a 2026-07-28 retry carries (the sealed state's and the new ``inputResponses``),
    checked against the question the state says was asked; -32602 for answers without a state or to another
    question."""
    if params.request_state is None:
        if params.input_responses:
            raise MCPError(
                types.INVALID_PARAMS,
                "inputResponses without the requestState of the input_required result they answer: send both back as they came",
            )
        return call
    try:
        state = json.loads(params.request_state)  # verified and unsealed by the boundary: one this server minted
        asked = InputRequest(**state["asked"])
        answers = {key: InputResponse(**answer) for key, answer in state["answers"].items()}
        call_id = state["call_id"]
    except (ValueError, TypeError, KeyError, AttributeError):
        raise MCPError(types.INVALID_PARAMS, "Invalid or expired requestState") from None
    given = params.input_responses or {}
    if set(given) != {asked.key}:
        raise MCPError(
            types.INVALID_PARAMS,
            f"inputResponses must answer the question asked, {asked.key!r}, and nothing else; got {sorted(given)!r}",
        )
    answer = given[asked.key]
    if not isinstance(answer, types.ElicitResult):
        raise MCPError(types.INVALID_PARAMS, f"the answer to {asked.key!r} must be an elicitation result")
    try:
        answers[asked.key] = check_response(asked, answer.model_dump(mode="json", exclude_none=True))
    except ToolexecError as error:
        raise MCPError(types.INVALID_PARAMS, str(error)) from None
    return replace(call, call_id=call_id, input_responses=answers)


def input_required(result: ToolResult, call: ToolCall) -> types.InputRequiredResult:
    """The 2026-07-28 answer to a call whose tool asked: its question as a form elicitation, and the state
    (sealed by the boundary on its way out) to resume from."""
    asked = result.input_request
    assert asked is not None
    state = {
        "v": _STATE_VERSION,
        "call_id": result.tool_call_id,
        "asked": asked.to_dict(),
        "answers": {key: answer.to_dict() for key, answer in (call.input_responses or {}).items()},
    }
    elicit = types.ElicitRequest(params=types.ElicitRequestFormParams(message=asked.message, requested_schema=asked.schema))
    return types.InputRequiredResult(input_requests={asked.key: elicit}, request_state=json.dumps(state))


def answerer(ctx: ServerRequestContext[Any, Any]) -> Answerer | None:
    """How this request's client answers a tool's questions: handed back (2026-07-28: an ``input_required``
    result), asked over the connection (handshake era), or not at all (None: the tool is told nobody can be asked)."""
    if not can_elicit(ctx):
        return None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return lambda control: _hand_back
    if not ctx.session.can_send_request:
        return None
    return lambda control: _elicitor(ctx, control)


def _hand_back(request: InputRequest) -> None:
    return None


def _elicitor(ctx: ServerRequestContext[Any, Any], control: CallControl) -> Asker:
    """Asks over the handshake-era connection, from the call's thread; a cancelled call stops waiting."""

    async def elicit(request: InputRequest) -> dict[str, Any] | None:
        answer: types.ElicitResult | None = None
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                while not control.cancelled:
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()

            group.start_soon(watch)
            answer = await ctx.session.elicit_form(request.message, request.schema, related_request_id=ctx.request_id)
            group.cancel_scope.cancel()
        return None if answer is None else answer.model_dump(mode="json", exclude_none=True)

    def ask(request: InputRequest) -> dict[str, Any] | None:
        return anyio.from_thread.run(elicit, request)

    return ask


def with_answerer(ask: Answerer | None, control: CallControl) -> Asker | None:
    """The call path's answerer for a call under ``control``."""
    return None if ask is None else ask(control)
