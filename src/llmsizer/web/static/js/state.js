// Page state <-> URL (a link reproduces the page), and the same state as a CLI command or a request YAML.

export const INFER_FIELDS = ["engine", "engine_version", "weights", "context", "concurrency", "output_tokens", "kv_dtype", "device"];
export const TRAIN_FIELDS = ["method", "rank", "optimizer", "precision", "tf32", "micro_batch", "seq_len", "grad_accumulation",
  "grad_checkpointing", "train_attention", "framework", "gpus", "zero", "fsdp", "tp", "pp", "offload", "gpus_per_node", "network", "grad_sync",
  "train_device", "count", "tokens"];
export const COMMON_FIELDS = ["model", "memory", "headroom"];
// images and video in each prompt (infer --images ...): offered only for a model with a vision encoder
export const MEDIA_FIELDS = ["images", "image_size", "video_frames", "video_size", "pan_and_scan"];

// API field -> CLI flag where the flag's name differs from the field's (workload_args.py: dest=...)
// (train_device: the training tab's catalog device, `train --device`; the inference tab's device is gpu/cpu;
// train_attention: the training tab's attention, `train --attention`, whose list has flex where serving's has not)
const FLAG = { micro_batch: "--batch", seq_len: "--seq", train_device: "--device", train_attention: "--attention",
  infer_gpus: "--gpus", tensor_parallel: "--tp", pipeline_parallel: "--pp", data_parallel: "--dp",
  expert_parallel: "--enable-expert-parallel" };

// the training tab's fields named apart from the serving tab's (one form holds both), with the API field of each
const TRAIN_AS = { train_device: "device", train_attention: "attention" };
// the serving tab's fields named apart from the training tab's: llama.cpp's GPU count (web/pages.py SERVE_FORM_NAME)
const SERVE_AS = { infer_gpus: "gpus" };

/** Per tab: the API field -> the form's control for it (an API 400's ``field``, problems.js controlOf). */
export const FORM_NAMES = {
  train: Object.fromEntries(Object.entries(TRAIN_AS).map(([k, v]) => [v, k])),
  infer: Object.fromEntries(Object.entries(SERVE_AS).map(([k, v]) => [v, k])),
};

/** The form's fields as the API names them (the training tab's device is the API's ``device``, its attention
 * ``attention``; the serving tab's llama.cpp GPU count ``gpus``); ``flags``: the flag of a control named by its dest
 * (the Engine settings' ``data-flag``), whose field the API takes by the flag's name, as it takes every option
 * (web/bridge.py): ``n_ubatch`` is ``ubatch`` (--ubatch), ``paged_block_size`` is ``block_size`` (--block-size). */
export function apiFields(fields, flags = {}) {
  const out = { ...fields };
  for (const [k, api] of Object.entries({ ...TRAIN_AS, ...SERVE_AS })) if (k in out) { out[api] = out[k]; delete out[k]; }
  for (const [k, flag] of Object.entries(flags)) {
    const api = flag.slice(2).replaceAll("-", "_");
    if (k in out && api !== k) { out[api] = out[k]; delete out[k]; }
  }
  return out;
}

export function flagOf(field) { return FLAG[field] || `--${field.replaceAll("_", "-")}`; }

/** The named form controls' values, empty ones left out; checkboxes as true. */
export function formValues(form, names) {
  const out = {};
  for (const name of names) {
    const c = form.elements.namedItem(name);
    if (!c) continue;
    if (c.type === "checkbox") { if (c.checked) out[name] = true; } else if (c.value.trim() !== "") out[name] = c.value.trim();
  }
  return out;
}

/** Write the state to the URL (replaceState: typing does not fill the history). */
export function saveToUrl(state) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state)) if (v !== undefined && v !== "") q.set(k, v === true ? "1" : v);
  const url = `${location.pathname}?${q}`;
  if (url !== location.pathname + location.search) history.replaceState(null, "", url);
}

/** Put the URL's state into the form: with any parameter, the URL states every field (absent = empty). */
export function loadFromUrl(form, names) {
  const q = new URLSearchParams(location.search);
  if (![...q.keys()].length) return null;
  for (const name of names) {
    const c = form.elements.namedItem(name);
    if (!c) continue;
    if (c.type === "checkbox") c.checked = q.get(name) === "1";
    else c.value = q.get(name) ?? "";
  }
  return q;
}

function shq(v) { return /^[\w@%+=:,./-]+$/.test(v) ? v : `'${String(v).replaceAll("'", "'\\''")}'`; }

