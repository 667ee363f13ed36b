"""List the operator's tool servers now (TOOL-2): what a worker does when it starts.

Each server of ``AGENTLOOM_MCP_SERVERS`` is started over stdio, asked for every page of its
tools and stopped; the listing is kept for the console, the API and publishing. The
operator runs it after editing the file, instead of restarting the workers.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from toolservers.selectors import operator_servers
from toolservers.services import operator_servers_sync


class Command(BaseCommand):
    help = "Start each server of AGENTLOOM_MCP_SERVERS, list its tools and keep the listing."

    def add_arguments(self, parser) -> None:
        parser.add_argument("names", nargs="*", help="Only these servers (default: all).")

    def handle(self, *args, **options) -> None:
        names = options["names"] or None
        unknown = sorted(set(names or []) - set(operator_servers()))
        if unknown:
            raise CommandError(f"not in AGENTLOOM_MCP_SERVERS: {', '.join(unknown)}")
        if not operator_servers():
            self.stdout.write("AGENTLOOM_MCP_SERVERS names no server.")
            return
        failed = 0
        for name, outcome in operator_servers_sync(names=names).items():
            self.stdout.write(f"{name}: {'listed' if outcome == 'ok' else outcome}")
            failed += outcome != "ok"
        if failed:
            raise CommandError(f"{failed} server(s) could not be listed")
