#!/usr/bin/env python3
"""Writes the kforge Grafana dashboards (kforge-*.json beside this file).

The JSON files are what Grafana imports and what kustomization.yaml ships as
ConfigMaps; this script is their source. After editing it, run
    python3 deploy/k8s/monitoring/dashboards/generate.py
and commit the JSON. deploy/tests/run_manifest_tests.sh fails when the JSON
and this script disagree, and deploy/tests/prometheus_test.py evaluates every
expression below against a live `kforge local`.

Every selector carries namespace=~"$namespace" (a Grafana variable over the
namespaces that run kforge); Prometheus Operator scrapes add `namespace` and
`pod` labels to each series.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NS = 'namespace=~"$namespace"'
RI = "$__rate_interval"


def sel(metric, extra=""):
    labels = NS + ("," + extra if extra else "")
    return f"{metric}{{{labels}}}"


def rate(metric, extra=""):
    return f"rate({sel(metric, extra)}[{RI}])"


def quantile(q, metric, by=""):
    group = "le" + ("," + by if by else "")
    return f"histogram_quantile({q}, sum by ({group}) ({rate(metric + '_bucket')}))"


def mean_of_histogram(metric, by=""):
    grouping = f" by ({by})" if by else ""
    return (f"sum{grouping} ({rate(metric + '_sum')})"
            f" / sum{grouping} ({rate(metric + '_count')})")


def share(metric, part, by="pod"):
    """The share of a time counter family (seconds by state) spent in `part`."""
    return (f"sum by ({by}) ({rate(metric, part)})"
            f" / sum by ({by}) ({rate(metric)})")


def ready(component):
    """Processes of one component reporting SERVING (kforge_ready joined with
    kforge_build_info's component label)."""
    build_info = sel("kforge_build_info", 'component="%s"' % component)
    return f"sum({sel('kforge_ready')} * on (namespace, pod, instance) group_left (component) {build_info})"


class Board:
    def __init__(self, uid, title, description):
        self.uid, self.title, self.description = uid, title, description
        self.panels = []
        self.y = 0
        self.x = 0
        self.next_id = 1

    def row(self, title):
        if self.x:
            self.y += 8
            self.x = 0
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def _id(self):
        self.next_id += 1
        return self.next_id - 1

    def _place(self, w, h):
        if self.x + w > 24:
            self.y += h
            self.x = 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        if self.x >= 24:
            self.x = 0
            self.y += h
        return pos

    def panel(self, kind, title, targets, unit="short", w=8, h=8, description="", **extra):
        refs = "ABCDEFGHIJ"
        panel = {
            "type": kind,
            "title": title,
            "id": self._id(),
            "description": description,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": self._place(w, h),
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
            "targets": [
                {"refId": refs[i], "datasource": {"type": "prometheus", "uid": "${datasource}"},
                 "expr": expr, "legendFormat": legend,
                 **({"format": "heatmap"} if kind == "heatmap" else {})}
                for i, (expr, legend) in enumerate(targets)
            ],
        }
        if kind == "timeseries":
            panel["options"] = {"legend": {"displayMode": "list", "placement": "bottom"},
                                "tooltip": {"mode": "multi"}}
        if kind == "stat":
            panel["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "graphMode": "area"}
        if kind == "heatmap":
            panel["options"] = {"calculate": False, "yAxis": {"unit": unit},
                                "cellGap": 1, "color": {"scheme": "Oranges", "mode": "scheme"}}
        panel.update(extra)
        self.panels.append(panel)

    def ts(self, title, targets, unit="short", **kw):
        self.panel("timeseries", title, targets, unit, **kw)

    def stat(self, title, targets, unit="short", **kw):
        self.panel("stat", title, targets, unit, w=kw.pop("w", 4), h=kw.pop("h", 4), **kw)

    def json(self):
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["kforge"],
            "editable": True,
            "schemaVersion": 39,
            "version": 1,
            "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"},
            "timezone": "browser",
            "graphTooltip": 1,
            "links": [{"type": "dashboards", "tags": ["kforge"], "title": "kforge",
                       "asDropdown": True}],
            "templating": {"list": [
                {"name": "datasource", "label": "Data source", "type": "datasource",
                 "query": "prometheus", "current": {}, "hide": 0},
                {"name": "namespace", "label": "Namespace", "type": "query",
                 "datasource": {"type": "prometheus", "uid": "${datasource}"},
                 "query": {"query": "label_values(kforge_build_info, namespace)",
                           "refId": "namespace"},
                 "definition": "label_values(kforge_build_info, namespace)",
                 "refresh": 2, "includeAll": True, "allValue": ".*", "multi": True,
                 "current": {"text": "All", "value": "$__all"}, "hide": 0, "sort": 1},
            ]},
            "annotations": {"list": [
                {"name": "Annotations & Alerts", "builtIn": 1, "type": "dashboard",
                 "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                 "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)"},
            ]},
            "panels": self.panels,
        }