/** The CLI command that prints the same answer; ``flags``: the flag of a field whose flag is not its name's (the
 * Engine settings section's ``data-flag``, from the CLI's parser); false: the flag's ``--no-`` form. */
export function cliCommand(command, model, fields, switches, flags = {}) {
  const parts = ["llmsizer", command, shq(model)];
  for (const [k, v] of Object.entries(fields)) {
    if (k === "model") continue;
    const flag = flags[k] || flagOf(k);
    if (v === true) parts.push(flag); else if (v === false) parts.push(`--no-${flag.slice(2)}`); else parts.push(flag, shq(v));
  }
  return parts.concat(switches).join(" ");
}

function yq(v) { return /^[\w.@/-]+$/.test(v) && !/^(true|false|null|yes|no|on|off|~)$/i.test(v) ? v : JSON.stringify(String(v)); }

/**
 * A request YAML with one job, the calculator's workload (request files: `llmsizer request new`). A field the
 * request requires and the form left empty gets the estimator's default (``defaults``, from /pages/choices.json).
 * It is a request file that `llmsizer plan FILE` answers as the calculator did: the engine and
 * weight format the form names, else the shown answer's (`answered`: its `engine` and `weights` assumptions), the
 * device or the memory budget per device (a memory alone is planned as `infer --memory` answers it), the traffic.
 *
 * The serving tab's engine settings (``settings``: their fields as the API takes them, their flags, and the ones a
 * request file takes under ``engine_settings``, /pages/choices.json's request_engine_settings): those under
 * ``engine_settings:``, fit_target and llama.cpp's GPU count under ``resources:``, --tp / --pp / --dp /
 * --enable-expert-parallel as the job's tensor_parallel / pipeline_parallel / data_parallel / expert_parallel on
 * tp x pp x dp devices, the others as comments naming their flag. */
