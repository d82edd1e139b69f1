// The lines the CLI prints under an estimate, written from the answer's JSON in the CLI's words and digits: the
// calibrated range of a memory need (render/text.py estimate_facts, coverage_lines) and a training run's duration
// (cli/train_cmd.py render_duration). The pages render them; they compute nothing. tests/web/test_estimate_text_js.py
// compares each with the CLI's text on real answers.

import { formatBytes, formatCount, formatFigureCount, formatSeconds, formatSecondsRange } from "./format.js";
import { pyGeneral, pyGrouped, pyFixed, pyPercent } from "./pyformat.js";

/** render/text.py coverage_lines: a calibrated range's coverage in words, then its warning, if any. */
export function coverageLines(cov, of = "") {
  let line = `  ${of ? `${of} ` : ""}coverage: target ${pyPercent(cov.target, 0)} (of ${cov.of})`;
  if (cov.in_sample !== null && cov.in_sample !== undefined) {
    line += `; in sample ${pyPercent(cov.in_sample, 1)} of the setups' runs inside`;
  }
  if (cov.leave_one_setup_out !== null && cov.leave_one_setup_out !== undefined) {
    const other = cov.setups - 1;
    line += `; leave one setup out ${pyPercent(cov.leave_one_setup_out, 1)} (each setup's runs against the range `
      + `fitted on the other ${other} setup${other === 1 ? "" : "s"})`;
  } else {
    line += "; no leave-one-setup-out check (one setup)";
  }
  return [line, ...(cov.warning ? [`  warning${of ? ` (${of})` : ""}: ${cov.warning}`] : [])];
}

/** render/text.py estimate_facts: the "calibrated range: ..." line of details.calibrated_range and its coverage. */
export function calibratedLines(c) {
  const s = c.setups === 1 ? "" : "s";
  return [`calibrated range: ${formatBytes(c.low)} - ${formatBytes(c.high)} per device (live tensors x `
    + `measured/predicted ${pyGeneral(c.band_low)}-${pyGeneral(c.band_high)} of ${c.rows} ${c.kind} validation `
    + `rows of ${c.setups} setup${s}${c.setups !== 1 ? ", each weighing as one" : ""}, ${c.engine}; + the context, `
    + "reserve and runtime at their own low-high; estimate/ranges.py, allocator.py eq. C1)",
  ...coverageLines(c.coverage)];
}

const has = (du, name) => du.assumptions.some((a) => a.name === name);
const g3 = (x) => pyGeneral(x, 3);

/** The per-micro-step breakdown of render_duration (its "; per micro-step ... -> N tokens/s"). */
function stepText(du, st) {
  const of = (x, what) => (x ? ` (of it ${g3(x)} s ${what})` : "");
  const masked = du.assumptions.find((a) => a.name === "attention_masked_layers")?.value || 0;
  const kernel = du.assumptions.find((a) => a.name === "attention_kernel_timed")?.value ?? "fused";
  const attention = has(du, "eager_score_gemm_seconds_per_token") ? "eager attention's score GEMMs with their s x s traffic"
    : `attention in ${kernel} at its executed FLOPs${masked ? `, ${masked} layers under an explicit mask timed over `
      + "every tile of the s x s scores (no causal or document tile skipped: attention_masked_layers)" : ""}`;
  const mp = st.model_parallel;
  let text = `; per micro-step ${g3(st.compute_seconds)} s compute`
    + of(st.dequant_seconds, `${has(du, "gptq_dequant_bytes_per_weight") ? "GPTQ" : "NF4"} dequantization`)
    + of(st.elementwise_seconds, "memory-bound kernels")
    + of(st.attention_seconds, attention)
    + (st.float8_cast_seconds ? ` (of it ${g3(st.float8_cast_seconds)} s float8 casts; the float8 linears at the FP8 peak)` : "")
    + (st.launch_seconds && st.launch_seconds >= st.compute_seconds
      ? " (host-bound: the kernel launches take longer than the device's work)" : "")
    + (st.comm_seconds && mp === null ? `, ${g3(st.comm_seconds)} s ${st.topology} communication `
      + `(${g3(st.exposed_comm_seconds)} s not hidden by compute)` : "");
  if (mp) {
    const tp = mp.tp_overlap ? "tensor-parallel overlapping the GEMMs" : mp.tp_hidden_seconds
      ? `${g3(mp.tp_hidden_seconds)} s tensor-parallel behind the backward GEMMs, the rest not overlapped` : "not overlapped";
    text += ` on the slowest stage; per micro-batch ${g3(mp.tp_seconds)} s tensor-parallel and ${g3(mp.p2p_seconds)} s `
      + `pipeline communication (${tp}), pipeline bubble ${g3(mp.bubble)}, `
      + (mp.fsdp ? `${g3(mp.dp_seconds)} s FSDP all-gathers + reduce-scatters per step (${g3(mp.dp_exposed_seconds)} s `
        + "not hidden by compute)" : `${g3(mp.dp_seconds)} s gradient all-reduce per step`);
  }
  if (st.ring_bytes) {
    // decimal, as the CLI and the plan's network rows write transfer bytes
    text += `, ring attention ${formatBytes(st.ring_bytes, false)} K/V exchange per micro-step (${g3(st.ring_seconds)} s, `
      + `${g3(st.ring_exposed_seconds)} s not hidden by the attention, in the compute)`;
  }
  text += du.assumptions.filter((a) => a.name === "inter_node_network").map((a) => ` over ${a.why.split(":")[0]}`).join("");
  if (st.paging_seconds) text += `, ${g3(st.paging_seconds)} s optimizer paging per step`;
  if (st.optimizer_seconds) {
    text += `, ${g3(st.optimizer_seconds)} s optimizer update per step`
      + (has(du, "offload_host_memory_bandwidth") ? " on the host (CPU offload, not overlapped)" : "");
  }
  return `${text} -> ${pyGrouped(st.tokens_per_second, 0)} tokens/s`;
}

/** cli/train_cmd.py render_duration: the duration's factors, its per-micro-step breakdown, the wall clock with its
 * calibrated range and device-hours; then the range's coverage and the warnings: one string per line. */
export function durationLines(du) {
  if (du.seconds === null || du.seconds === undefined) return [`duration: ${du.warnings.join("; ")}`];
  let line = `duration: ${formatCount(du.tokens)} tokens x ${g3(du.flops_per_token)} FLOP/token (${du.flops_formula}) `
    + `on ${du.devices} device(s) at ${pyPercent(du.utilization, 1)} of ${g3(du.peak_flops || 0)} FLOP/s (${du.peak_name}) `
    + `on ${du.utilization_applies_to}`;
  const st = du.step;
  if (st) {
    if (st.shape_efficiency < 1) line += ` x GEMM shape efficiency ${pyFixed(st.shape_efficiency, 3)}`;
    line += stepText(du, st);
  }
  const rng = du.calibrated_seconds_range;
  line += ` = ${formatSeconds(du.seconds)} wall clock`
    + (rng ? ` (${formatSecondsRange(rng[0], rng[1])} calibrated range)` : "")
    + `, ${formatFigureCount(du.device_hours || 0)} device-hours`
    // the MFU the answer carries (estimate/duration.py Duration.mfu), not computed here
    + (du.mfu !== null && du.mfu !== undefined ? `; MFU ${pyPercent(du.mfu, 1)} (${du.model_flops_formula} per token, `
      + `no recomputation, over the wall clock at the ${du.peak_name})` : "");
  const cov = du.calibrated_seconds_range_coverage;
  return [line, ...(rng && cov ? coverageLines(cov) : []), ...du.warnings.map((w) => `warning: ${w}`)];
}
