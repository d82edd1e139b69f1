// The model: a catalog name or Hub id typed (with the catalog models its words name as suggestions), or a dropped
// file whose header is read here (headers.js) and sent in place of a name.
//
// The suggestions are the API's answer to GET /models?query= (suggest.matches_name, the one name rule of the CLI's
// `llmsizer models QUERY` and Python's), shown as they come: not a <datalist>, which the browser filters again by
// substring ('7b' would offer gemma-2-27b; 'qwen 2.5' would hide every Qwen2.5), review36 N1.

import { debounce, get, uploadHeader } from "./api.js";
import { el, formatBytes, formatCount, formatInt } from "./format.js";
import { HeaderError, configText, ggufHeader, safetensorsHeader } from "./headers.js";

const MAX_SHOWN = 12; // suggestions listed at once (the catalog's answer may be longer: keep typing)

/**
 * Wire the model field, the catalog suggestions and the drop zone. ``onChange`` runs when the model changes;
 * ``onSettle`` when the name typed is settled (the box left, or its words name no catalog model), so that an error
 * held back while typing (``typing()``) may be shown.
 * Returns {fields(): the API's model fields, label(): a name for the CLI command and the request YAML, file,
 * typing(): whether the box has focus with a name that its suggestions may still complete}.
 */
export function modelPicker(onChange, onSettle = () => {}) {
  const input = document.getElementById("model");
  const hub = document.getElementById("hub");
  const fileInput = document.getElementById("model-file");
  const drop = document.getElementById("drop");
  const note = document.getElementById("file-note");
  const list = document.getElementById("model-options");
  let uploaded = null; // {name, fields, summary}

  let asked = 0; // suggestion queries sent: only the last one's answer is shown
  let matches = null; // the last answer's models for the text now in the box; null while it is asked
  let active = -1; // the option chosen with the arrow keys

  const exact = (v) => (matches || []).some((m) => [m.name, m.id, ...(m.aliases || [])]
    .some((n) => n.toLowerCase() === v.toLowerCase()));
  function show(models) {
    active = -1;
    input.removeAttribute("aria-activedescendant");
    const v = input.value.trim();
    const open = document.activeElement === input && models.length > 0 && !exact(v);
    list.replaceChildren(...(open ? models.slice(0, MAX_SHOWN) : []).map((m, i) => el("li", {
      role: "option", id: `model-option-${i}`, "data-value": m.name, "aria-selected": "false",
      onmousedown: (e) => { e.preventDefault(); pick(m.name); } }, `${m.name} (${formatCount(m.params)})`)));
    list.hidden = !open;
    input.setAttribute("aria-expanded", String(open));
  }
  function hide() { list.hidden = true; list.replaceChildren(); input.setAttribute("aria-expanded", "false"); }
  function pick(name) {
    input.value = name;
    hide();
    if (uploaded) clearFile();
    onChange();
  }
  const suggest = debounce(async () => {
    const v = input.value.trim();
    const mine = ++asked;
    if (!v) { matches = []; hide(); return; }
    let models = [];
    try { models = (await get(`/models?query=${encodeURIComponent(v)}`)).models; } catch { models = []; } // none match: a 400
    if (mine !== asked) return;
    matches = models;
    show(models);
    if (!models.length) onSettle(); // nothing to complete: the model's error stands
  }, 150);
  input.setAttribute("role", "combobox");
  input.setAttribute("aria-autocomplete", "list");
  input.setAttribute("aria-controls", list.id);
  input.setAttribute("aria-expanded", "false");
  input.addEventListener("input", () => { matches = null; suggest(); });
  input.addEventListener("focus", () => { if (matches && input.value.trim()) show(matches); });
  input.addEventListener("blur", () => { hide(); onSettle(); });
  input.addEventListener("keydown", (e) => {
    const items = [...list.children];
    if (e.key === "Escape") { if (!list.hidden) e.preventDefault(); hide(); return; } // closes the list only (D4)
    if (!items.length || list.hidden) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      active = (active + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
      items.forEach((o, i) => o.setAttribute("aria-selected", String(i === active)));
      input.setAttribute("aria-activedescendant", items[active].id);
    } else if (e.key === "Enter" && active >= 0) {
      e.preventDefault();
      pick(items[active].dataset.value);
    }
  });

  get("").then((info) => { // the server says whether it can reach the Hub (the hub extra)
    if (info.hub === false) {
      hub.checked = false;
      hub.disabled = true;
      hub.nextElementSibling.textContent = "the server has no Hub client (the hub extra): catalog names only";
    }
  }).catch(() => {});

  const clearFile = () => { uploaded = null; note.replaceChildren(); fileInput.value = ""; };
  input.addEventListener("input", () => { if (uploaded) clearFile(); onChange(); });
  hub.addEventListener("change", onChange);

  async function take(files) {
    files = [...files];
    if (!files.length) return;
    note.textContent = "reading the header…";
    try {
      uploaded = await readFiles(files);
      input.value = "";
      note.replaceChildren(uploaded.summary, el("button", { type: "button", id: "clear-file",
        onclick: () => { clearFile(); input.value = "llama-3.1-8b"; onChange(); } }, "use a name instead"));
      onChange();
    } catch (e) {
      uploaded = null;
      note.replaceChildren(el("span", { class: "problem", role: "alert" }, e instanceof HeaderError ? e.message : `cannot read the file: ${e.message}`));
    }
  }
  fileInput.addEventListener("change", () => take(fileInput.files));
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); take(e.dataTransfer.files); });

  return {
    fields: () => (uploaded ? uploaded.fields : { model: input.value.trim(), ...(hub.checked ? { hub: true } : {}) }),
    label: () => (uploaded ? uploaded.name : input.value.trim()),
    get file() { return uploaded; },
    // the box has focus and the name in it is not settled: its suggestions are asked, or offer more than it
    typing: () => !uploaded && document.activeElement === input && input.value.trim() !== ""
      && (matches === null || (matches.length > 0 && !exact(input.value.trim()))),
  };
}

