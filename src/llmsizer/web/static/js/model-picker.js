// The model: a catalog name or Hub id typed (with the catalog as suggestions), or a dropped file whose header
// is read here (headers.js) and sent in place of a name.

import { get, uploadHeader } from "./api.js";
import { el, formatBytes, formatCount, formatInt } from "./format.js";
import { HeaderError, configText, ggufHeader, safetensorsHeader } from "./headers.js";

/**
 * Wire the model field, the catalog suggestions and the drop zone. ``onChange`` runs when the model changes.
 * Returns {fields(): the API's model fields, label(): a name for the CLI command and the request YAML, file}.
 */
export function modelPicker(onChange) {
  const input = document.getElementById("model");
  const hub = document.getElementById("hub");
  const fileInput = document.getElementById("model-file");
  const drop = document.getElementById("drop");
  const note = document.getElementById("file-note");
  const list = document.getElementById("model-options");
  let uploaded = null; // {name, fields, summary}

  get("/models").then((models) => {
    list.replaceChildren(...models.map((m) => el("option", { value: m.id }, `${m.name} (${formatCount(m.params)})`)));
  }).catch(() => {});

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
