// The web error renderer: the one place a form turns the API's 400 (the CLI's one-line message and the field at
// fault, web/problems.py) into a message at that field. The message keeps the CLI's text; only the flags the form
// has a control for are named by the control's label, the flag kept after it ("argument --context: ..." or the
// API's "field 'context': ..." -> "Context (--context): ..."), and the CLI's "(see --help)" is left out (the field's own hint is beside it).

/** The CLI's message as the form says it. ``labels``: flag -> the label of the form control that gives it;
 * ``fieldFlag``: the flag of the control the API's ``field`` names (controlOf), when the form's name for it is not
 * its flag's (the serving tab's tensor_parallel is --tp). */
export function formMessage(detail, labels, fieldFlag = null) {
  const named = (flag) => (labels[flag] ? `${labels[flag]} (${flag})` : flag);
  return String(detail)
    .replace(/\s*\(see --help\)/g, "")
    // argparse's "argument --tp/--tensor-parallel:" names the option by all its spellings: the first one the form knows
    .replace(/\bargument ((?:-{1,2}[\w-]+)(?:\/-{1,2}[\w-]+)*):/g, (all, flags) => {
      const known = flags.split("/").find((f) => labels[f]);
      return known ? `${named(known)}:` : all;
    })
    // the API's where-prefix names the body field ("field 'context': ...", web/problems.py web_detail): its control
    .replace(/^field '(\w+)':/, (all, field) => {
      const flag = labels[fieldFlag] ? fieldFlag : `--${field.replaceAll("_", "-")}`;
      return labels[flag] ? `${named(flag)}:` : all;
    })
    .replace(/(^|[^\w(/-])(--[a-z][\w-]*)/g, (all, before, flag) => (labels[flag] ? `${before}${named(flag)}` : all));
}

/** The form control the API's ``field`` names: one of ``names`` (the controls the form sends now), the API field
 * under the form's own name (``aliases``: API field -> form name), or the control whose flag is the field's
 * (``--tp`` names the serving tab's tensor_parallel); null when the form has none (the input as a whole). */
export function controlOf(field, names, aliases, flags) {
  if (!field) return null;
  const own = aliases[field];
  if (own && names.includes(own)) return own;
  if (names.includes(field)) return field;
  const flag = `--${field.replaceAll("_", "-")}`;
  return names.find((n) => flags[n] === flag) || null;
}

const ERROR = "field-error";

/** Show ``message`` at ``control`` (after its hint, in its .field): described by it (aria-describedby), marked
 * aria-invalid, scrolled into view; focused when the focus is not already in its form (a link opened with a bad
 * value), never taken from a field being typed in. */
export function showAtField(control, message) {
  const box = control.closest(".field") || control.parentElement;
  const id = `${control.id}-error`;
  const span = document.createElement("span");
  span.className = `hint ${ERROR}`;
  span.id = id;
  span.textContent = message;
  box.append(span);
  const described = (control.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  control.dataset.describedby = described.join(" ");
  control.setAttribute("aria-describedby", [...described, id].join(" "));
  control.setAttribute("aria-invalid", "true");
  span.scrollIntoView({ block: "nearest" });
  if (!control.form?.contains(document.activeElement)) control.focus({ preventScroll: true });
}

/** Mark ``control`` as at fault with the message shown at another control (``id``: that message's element): a
 * cross-field error (gpus vs tp x pp x context_parallel) marks every field it names, each described by the one
 * message. */
export function markAlso(control, id) {
  const described = (control.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  control.dataset.describedby = described.join(" ");
  control.setAttribute("aria-describedby", [...described, id].join(" "));
  control.setAttribute("aria-invalid", "true");
}

/** Take every message shown at a field of ``form`` away, and the marks with them. */
export function clearAtFields(form) {
  for (const s of form.querySelectorAll(`.${ERROR}`)) s.remove();
  for (const c of form.querySelectorAll("[aria-invalid]")) {
    c.removeAttribute("aria-invalid");
    if (c.dataset.describedby === undefined) continue;
    if (c.dataset.describedby) c.setAttribute("aria-describedby", c.dataset.describedby);
    else c.removeAttribute("aria-describedby");
    delete c.dataset.describedby;
  }
}

/** A page's 400 (``e``, an ApiError or an Error; null: none): the API's line (the CLI's) in the page's #problem box
 * above its #results, which are marked stale (they answer the previous input), and the message at the control
 * ``at(e)`` names as ``[control, message]`` (null, or a control with no id: the box alone), or ``[control, message,
 * others]`` where the error names other fields too (the API's ``also``: each marked aria-invalid, markAlso). The calculator and the
 * compare page both show their 400s this way; each says which control its form has for the API's ``field``. */
export function showProblem(form, e, at = () => null) {
  const p = document.getElementById("problem");
  document.getElementById("results").classList.toggle("stale", Boolean(e));
  clearAtFields(form);
  if (!e) { p.hidden = true; p.textContent = ""; return; }
  p.hidden = false;
  p.textContent = e.message;
  const [control, message, others = []] = at(e) || [];
  if (!control || !control.id) return;
  showAtField(control, message);
  for (const c of others) if (c && c !== control) markAlso(c, `${control.id}-error`); // the error's other fields
}
