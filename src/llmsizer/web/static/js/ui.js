// Shared page pieces: closed sets of choices and their defaults (from /pages/choices.json, which reads them from
// the specs' dataclasses and tuples: one home), and keyboard-operable tabs (WAI-ARIA tabs pattern).

import { el } from "./format.js";

/**
 * Fill every <select data-choices="KEY"> with choices[KEY] (each option's text choices[KEY_labels][value] where
 * given, e.g. a framework profile's pinned version); name each default (a select's empty option, an
 * input's placeholder) from defaults[field], so the page states the defaults the estimator applies.
 */
export function fillChoices(form, { choices, defaults }) {
  for (const sel of form.querySelectorAll("select[data-choices]")) {
    const labels = choices[`${sel.dataset.choices}_labels`] || {}; // an option's text where it says more
    for (const v of choices[sel.dataset.choices] || []) sel.append(el("option", { value: v }, labels[v] || v));
  }
  for (const c of form.querySelectorAll("input[name], select[name]")) {
    const d = defaults[c.name];
    if (d === undefined || d === null) continue;
    if (c.tagName === "SELECT" && c.options[0]?.value === "") c.options[0].textContent = `default (${d})`;
    else if (c.tagName === "INPUT" && c.type !== "checkbox") c.placeholder = `default ${d}`;
  }
  const fmts = document.getElementById("format-options");
  if (fmts) fmts.replaceChildren(...(choices.weight_formats || []).map((v) => el("option", { value: v })));
}

/**
 * Tabs: click or Arrow/Home/End keys move between them (roving tabindex); ``onSelect(name)`` gets the tab's
 * name (its id without "tab-").
 */
export function setupTabs(list, onSelect) {
  const tabs = [...list.querySelectorAll("[role=tab]")];
  const select = (name, notify = true) => {
    for (const t of tabs) {
      const on = t.id === `tab-${name}`;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (notify) onSelect(name);
  };
  list.addEventListener("click", (e) => {
    const t = e.target.closest("[role=tab]");
    if (t) select(t.id.slice(4));
  });
  list.addEventListener("keydown", (e) => {
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    const j = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (j === undefined) return;
    e.preventDefault();
    const t = tabs[(j + tabs.length) % tabs.length];
    t.focus();
    select(t.id.slice(4));
  });
  return { select };
}

/**
 * A "copy as CLI command" button: the command is written into ``status`` (and its data-command) before the
 * clipboard answers, so it is on the page even where the clipboard is refused; then copied.
 */
export function copyButton(button, status, command) {
  button.addEventListener("click", async () => {
    const text = command();
    if (!text) { delete status.dataset.command; status.textContent = NO_MODEL; return; } // no model: no command
    status.dataset.command = text;
    status.textContent = text;
    try { await navigator.clipboard.writeText(text); status.textContent = `copied: ${text}`; } catch { /* shown to copy by hand */ }
  });
}

const NO_MODEL = "give a model first: the command names one";

/** With no model (an empty box, no file) there is no command and no request to copy or download (a placeholder
 * such as MODEL is no model: the CLI answers it "unknown model"): the buttons are disabled and the status says so. */
export function needsModel(named, status, ...buttons) {
  for (const b of buttons) { b.disabled = !named; b.title = named ? "" : NO_MODEL; }
  if (!named) { delete status.dataset.command; status.textContent = NO_MODEL; }
  else if (status.textContent === NO_MODEL) status.textContent = "";
}