def training():
    b = Board("kforge-training", "kforge / Training",
              "The learner's view of a training job: progress, rewards, pass rates per funnel "
              "stage and task level, speedups, and the optimiser's health.")
    b.row("Progress")
    b.stat("Job step", [(f"max({sel('kforge_learner_job_step')})", "step")])
    b.stat("Total steps", [(f"max({sel('kforge_learner_job_total_steps')})", "total")])
    b.stat("Policy version", [(f"max({sel('kforge_learner_policy_version')})", "version")])
    b.stat("Steps / hour", [(f"sum({rate('kforge_learner_steps_total')}) * 3600", "steps/h")])
    b.stat("Since last step", [(f"time() - max({sel('kforge_learner_last_step_timestamp_seconds')})",
                                "age")], unit="s")
    running = sel("kforge_learner_jobs", 'state="running"')
    b.stat("Running jobs", [(f"sum({running})", "running")])
    b.ts("Jobs by state", [(f"sum by (state) ({sel('kforge_learner_jobs')})", "{{state}}")])
    b.ts("Jobs finished", [(f"sum by (state) (increase({sel('kforge_learner_jobs_finished_total')}[{RI}]))",
                            "{{state}}")])
    b.ts("Step duration", [(quantile(0.5, "kforge_learner_step_duration_seconds"), "p50"),
                           (quantile(0.9, "kforge_learner_step_duration_seconds"), "p90")], unit="s")
    b.row("Where each step's time goes")
    stage = "kforge_learner_step_stage_seconds"
    b.ts("Mean seconds per step by stage",
         [(mean_of_histogram(stage, "stage"), "{{stage}}")], unit="s", w=8,
         description="step: the cadence, end to end; rollout and verify: wall spans over the "
                     "step's samples (from their generation and verification stamps); train: "
                     "optimiser time; weight_sync: snapshot and NCCL broadcast; wait: the "
                     "learner waiting for scored groups; verify_queue: a candidate's mean wait "
                     "from its generation to its verification. Stages overlap (StepTimes in "
                     "proto/kforge/v1/job.proto).")
    just_step = 'stage="step"'
    step_mean = (f"sum({rate(stage + '_sum', just_step)})"
                 f" / sum({rate(stage + '_count', just_step)})")
    working = 'stage!="step",stage!="wait",stage!="verify_queue"'
    slowest = (f"max(sum by (stage) ({rate(stage + '_sum', working)})"
               f" / sum by (stage) ({rate(stage + '_count', working)}))")
    b.ts("Step time over its slowest stage",
         [(f"({step_mean}) / scalar({slowest})", "step / slowest stage")], w=8,
         description="Mean step time over the mean time of its slowest stage (rollout, verify, "
                     "train or weight sync). A pipelined (max_staleness >= 1) job's target is "
                     "at most 1.1.")
    b.ts("Waiting: share of time",
         [(f"avg({sel('kforge_learner_wait_share')})", "learner"),
          (share("kforge_rollout_sampler_seconds_total", 'state="idle"'), "rollout {{pod}}"),
          (share("kforge_verifier_slot_seconds_total", 'state="idle"'), "verifier {{pod}}")],
         unit="percentunit", w=8,
         description="learner: its wait for scored groups over the step; rollout: the sampler "
                     "with nothing to decode (no work, or waiting for weights); verifier: free "
                     "slot-time over all slot-time. Target: at most 10% each.")
    b.ts("Stage throughput",
         [(f"avg({sel('kforge_learner_rollout_tokens_per_second')})", "rollout tokens/s"),
          (f"avg({sel('kforge_learner_train_tokens_per_second')})", "train tokens/s")], w=12,
         description="Per step: completion tokens over the rollout span; tokens trained over "
                     "optimiser time.")
    b.ts("Candidates verified / s (last step)",
         [(f"avg({sel('kforge_learner_verify_candidates_per_second')})", "candidates/s")], w=12)
    b.row("Rewards and pass rates")
    b.ts("Mean reward", [(f"avg({sel('kforge_learner_reward_mean')})", "reward")], w=8)
    b.ts("Pass rate by funnel stage",
         [(f"avg by (stage) ({sel('kforge_learner_stage_pass_rate')})", "{{stage}}")],
         unit="percentunit", w=8,
         description="Share of one step's samples that passed each stage: static, compile, "
                     "tiny_run, multi_input, correct.")
    b.ts("Correct rate by level",
         [(f"avg by (level) ({sel('kforge_learner_correct_rate')})", "level {{level}}")],
         unit="percentunit", w=8)
    # The same figures against the job's step rather than time (Grafana's
    # trend panel: the series joined on time, "step" as the x axis).
    b.panel("trend", "Reward and pass rates over training steps",
            [(f"max({sel('kforge_learner_job_step')})", "step"),
             (f"avg({sel('kforge_learner_reward_mean')})", "reward"),
             (f"avg by (stage) ({sel('kforge_learner_stage_pass_rate')})", "{{stage}}"),
             (f"avg by (level) ({sel('kforge_learner_correct_rate')})", "correct level {{level}}")],
            w=24, h=9, options={"xField": "step", "legend": {"displayMode": "list", "placement": "bottom"}},
            transformations=[{"id": "joinByField", "options": {"byField": "Time", "mode": "outer"}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True}}}])
    b.row("Multi-turn refinement")
    # Series exist only while a multi-turn job (JobSpec.multi_turn) runs.
    b.ts("Mean reward by turn",
         [(f"avg by (turn) ({sel('kforge_learner_turn_reward_mean')})", "turn {{turn}}")], w=8,
         description="Mean reward of the last step's samples at each turn of their trajectory "
                     "(turn 0: the first answer, k: after k rounds of the verifier's feedback).")
    b.ts("Trajectories solved by turn",
         [(f"avg by (turn) ({sel('kforge_learner_solved_by_turn')})", "by turn {{turn}}")],
         unit="percentunit", w=8,
         description="Share of the last step's trajectories with a correct answer (no hack "
                     "flag) at or before each turn; the gap between two lines is what a round "
                     "of feedback added.")
    b.ts("Turns per trajectory",
         [(mean_of_histogram("kforge_learner_turns_per_trajectory"), "mean"),
          (quantile(0.9, "kforge_learner_turns_per_trajectory"), "p90")], w=8,
         description="Turns a trajectory took before it was solved or hit max_turns.")
    b.ts("Level 2 share of prompts (curriculum)",
         [(f"avg({sel('kforge_learner_level2_share')})", "level 2 share")], unit="percentunit")
    b.panel("heatmap", "Speedup vs eager of correct samples",
            [(f"sum by (le) (increase({sel('kforge_learner_speedup_bucket')}[{RI}]))", "{{le}}")],
            unit="x", w=8, h=8)
    b.ts("Speedup quantiles", [(quantile(0.5, "kforge_learner_speedup"), "p50"),
                               (quantile(0.9, "kforge_learner_speedup"), "p90"),
                               (mean_of_histogram("kforge_learner_speedup"), "mean")], unit="x")
    b.row("Optimiser")
    b.ts("Policy loss", [(f"avg({sel('kforge_learner_policy_loss')})", "loss")], w=6)
    b.ts("KL to reference", [(f"avg({sel('kforge_learner_kl')})", "KL")], w=6)
    b.ts("Entropy", [(f"avg({sel('kforge_learner_entropy')})", "entropy")], w=6)
    b.ts("Gradient norm", [(f"avg({sel('kforge_learner_grad_norm')})", "grad norm")], w=6)
    b.ts("Learning rate", [(f"avg({sel('kforge_learner_learning_rate')})", "lr")], w=12)
    b.ts("Tokens with the TIS weight capped", [
        (f"avg({sel('kforge_learner_tis_capped_fraction')})", "share")], unit="percentunit", w=12,
         description="Share of a GRPO step's completion tokens whose truncated importance weight "
                     "(learner's old log-prob over the sampler's) was cut to grpo.tis_cap; only "
                     "with recompute_old_logprobs. Growing: sampler and trainer drift apart.")
    b.ts("Sample staleness (policy versions)",
         [(mean_of_histogram("kforge_learner_sample_staleness_versions"), "mean"),
          (quantile(0.9, "kforge_learner_sample_staleness_versions"), "p90")])
    b.ts("Weight publish time", [(quantile(0.5, "kforge_learner_weight_publish_seconds"), "p50"),
                                 (quantile(0.9, "kforge_learner_weight_publish_seconds"), "p90")],
         unit="s")
    b.ts("NCCL weight broadcasts / s by result",
         [(f"sum by (result) ({rate('kforge_learner_weight_broadcasts_total')})", "{{result}}"),
          (f"sum({rate('kforge_learner_weight_broadcast_bytes_total')}) / 1e9", "GB/s sent")],
         description="failed: aborted after an NCCL error or broadcast_timeout_s; the group "
                     "re-forms at the next update and workers fetch over gRPC meanwhile.")
    b.ts("Weight-broadcast group",
         [(f"max({sel('kforge_learner_broadcast_group_members')})", "members"),
          (f"sum by (result) (increase({sel('kforge_learner_broadcast_group_forms_total')}[{RI}]))",
           "forms {{result}}")])
    b.row("Data flow")
    b.ts("Samples and tokens trained / s",
         [(f"sum({rate('kforge_learner_samples_trained_total')})", "samples"),
          (f"sum({rate('kforge_learner_tokens_trained_total')})", "tokens")])
    b.ts("Samples delivered / s by acknowledgement",
         [(f"sum by (status) ({rate('kforge_learner_samples_total')})", "{{status}}")])
    b.ts("Groups / s by event",
         [(f"sum by (event) ({rate('kforge_learner_groups_total')})", "{{event}}")])
    b.ts("Where accepted samples went (ledger)",
         [(f"sum by (entry) ({sel('kforge_learner_sample_ledger')})", "{{entry}}")],
         description="accepted = completed (in a group that completed) + discarded (in a group "
                     "re-issued or dropped before it completed) + held (in a group still "
                     "filling); one snapshot of the learner's books.")
    b.ts("Group wait bound",
         [(f"max({sel('kforge_learner_group_wait_seconds')})", "re-issue after")], unit="s",
         description="How long a group may stay incomplete before it is re-issued: "
                     "group_wait_factor x the recent group times, within "
                     "[group_wait_floor_s, group_timeout_s].")
    b.ts("Experience buffer",
         [(f"sum({sel('kforge_learner_samples_buffered')})", "samples buffered"),
          (f"sum({sel('kforge_learner_groups_pending')})", "groups pending"),
          (f"sum({sel('kforge_learner_groups_in_flight')})", "groups in flight")])
    b.ts("Registered rollout workers",
         [(f"sum({sel('kforge_learner_workers')})", "workers"),
          (f"sum({sel('kforge_learner_rollout_workers_waiting')})", "waiting for work"),
          (f"sum(increase({sel('kforge_learner_workers_expired_total')}[{RI}]))", "expired")])
    b.ts("Checkpoints written",
         [(f"sum(increase({sel('kforge_learner_checkpoints_written_total')}[{RI}]))", "checkpoints")])
    return b


