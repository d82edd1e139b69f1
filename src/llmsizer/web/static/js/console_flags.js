// The console's list of bookings the inventory disagrees with (GET /capacity/console: `orphaned`, `maintenance`,
// the rule is provider/disagree.py's): one line per entry, in the words `capacity show` warns with. And the line the
// inventory editor's save answers with (PUT /capacity/inventory: its `warnings`). Pure: no DOM, so node tests it.

const day = (iso) => (iso ? String(iso).slice(0, 16).replace("T", " ") : "");

export function flagLines(view) {
  const out = [];
  for (const o of view.orphaned || []) {
    out.push(`node '${o.node}' holds live booking(s) ${o.reservations.join(", ")}: ${o.why}; not on the timeline `
      + "(restore the node in the inventory, or move them with `llmsizer capacity re-place`, or release them)");
  }
  for (const m of view.maintenance || []) {
    out.push(`booking ${m.reservation} (${m.job}, ${m.kind}) on node '${m.node}' runs across the provider's `
      + `maintenance window ${day(m.start)}-${day(m.end)}${m.note ? ` ${m.note}` : ""}`
      + `: ${m.why}` + (m.refused ? "; confirm and activate refuse it" : ""));
  }
  return out;
}

export function savedLine(r) {
  const head = `inventory saved: ${r.nodes} node(s), ${r.sites} site(s) (${r.before} -> ${r.after})`;
  return (r.warnings || []).length ? `${head}; warning: ${r.warnings.join("; warning: ")}` : head;
}