/** The API fields for dropped files: a .gguf, or safetensors headers with their config.json, or a config.json. */
async function readFiles(files) {
  const by = (re) => files.filter((f) => re.test(f.name.toLowerCase()));
  const gguf = by(/\.gguf$/), st = by(/\.safetensors$/), cfg = by(/\.json$/);
  if (gguf.length) {
    const f = gguf[0];
    const h = await ggufHeader(f);
    const up = await uploadHeader("gguf", f.name, f.size, h.bytes);
    return { name: f.name, fields: { model_file: up.model_file },
      summary: el("span", {}, `Using ${f.name}: its ${formatBytes(h.bytes.length)} header was read and sent, `
        + `not its ${formatBytes(f.size - h.bytes.length)} of tensor data: `,
      el("b", { id: "file-bytes", "data-bytes": up.bytes }, `${formatInt(up.bytes)} bytes`), " of weights.") };
  }
  const config = cfg.length ? { config: JSON.parse(await configText(cfg[0])), config_name: cfg[0].name.replace(/\.json$/i, "") } : null;
  if (st.length) {
    if (!config) throw new HeaderError("a .safetensors file needs its config.json (the architecture): drop both together");
    const ids = [];
    let bytes = 0;
    for (const f of st) {
      const up = await uploadHeader("safetensors", f.name, f.size, (await safetensorsHeader(f)).bytes);
      ids.push(up.model_file);
      bytes += up.bytes;
    }
    return { name: cfg[0].name, fields: { ...config, model_file: ids.length === 1 ? ids[0] : ids },
      summary: el("span", {}, `Using ${cfg[0].name} and the headers of ${st.length} safetensors file(s): `,
        el("b", { id: "file-bytes", "data-bytes": bytes }, `${formatInt(bytes)} bytes`), " of weights, not read.") };
  }
  if (config) return { name: cfg[0].name, fields: config, summary: el("span", {}, `Using ${cfg[0].name}.`) };
  throw new HeaderError(`${files[0].name}: drop a config.json, a .gguf, or .safetensors file(s) with their config.json`);
}
