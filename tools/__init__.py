"""The built-in tools (LOOP-4) and how a tool is run.

Importing this package registers the built-ins in the agents' tool registry
(``agents.tool_registry``); the run loop's app does so at start-up.
"""
from agents.tool_registry import Tool, ToolContext, ToolError, ToolOutcome, registry, tool_schemas
from tools import (  # noqa: F401  (register)
    calculator,
    clock,
    delegate,
    http_fetch,
    memory,
    plan,
    read_file,
    read_record,
)
from tools.invoke import tool_invoke

__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutcome", "registry", "tool_invoke", "tool_schemas"]
