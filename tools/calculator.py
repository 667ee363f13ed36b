"""``calculator``: arithmetic through a small recursive-descent parser (no eval, no ast).

Grammar: expr := term (('+'|'-') term)*; term := power (('*'|'/'|'//'|'%') power)*;
power := unary ('^'|'**' power)?; unary := ('-'|'+') unary | call | number | '(' expr ')'.
Bounds on length, exponent and result size keep a hostile expression from hogging a worker.
"""
from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable

from agents.tool_registry import Tool, ToolError, register

MAX_EXPRESSION = 500
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"  # a number
                    r"|(\*\*|//|[-+*/%^(),])|([A-Za-z_]+))")  # an operator, a function name
_FUNCTIONS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "floor": math.floor, "ceil": math.ceil, "log": math.log,
    "log10": math.log10, "sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp}
_PRODUCTS = {"*": operator.mul, "/": operator.truediv, "//": operator.floordiv, "%": operator.mod}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _tokens(text: str) -> list[str]:
    out, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise ToolError(f"Unexpected character at position {position + 1}: {text[position]!r}.")
        out.append(next(group for group in match.groups() if group is not None))
        position = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.index = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ToolError(f"Expected {expected or 'more input'} at the end of the expression.")
        self.index += 1
        return token

    def expr(self) -> float:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = _check(value + self.term() if self.take() == "+" else value - self.term())
        return value

    def term(self) -> float:
        value = self.power()
        while self.peek() in ("*", "/", "//", "%"):
            op, right = self.take(), self.power()
            if op != "*" and right == 0:
                raise ToolError("Division by zero.")
            value = _check(_PRODUCTS[op](value, right))
        return value

    def power(self) -> float:
        base = self.unary()
        if self.peek() in ("^", "**"):
            self.take()
            exponent = self.power()
            if abs(exponent) > MAX_EXPONENT:
                raise ToolError(f"Exponents are limited to ±{MAX_EXPONENT}.")
            try:
                return _check(base ** exponent)
            except OverflowError:
                raise ToolError("The result is too large.") from None
        return base

    def unary(self) -> float:
        token = self.peek()
        if token in ("-", "+"):
            self.take()
            value = self.unary()
            return -value if token == "-" else value
        if token == "(":
            self.take()
            value = self.expr()
            self.take(")")
            return value
        if token is not None and token[0].isalpha():
            self.take()
            if token in _CONSTANTS:
                return _CONSTANTS[token]
            if token not in _FUNCTIONS:
                raise ToolError(f"Unknown name {token!r}.")
            self.take("(")
            argument = self.expr()
            self.take(")")
            try:
                return _check(_FUNCTIONS[token](argument))
            except (ValueError, OverflowError):
                raise ToolError(f"{token}({argument:g}) is not defined.") from None
        if token is None:
            raise ToolError("The expression ended too early.")
        self.take()
        try:
            return float(token) if any(c in token for c in ".eE") else int(token)
        except ValueError:
            raise ToolError(f"{token!r} is not a number.") from None


def _check(value: float) -> float:
    if isinstance(value, complex) or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        raise ToolError("The result is not a real number.")
    if abs(value) > MAX_MAGNITUDE:
        raise ToolError("The result is too large.")
    return value


def evaluate(expression: str) -> float:
    """Evaluate an arithmetic expression; ToolError with a readable reason otherwise."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolError(f"Expressions are limited to {MAX_EXPRESSION} characters.")
    parser = _Parser(_tokens(expression))
    if parser.peek() is None:
        raise ToolError("The expression is empty.")
    value = parser.expr()
    if parser.peek() is not None:
        raise ToolError(f"Unexpected {parser.peek()!r} in the expression.")
    return value


def _format(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _run(arguments: dict, context) -> str:
    expression = arguments["expression"]
    return f"{expression} = {_format(evaluate(expression))}"


calculator = register(Tool(
    name="calculator",
    description="Evaluate an arithmetic expression: + - * / // % ^, parentheses, sqrt, log, sin, pi, e.",
    parameters={"type": "object", "properties": {"expression": {"type": "string", "description": "e.g. (17*23)+4"}},
                "required": ["expression"], "additionalProperties": False},
    run=_run,
    idempotent=True,
    read_only=True,
    timeout_seconds=5,
))