export function requestYaml(kind, model, f, common, defaults = {}, answered = {}, requestSettings = null,
  settings = { fields: {}, flags: {}, taken: [] }, peft = ["rank"]) {
  const L = ["# written by the llmsizer calculator; check it: llmsizer request check FILE; plan it: llmsizer plan FILE",
    "version: 1", `title: ${yq(`${kind === "train" ? "Train" : "Serve"} ${model}`)}`, "jobs:"];
  const res = [];
  if (common.memory) res.push(`      memory: ${yq(common.memory)}  # memory per device`);
  if (common.headroom) res.push(`      headroom: ${yq(common.headroom)}  # share of each device's memory kept free`);
  if (kind === "train") {
    L.push("  - name: training", "    kind: training", "    model:", `      name: ${yq(model)}`,
      `    method: ${yq(f.method || defaults.method)}`);
    // the parameter-efficient settings a request file takes under peft (``peft``: /pages/choices.json's
    // request_peft), a comma list as a YAML list (--targets q,v: [q, v])
    const list = (v) => (String(v).includes(",") ? `[${String(v).split(",").map((x) => yq(x.trim())).join(", ")}]` : yq(v));
    const pefts = peft.filter((k) => f[k]);
    if (pefts.length) L.push("    peft:", ...pefts.map((k) => `      ${k}: ${list(f[k])}`));
    // the settings: the tab's, then the Advanced section's (every other field); one a request file does not take
    // (requestSettings: request/fields.py) is written as a comment with its flag
    const notSettings = new Set(["method", "rank", "tokens", "train_device", "count", "gpus", "gpus_per_node", "network",
      ...peft]);
    const keys = ["precision", "tf32", "optimizer", "micro_batch", "seq_len", "grad_accumulation", "grad_checkpointing",
      "train_attention", "framework", "zero", "fsdp", "tp", "pp", "offload", "grad_sync"];
    const more = Object.keys(f).filter((k) => !keys.includes(k) && !notSettings.has(k));
    const taken = (k) => requestSettings === null || requestSettings.includes(TRAIN_AS[k] || k);
    const settings = [...keys, ...more].filter((k) => f[k] && taken(k))
      .map((k) => `      ${TRAIN_AS[k] || k}: ${f[k] === true ? "true" : /^(true|false)$/.test(f[k]) ? f[k] : yq(f[k])}`);
    const untaken = more.filter((k) => f[k] && !taken(k)).map((k) =>
      `    # ${flagOf(k)}${f[k] === true ? "" : ` ${f[k]}`}: not a request setting (llmsizer train only)`);
    if (f.tokens) settings.push(`      train_tokens: ${yq(f.tokens)}`);
    if (settings.length) L.push("    settings:", ...settings);
    L.push(...untaken);
    L.push("    dataset:", "      tokens: 100M tokens  # fill in: tokens in one pass of your data");
    if (f.train_device) res.push(`      device: ${yq(f.train_device)}`);
    if (f.count || f.gpus) res.push(`      count: ${yq(f.count || f.gpus)}`);
    const devices = Number(f.count || f.gpus || 1), perNode = Number(f.gpus_per_node || 0);
    if (perNode && devices > perNode) res.push(`      nodes: ${Math.ceil(devices / perNode)}`);
    // resources.network reads what train's --network reads: a catalog interconnect or a bandwidth per machine
    if (f.network) res.push(`      network: ${yq(f.network)}`);
  } else {
    L.push("  - name: serving", "    kind: inference", "    model:", `      name: ${yq(model)}`);
    // what the form names wins (an answer may still be on its way); the answer fills what the form leaves default
    const engine = f.engine || answered.engine;
    if (engine) L.push(`    engine: ${yq(engine)}`);
    // quoted: unquoted, YAML reads 0.10 as the number 0.1
    if (f.engine_version) L.push(`    engine_version: ${JSON.stringify(String(f.engine_version))}`);
    const weights = f.weights || (answered.weights !== "file" ? answered.weights : "");
    L.push(`    quantization: ${yq(weights || "none")}`);
    if (f.kv_dtype) L.push(`    kv_cache_dtype: ${yq(f.kv_dtype)}`);
    // --tp / --pp / --dp: the job's tensor_parallel / pipeline_parallel / data_parallel (request/fields.py), which pin
    // the layout of the devices in resources: one replica of tp x pp x dp devices, as infer --tp --pp --dp sizes it,
    // on the device named or, a memory alone, on the device kind infer --memory takes (gpu); --enable-expert-parallel:
    // the job's expert_parallel
    const tp = settings.fields.tensor_parallel, pp = settings.fields.pipeline_parallel;
    const dp = settings.fields.data_parallel, ep = settings.fields.expert_parallel;
    if (tp) L.push(`    tensor_parallel: ${yq(tp)}`);
    if (pp) L.push(`    pipeline_parallel: ${yq(pp)}`);
    if (dp) L.push(`    data_parallel: ${yq(dp)}`);
    if (ep) L.push("    expert_parallel: true");
    if (tp || pp || dp) {
      if (!f.device) res.push("      device: gpu  # the device kind infer --memory takes");
      const what = ["tensor_parallel", pp && "pipeline_parallel", dp && "data_parallel"].filter(Boolean).join(" x ");
      res.push(`      count: ${Number(tp || 1) * Number(pp || 1) * Number(dp || 1)}  # ${what}: one replica`);
    }
    const media = MEDIA_FIELDS.filter((k) => f[k]);
    if (media.length) L.push("    media:", ...media.map((k) => `      ${k}: ${f[k] === true ? "true" : yq(f[k])}`));
    L.push("    traffic:", `      concurrency: ${yq(String(f.concurrency || defaults.concurrency))}`,
      `      context: ${yq(String(f.context || defaults.context))}`);
    if (f.output_tokens) L.push(`      output: ${yq(f.output_tokens)}`);
    if (f.device) res.push(`      device: ${yq(f.device)}`);
    const es = Object.entries(settings.fields);
    const value = (v) => (typeof v === "boolean" ? String(v) : yq(v));
    const taken = es.filter(([k]) => settings.taken.includes(k));
    if (taken.length) L.push("    engine_settings:", ...taken.map(([k, v]) => `      ${k}: ${value(v)}`));
    for (const [k, v] of es) {
      if (k === "fit_target") res.push(`      fit_target: ${yq(v)}`);
      else if (["tensor_parallel", "pipeline_parallel", "data_parallel", "expert_parallel"].includes(k)) continue; // the job's own fields (above)
      else if (k === "infer_gpus") res.push(`      count: ${yq(v)}  # GPUs llama.cpp splits the model over`);
      else if (!settings.taken.includes(k)) {
        const flag = settings.flags[k] || flagOf(k);
        L.push(`    # ${v === false ? `--no-${flag.slice(2)}` : flag}${typeof v === "boolean" ? "" : ` ${v}`}: not a `
          + "request setting (llmsizer infer only)");
      }
    }
  }
  if (res.length) L.push("    resources:", ...res);
  return `${L.join("\n")}\n`;
}

export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement("a");
  a.href = url; a.download = name; document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
