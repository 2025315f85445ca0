package render

// The metric names the dashboards and rules may use, as their exporters expose them, each list
// read from the exporter's source (2026-11-30). A name outside these lists is a typo or a metric
// of another version, and its panel or alert would stay empty without anyone noticing.
//
// Counters are listed with the _total suffix Prometheus clients add; histograms by their base name
// (the series are <name>_bucket, _sum and _count).

// vllmMetrics: vllm-project/vllm, vllm/v1/metrics/loggers.py, PrometheusStatLogger (labels
// model_name, engine; request_success adds finished_reason). inter_token_latency_seconds replaced
// time_per_output_token_seconds in 0.11 (hidden in 0.12, removed after): not listed.
var vllmMetrics = map[string]string{
	"vllm:num_requests_running":           "gauge",
	"vllm:num_requests_waiting":           "gauge",
	"vllm:kv_cache_usage_perc":            "gauge",
	"vllm:prefix_cache_queries_total":     "counter",
	"vllm:prefix_cache_hits_total":        "counter",
	"vllm:num_preemptions_total":          "counter",
	"vllm:prompt_tokens_total":            "counter",
	"vllm:generation_tokens_total":        "counter",
	"vllm:request_success_total":          "counter",
	"vllm:request_prompt_tokens":          "histogram",
	"vllm:request_generation_tokens":      "histogram",
	"vllm:time_to_first_token_seconds":    "histogram",
	"vllm:inter_token_latency_seconds":    "histogram",
	"vllm:e2e_request_latency_seconds":    "histogram",
	"vllm:request_queue_time_seconds":     "histogram",
	"vllm:request_prefill_time_seconds":   "histogram",
	"vllm:request_decode_time_seconds":    "histogram",
	"vllm:request_inference_time_seconds": "histogram",
}

// dcgmMetrics: NVIDIA/dcgm-exporter, etc/default-counters.csv (the fields enabled by default;
// labels gpu, UUID, device, modelName, Hostname, and pod/namespace/container of the GPU's holder).
var dcgmMetrics = map[string]string{
	"DCGM_FI_DEV_SM_CLOCK":            "gauge",
	"DCGM_FI_DEV_MEM_CLOCK":           "gauge",
	"DCGM_FI_DEV_MEMORY_TEMP":         "gauge",
	"DCGM_FI_DEV_GPU_TEMP":            "gauge",
	"DCGM_FI_DEV_POWER_USAGE":         "gauge",
	"DCGM_FI_DEV_GPU_UTIL":            "gauge",
	"DCGM_FI_DEV_MEM_COPY_UTIL":       "gauge",
	"DCGM_FI_DEV_XID_ERRORS":          "gauge",
	"DCGM_FI_DEV_FB_FREE":             "gauge",
	"DCGM_FI_DEV_FB_USED":             "gauge",
	"DCGM_FI_DEV_ENC_UTIL":            "gauge",
	"DCGM_FI_DEV_DEC_UTIL":            "gauge",
	"DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",
}

// kedaMetrics: kedacore/keda v2.21.0, pkg/metricscollector/prommetrics.go (labels namespace,
// metric, scaledObject, scaler, triggerIndex, type; namespace arrives as exported_namespace).
var kedaMetrics = map[string]string{
	"keda_build_info":                            "gauge",
	"keda_scaler_metrics_value":                  "gauge",
	"keda_scaler_metrics_latency_seconds":        "gauge",
	"keda_scaler_active":                         "gauge",
	"keda_scaled_object_paused":                  "gauge",
	"keda_scaler_detail_errors_total":            "counter",
	"keda_scaled_object_errors_total":            "counter",
	"keda_scaled_job_errors_total":               "counter",
	"keda_scaler_empty_upstream_responses_total": "counter",
	"keda_trigger_registered_total":              "gauge",
	"keda_resource_registered_total":             "gauge",
	"keda_internal_scale_loop_latency_seconds":   "gauge",
}