def verifier():
    b = Board("kforge-verifier", "kforge / Verifiers",
              "Verifier workers: throughput, queueing, funnel stage latencies, sandbox kills and "
              "the verdict cache.")
    b.row("Throughput")
    b.stat("Verdicts / s", [(f"sum({rate('kforge_verifier_verdicts_total')})", "verdicts/s")])
    b.stat("Verifiers ready", [(ready("verifier_worker"), "ready")])
    b.stat("Queued", [(f"sum({sel('kforge_verifier_queue_depth')})", "queued")])
    b.stat("In flight", [(f"sum({sel('kforge_verifier_candidates_in_flight')})", "in flight")])
    b.stat("Cache hit ratio",
           [(f"sum({rate('kforge_verifier_cache_hits_total')}) / (sum({rate('kforge_verifier_cache_hits_total')})"
             f" + sum({rate('kforge_verifier_cache_misses_total')}))", "hits")], unit="percentunit")
    b.stat("Zygotes up", [(f"sum({sel('kforge_verifier_zygote_up')})", "up")])
    b.ts("Verdicts / s by last stage reached and outcome",
         [(f"sum by (stage, outcome) ({rate('kforge_verifier_verdicts_total')})", "{{stage}} {{outcome}}")],
         w=12)
    b.ts("Verdicts / s by verifier",
         [(f"sum by (pod) ({rate('kforge_verifier_verdicts_total')})", "{{pod}}")], w=12)
    b.ts("Slot use by verifier (busy share)",
         [(share("kforge_verifier_slot_seconds_total", 'state="busy"'), "{{pod}}")],
         unit="percentunit", w=12,
         description="Slot-time with a candidate in the funnel over all slot-time "
                     "(max_concurrent slots); the rest is idle.")
    b.ts("Verification slots by verifier",
         [(f"sum by (pod) ({sel('kforge_verifier_slots')})", "{{pod}}")], w=12)
    b.row("Queueing")
    b.ts("Queue depth by verifier", [(f"sum by (pod) ({sel('kforge_verifier_queue_depth')})", "{{pod}}")])
    b.ts("Candidates in flight by verifier",
         [(f"sum by (pod) ({sel('kforge_verifier_candidates_in_flight')})", "{{pod}}")])
    b.ts("Verify RPC latency",
         [("histogram_quantile(0.9, sum by (le, grpc_method) (rate(kforge_grpc_server_handling_seconds_bucket"
           + "{" + NS + ',grpc_service="kforge.v1.VerifierService"}[' + RI + "])))", "p90 {{grpc_method}}")],
         unit="s")
    b.row("Funnel stages")
    b.ts("Stage latency p50", [(quantile(0.5, "kforge_verifier_stage_duration_seconds", "stage"), "{{stage}}")],
         unit="s")
    b.ts("Stage latency p90", [(quantile(0.9, "kforge_verifier_stage_duration_seconds", "stage"), "{{stage}}")],
         unit="s")
    b.ts("Stage latency p99", [(quantile(0.99, "kforge_verifier_stage_duration_seconds", "stage"), "{{stage}}")],
         unit="s")
    b.ts("Waiting for the GPU per verification",
         [(quantile(0.5, "kforge_verifier_gpu_wait_seconds"), "p50"),
          (quantile(0.9, "kforge_verifier_gpu_wait_seconds"), "p90")],
         unit="s",
         description="Correctness requests wait while another candidate is timed; a timing "
                     "waits to have the GPU alone. Included in the stage latencies.")
    b.row("Sandbox and cache")
    b.ts("Sandbox kills / s by reason",
         [(f"sum by (reason) ({rate('kforge_verifier_sandbox_kills_total')})", "{{reason}}")])
    b.ts("Hacking flags / s",
         [(f"sum by (flag) ({rate('kforge_verifier_hack_flags_total')})", "{{flag}}")])
    b.ts("Cache lookups / s",
         [(f"sum({rate('kforge_verifier_cache_hits_total')})", "hits"),
          (f"sum({rate('kforge_verifier_cache_misses_total')})", "misses")])
    b.ts("Deliveries to the learner / s by result",
         [(f"sum by (result) ({rate('kforge_verifier_deliveries_total')})", "{{result}}")])
    b.ts("Sandboxes / s by source (spare: started and warmed ahead)",
         [(f"sum by (source) ({rate('kforge_verifier_sandboxes_total')})", "{{source}}")])
    b.ts("Spare sandboxes ready by verifier",
         [(f"sum by (pod) ({sel('kforge_verifier_spare_sandboxes')})", "{{pod}}")])
    # Shared reference work: within a GRPO batch nearly every candidate
    # reuses its task's epoch and baselines; computed/miss/drift rates show
    # what the reference server still does per candidate.
    b.ts("Reference epochs / s (reused: the task's seeds and outputs shared)",
         [(f"sum by (result) ({rate('kforge_verifier_reference_epochs_total')})", "{{result}}")],
         unit="ops")
    b.ts("A new reference epoch's time by part (compute: the reference server; transfer: "
         "bytes over its socket; share: inputs copied for candidates)",
         [(mean_of_histogram("kforge_verifier_reference_epoch_seconds", "part"), "{{part}}")],
         unit="s")
    b.ts("Baseline lookups / s (hit, miss: measured, drift: re-measured)",
         [(f"sum by (result) ({rate('kforge_verifier_baseline_lookups_total')})", "{{result}}")],
         unit="ops")
    b.ts("Reference cache memory by verifier",
         [(f"sum by (pod) ({sel('kforge_verifier_reference_cache_bytes')})", "{{pod}}")],
         unit="bytes")
    return b


