"""Tools agents can call (LOOP-4): a registry of specs and the built-in implementations."""
from agentloom.tools.registry import (
    Tool,
    ToolContext,
    ToolError,
    ToolOutcome,
    registry,
    tool_invoke,
    tool_schemas,
)

__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutcome", "registry", "tool_invoke", "tool_schemas"]

from agentloom.tools.registry import load_builtins as _load_builtins

_load_builtins()
