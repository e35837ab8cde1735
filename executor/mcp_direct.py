"""What the direct ``tools/call`` paths share (:mod:`toolexec.mcp_http_call` over HTTP, :mod:`toolexec.mcp_stdio_call`
over stdio): which handshake-era call is plain enough to answer without the SDK's dispatcher, and the response the
SDK would write for it, made with the SDK's own pieces.

* **Plain** (:func:`plain_params`): params of nothing but ``name`` and ``arguments`` (no ``_meta``: a progress token,
  a trace context; no ``task``, ``requestState`` or ``inputResponses``), naming a served tool that does not run as a
  task (an unknown tool's error and ``describe_tool`` stay the SDK's), valid against the version's surface
  (:func:`mcp_types.methods.validate_client_request`) and the handler's params type. Anything else: None, and the
  SDK answers it (its error, when it is wrong).
* **Answered as the SDK answers** (:func:`respond`): the ONE call path (:meth:`toolexec.mcp.ToolServer.answer_call`),
  the result dumped, sieved by :func:`mcp_types.methods.serialize_server_result` and wrapped in the SDK's
  ``JSONRPCResponse``; an exception as the SDK's dispatcher maps it
  (:func:`mcp.shared.jsonrpc_dispatcher.handler_exception_to_error_data`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import methods
from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from toolexec.mcp import Requester, ToolServer

__all__ = ["METHOD", "direct_params_type", "plain_params", "respond", "respond_then"]

METHOD = "tools/call"
PLAIN_PARAMS = frozenset({"name", "arguments"})
logger = logging.getLogger("mcp.shared.jsonrpc_dispatcher")  # where the SDK logs a handler's unexpected failure
T = TypeVar("T")


def direct_params_type(server: ToolServer) -> type[BaseModel] | None:
    """The params type of the server's ``tools/call`` handler, or None when no call may go direct (no handler, or a
    cache hint on ``tools/call``, which the SDK's runner would add)."""
    entry = server.server.get_request_handler(METHOD)
    if entry is None or METHOD in server.server.cache_hints:
        return None
    return entry.params_type


def plain_params(
    server: ToolServer, params_type: type[BaseModel], params: object, version: str
) -> types.CallToolRequestParams | None:
    """``params`` of a ``tools/call`` at handshake-era ``version`` validated, when the call is plain (see the module);
    None when the SDK must answer it."""
    if not isinstance(params, dict) or not set(params) <= PLAIN_PARAMS or not isinstance(params.get("name"), str):
        return None
    listing = server.listing
    tool = listing.by_name.get(listing.map.original(params["name"]))
    if tool is None or tool.metadata.task is not None:
        return None
    try:
        methods.validate_client_request(METHOD, version, params)
        typed = params_type.model_validate(params, by_name=False)
    except (KeyError, ValueError):  # ValidationError is a ValueError: the SDK says what is wrong
        return None
    return typed if isinstance(typed, types.CallToolRequestParams) else None


async def respond(
    server: ToolServer, request_id: types.RequestId, params: types.CallToolRequestParams, version: str, requester: Requester
) -> types.JSONRPCResponse | types.JSONRPCError:
    """The JSON-RPC response to a plain call, as the SDK's runner and dispatcher make it."""
    try:
        result = await server.answer_call(params, requester)
    except Exception as error:
        return _response(request_id, version, _raising(error))
    return _response(request_id, version, lambda: result)


async def respond_then(
    server: ToolServer,
    request_id: types.RequestId,
    params: types.CallToolRequestParams,
    version: str,
    requester: Requester,
    then: Callable[[types.JSONRPCResponse | types.JSONRPCError], T],
) -> T | types.JSONRPCResponse | types.JSONRPCError:
    """:func:`respond`, the response handed to ``then`` on the call's own thread (what ``then`` returns is returned);
    a response made before the call had a thread (an exception on the way in) is returned as is."""
    try:
        return await server.answer_call_then(params, requester, lambda make: then(_response(request_id, version, make)))
    except Exception as error:
        return _response(request_id, version, _raising(error))


def _response(
    request_id: types.RequestId, version: str, make: Callable[[], types.CallToolResult | types.InputRequiredResult]
) -> types.JSONRPCResponse | types.JSONRPCError:
    """The response to the call whose result ``make`` returns (or whose failure it raises), as the SDK makes it."""
    try:
        result = make()
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            shaped = methods.serialize_server_result(METHOD, version, dumped)
        except ValidationError:
            logger.exception("handler for %r returned an invalid result", METHOD)
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None
        return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=shaped)
    except Exception as error:
        found = handler_exception_to_error_data(error)
        if found is None:
            logger.exception("handler for %r raised", METHOD)
            found = types.ErrorData(code=0, message=str(error))
        return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=found)


def _raising(error: Exception) -> Callable[[], NoReturn]:
    def make() -> NoReturn:
        raise error

    return make