def rollout():
    b = Board("kforge-rollout", "kforge / Rollout workers",
              "Rollout workers: generation throughput, continuous batching, KV cache and weight "
              "updates.")
    b.row("Throughput")
    b.stat("Generated tokens / s", [(f"sum({rate('kforge_rollout_generated_tokens_total')})", "tok/s")])
    b.stat("Workers ready", [(ready("rollout_worker"), "ready")])
    b.stat("Registered with the learner", [(f"sum({sel('kforge_learner_workers')})", "workers")])
    b.stat("Groups in flight", [(f"sum({sel('kforge_rollout_groups_in_flight')})", "groups")])
    b.stat("Samples outstanding", [(f"sum({sel('kforge_rollout_samples_outstanding')})", "samples")])
    b.stat("Groups dropped", [(f"sum(increase({sel('kforge_rollout_groups_dropped_total')}[1h]))", "last hour")])
    b.ts("Generated tokens / s by worker",
         [(f"sum by (pod) ({rate('kforge_rollout_generated_tokens_total')})", "{{pod}}")])
    b.ts("Prefill tokens / s by worker",
         [(f"sum by (pod) ({rate('kforge_rollout_prefill_tokens_total')})", "{{pod}}")])
    b.ts("Decode steps / s by worker",
         [(f"sum by (pod) ({rate('kforge_rollout_decode_steps_total')})", "{{pod}}")])
    b.ts("Sampler time by state",
         [(f"sum by (state) ({rate('kforge_rollout_sampler_seconds_total')})"
           f" / scalar(sum({rate('kforge_rollout_sampler_seconds_total')}))", "{{state}}")],
         unit="percentunit", w=12,
         description="generating: admission, prefill, decode; between_steps: applying new "
                     "weights; idle: nothing to decode (waiting for work or weights).")
    b.ts("Idle share by worker",
         [(share("kforge_rollout_sampler_seconds_total", 'state="idle"'), "{{pod}}")],
         unit="percentunit", w=12)
    b.row("Batching and KV cache")
    b.ts("Batch occupancy", [(f"avg by (pod) ({sel('kforge_rollout_batch_occupancy_ratio')})", "{{pod}}")],
         unit="percentunit")
    b.ts("KV cache use",
         [(f"sum by (pod) ({sel('kforge_rollout_kv_cache_tokens')})"
           f" / sum by (pod) ({sel('kforge_rollout_kv_cache_capacity_tokens')})", "{{pod}}")],
         unit="percentunit")
    b.ts("Groups waiting and in flight",
         [(f"sum({sel('kforge_rollout_waiting_groups')})", "waiting"),
          (f"sum({sel('kforge_rollout_groups_in_flight')})", "in flight")])
    b.ts("Time to first token",
         [(quantile(0.5, "kforge_rollout_time_to_first_token_seconds"), "p50"),
          (quantile(0.9, "kforge_rollout_time_to_first_token_seconds"), "p90")], unit="s")
    b.ts("Samples / s by event",
         [(f"sum by (event) ({rate('kforge_rollout_samples_total')})", "{{event}}")])
    b.ts("Samples no verifier took, delivered by the worker / s",
         [(f"sum by (result) ({rate('kforge_rollout_local_deliveries_total')})", "{{result}}")],
         description="Refused or undeliverable samples, delivered with the worker's own "
                     "verdict, by the learner's ack; failed: the learner was unreachable and "
                     "the group was given back.")
    b.ts("Rejected work items and dropped groups / s",
         [(f"sum({rate('kforge_rollout_work_items_rejected_total')})", "work items rejected"),
          (f"sum({rate('kforge_rollout_groups_dropped_total')})", "groups dropped"),
          (f"sum({rate('kforge_rollout_groups_released_total')})", "groups given back to the learner")])
    b.row("Weights")
    b.ts("Weight update time",
         [(quantile(0.5, "kforge_rollout_weight_update_seconds"), "p50"),
          (quantile(0.9, "kforge_rollout_weight_update_seconds"), "p90")], unit="s")
    b.ts("Weight version by worker vs learner policy",
         [(f"max by (pod) ({sel('kforge_rollout_weight_version')})", "{{pod}}"),
          (f"max({sel('kforge_learner_policy_version')})", "learner policy")])
    b.ts("Weight updates / s by path",
         [(f"sum by (path) ({rate('kforge_rollout_weight_updates_total')})", "{{path}}")],
         description="nccl: broadcast into the live parameters; grpc: GetWeights.")
    b.ts("Workers in the NCCL broadcast group",
         [(f"sum({sel('kforge_rollout_broadcast_member')})", "members"),
          (f"sum(increase({sel('kforge_rollout_broadcast_failures_total')}[{RI}]))",
           "join or receive failures")])
    b.ts("Version lag behind the learner",
         [(f"max({sel('kforge_learner_policy_version')}) - min({sel('kforge_rollout_weight_version')})",
           "max lag")])
    return b