// auditorMetrics: this repository's daemon, internal/daemon (TestAuditorMetricsListed keeps the
// list equal to the names registered there).
var auditorMetrics = map[string]string{
	"auditor_drifted_objects":                          "gauge",
	"auditor_drifted_fields":                           "gauge",
	"auditor_audit_duration_seconds":                   "histogram",
	"auditor_last_success_timestamp_seconds":           "gauge",
	"auditor_audit_errors_total":                       "counter",
	"auditor_git_last_fetch_success_timestamp_seconds": "gauge",
	"auditor_git_fetch_errors_total":                   "counter",
	"auditor_leader":                                   "gauge",
	"auditor_drift_episodes_open":                      "gauge",
	"auditor_drift_episode_duration_seconds":           "histogram",
	"auditor_sink_failures_total":                      "counter",
	"auditor_sink_sent_total":                          "counter",
	"auditor_outbox_depth":                             "gauge",
	"auditor_outbox_dropped_total":                     "counter",
	"auditor_watch_starts_total":                       "counter",
	"auditor_cluster_reachable":                        "gauge",
	"auditor_application_audited":                      "gauge",
	"auditor_application_not_audited":                  "gauge",
	"auditor_shard_held":                               "gauge",
	"auditor_shard_members":                            "gauge",
	"auditor_shard_moves_total":                        "counter",
	"auditor_audits_total":                             "counter",
	"auditor_applications_audited_alone_total":         "counter",
	"auditor_audit_queue_depth":                        "gauge",
	"auditor_render_workers_total":                     "counter",
	"auditor_render_engine":                            "gauge",
	"auditor_render_worker_peak_rss_bytes":             "gauge",
	"auditor_render_workers_queued":                    "gauge",
}

// kubeStateMetrics: kubernetes/kube-state-metrics, internal/store/node.go (labels node, resource
// sanitized: nvidia.com/gpu is nvidia_com_gpu, unit); kube-prometheus-stack installs it.
var kubeStateMetrics = map[string]string{
	"kube_node_status_capacity":    "gauge",
	"kube_node_status_allocatable": "gauge",
	// internal/store/cronjob.go and job.go (labels namespace, cronjob / job_name).
	"kube_cronjob_status_last_successful_time": "gauge",
	"kube_cronjob_created":                     "gauge",
	"kube_job_status_failed":                   "gauge",
	"kube_job_status_start_time":               "gauge",
	// internal/store/deployment.go and daemonset.go (labels namespace, deployment / daemonset):
	// what a model or the GPU exporter wants when no pod of it is scraped at all.
	"kube_deployment_spec_replicas":                  "gauge",
	"kube_daemonset_status_desired_number_scheduled": "gauge",
	"kube_daemonset_status_number_available":         "gauge",
}

// cnpgMetrics: cloudnative-pg v1.28.0 (pkg/management/postgres/webserver/metricserver and
// config/manager/default-monitoring.yaml: pg_stat_archiver as cnpg_pg_stat_archiver_*), and the
// Barman Cloud plugin v0.15.0's (web/docs: barman_cloud_cloudnative_pg_io_* replace the
// cnpg_collector_*_backup_* series, deprecated since 1.26 and not fed by plugins).
var cnpgMetrics = map[string]string{
	"cnpg_collector_pg_wal_archive_status":                           "gauge",
	"cnpg_pg_stat_archiver_last_archived_time":                       "gauge",
	"cnpg_pg_stat_archiver_last_failed_time":                         "gauge",
	"barman_cloud_cloudnative_pg_io_last_available_backup_timestamp": "gauge",
	"barman_cloud_cloudnative_pg_io_last_failed_backup_timestamp":    "gauge",
}

// prometheusMetrics: Prometheus' own series for every target.
var prometheusMetrics = map[string]string{"up": "gauge"}

// knownSeries returns every series name the lists allow (histograms as _bucket, _sum, _count).
func knownSeries() map[string]string {
	out := map[string]string{}
	for exporter, list := range map[string]map[string]string{
		"vllm": vllmMetrics, "dcgm-exporter": dcgmMetrics, "keda": kedaMetrics,
		"auditor": auditorMetrics, "kube-state-metrics": kubeStateMetrics, "prometheus": prometheusMetrics,
		"cloudnative-pg": cnpgMetrics,
	} {
		for name, typ := range list {
			if typ == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					out[name+suffix] = exporter
				}
				continue
			}
			out[name] = exporter
		}
	}
	return out
}
