// The console's words that come from the server, rendered verbatim (the JS words nothing itself): the list of
// bookings the inventory disagrees with (GET /capacity/console: `flags`, the warnings `capacity show` prints, from
// provider/disagree.py disagreement_warnings), each booking's plan (`figures_text`, provider/store.py
// with_figures, as `capacity show` prints it) and the line the inventory editor's save answers with
// (PUT /capacity/inventory: its `warnings`). Pure: no DOM, so node tests it.

export function flagLines(view) {
  return [...(view.flags || [])];
}

export function planned(r) {
  return r.figures_text || "-";
}

export function savedLine(r) {
  const head = `inventory saved: ${r.nodes} node(s), ${r.sites} site(s) (${r.before} -> ${r.after})`;
  return (r.warnings || []).length ? `${head}; warning: ${r.warnings.join("; warning: ")}` : head;
}