def gpu():
    # DCGM exporter (NVIDIA GPU Operator) series carry the pod using each GPU
    # in `pod` and `namespace` when its ServiceMonitor honours labels, as the
    # GPU Operator's does.
    b = Board("kforge-gpu", "kforge / GPUs (DCGM)",
              "GPU use of kforge pods from the NVIDIA DCGM exporter (GPU Operator).")
    gsel = f'{NS},pod=~"kforge-.*"'
    b.ts("GPU utilisation", [(f"avg by (pod) (DCGM_FI_DEV_GPU_UTIL{{{gsel}}})", "{{pod}}")],
         unit="percent", w=12)
    b.ts("Tensor core activity",
         [(f"avg by (pod) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{gsel}}})", "{{pod}}")],
         unit="percentunit", w=12)
    b.ts("GPU memory used", [(f"sum by (pod) (DCGM_FI_DEV_FB_USED{{{gsel}}})", "{{pod}}")],
         unit="decmbytes", w=12)
    b.ts("GPU memory used share",
         [(f"sum by (pod) (DCGM_FI_DEV_FB_USED{{{gsel}}}) / (sum by (pod) (DCGM_FI_DEV_FB_USED{{{gsel}}})"
           f" + sum by (pod) (DCGM_FI_DEV_FB_FREE{{{gsel}}}))", "{{pod}}")], unit="percentunit", w=12)
    b.ts("Power", [(f"sum by (pod) (DCGM_FI_DEV_POWER_USAGE{{{gsel}}})", "{{pod}}")], unit="watt", w=12)
    b.ts("Temperature", [(f"max by (pod) (DCGM_FI_DEV_GPU_TEMP{{{gsel}}})", "{{pod}}")], unit="celsius", w=12)
    return b


def main():
    check = "--check" in sys.argv
    stale = []
    for board in (training(), verifier(), rollout(), gpu()):
        path = os.path.join(HERE, board.uid + ".json")
        text = json.dumps(board.json(), indent=2, sort_keys=False) + "\n"
        if check:
            with open(path) as f:
                if f.read() != text:
                    stale.append(path)
        else:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("dashboards out of date (run deploy/k8s/monitoring/dashboards/generate.py):",
              *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
