"""A one-site provider inventory around the node lines a provider test needs (shared by the alternative tests)."""

from __future__ import annotations

import textwrap


def one_site_inventory(nodes: str) -> str:
    """An inventory of site s1 (provider-operated, DE) with 100 TB of storage and ``nodes`` (YAML list items, at any
    indentation) as its nodes."""
    return f"""\
version: 1
provider: test
sites:
  - {{id: s1, operator: provider, jurisdiction: DE}}
nodes:
{textwrap.indent(textwrap.dedent(nodes), "  ")}
storage:
  - {{id: st, site: s1, capacity: 100 TB}}
"""
