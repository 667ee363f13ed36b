"""Tool servers (SPEC §7a): remote MCP servers a space registers and the operator's local ones."""
