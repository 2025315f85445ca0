package render

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The label kube-prometheus-stack's Prometheus selects ServiceMonitors, PodMonitors and
// PrometheusRules by (release: <its Helm release>), as docs/platform.md documents it.
const promRelease = "kube-prometheus-stack"

var promParser = parser.NewParser(parser.Options{})

// grafanaVars are the range variables Grafana replaces before a query reaches Prometheus; template
// variables ($model_name) only appear inside label matchers' strings, where PromQL takes anything.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// parseMetrics parses a PromQL expression and returns the metric names it selects.
func parseMetrics(expr string) ([]string, error) {
	e, err := promParser.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// monitoringObjects returns the env's objects of the prometheus-operator's kinds.
func monitoringObjects(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GroupVersionKind().Group != "monitoring.coreos.com" {
			continue
		}
		for _, k := range kinds {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// ruleList is every rule of every PrometheusRule in objs.
type promRule struct {
	Object, Group, Record, Alert, Expr string
	Labels, Annotations                map[string]string
}

func ruleList(t *testing.T, objs []*unstructured.Unstructured) []promRule {
	t.Helper()
	var out []promRule
	for _, o := range monitoringObjects(objs, "PrometheusRule") {
		var spec struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Record, Alert, Expr string
					Labels, Annotations map[string]string
				}
			}
		}
		data, err := json.Marshal(o.Object["spec"])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &spec), id(o))
		for _, g := range spec.Groups {
			for _, r := range g.Rules {
				out = append(out, promRule{Object: id(o), Group: g.Name, Record: r.Record, Alert: r.Alert,
					Expr: r.Expr, Labels: r.Labels, Annotations: r.Annotations})
			}
		}
	}
	return out
}

// dashboards returns the env's Grafana dashboard ConfigMaps' JSON by ConfigMap and key.
func dashboards(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" || o.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		require.Len(t, data, 1, "%s: one dashboard per ConfigMap", id(o))
		for k, v := range data {
			require.True(t, strings.HasSuffix(k, ".json"), "%s: key %s", id(o), k)
			out[id(o)+" "+k] = v
		}
	}
	return out
}

// TestMonitoringSelectable: every ServiceMonitor, PodMonitor and PrometheusRule carries the label
// kube-prometheus-stack selects them by; dashboards carry the Grafana sidecar's label (they are
// found by it) and live in llm-monitoring.
func TestMonitoringSelectable(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := renderRepo(t, env).Objects
			monitors := monitoringObjects(objs, "ServiceMonitor", "PodMonitor", "PrometheusRule")
			require.GreaterOrEqual(t, len(monitors), 6) // 4 ServiceMonitors, 1 PodMonitor, 1 PrometheusRule
			for _, o := range monitors {
				assert.Equal(t, promRelease, o.GetLabels()["release"], "%s lacks release: %s", id(o), promRelease)
			}
			boards := dashboards(t, objs)
			assert.Len(t, boards, 4)
			for name := range boards {
				assert.True(t, strings.HasPrefix(name, "ConfigMap llm-monitoring/grafana-dashboard-"), name)
			}
		})
	}
}

// TestMonitoringDashboards: every dashboard is JSON with a unique uid and a title, and every
// query of every panel (rows' panels included) and of every template variable parses as PromQL
// and selects only metrics of the verified lists or recording rules the platform defines.
func TestMonitoringDashboards(t *testing.T) {
	objs := renderRepo(t, "prod").Objects
	allowed := knownSeries()
	for _, r := range ruleList(t, objs) {
		if r.Record != "" {
			allowed[r.Record] = "recording rule"
		}
	}
	uids := map[string]string{}
	boards := dashboards(t, objs)
	require.NotEmpty(t, boards)
	for name, text := range boards {
		var board struct {
			UID, Title string
			Panels     []dashPanel
			Templating struct {
				List []struct {
					Name, Type string
					Query      any
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(text), &board), name)
		require.NotEmpty(t, board.UID, name)
		require.NotEmpty(t, board.Title, name)
		require.Empty(t, uids[board.UID], "%s: uid %s also in %s", name, board.UID, uids[board.UID])
		uids[board.UID] = name
		var exprs []string
		for _, p := range flatPanels(board.Panels) {
			if p.Type == "row" {
				continue
			}
			require.NotEmpty(t, p.Targets, "%s: panel %q has no query", name, p.Title)
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
		}
		for _, v := range board.Templating.List {
			if v.Type != "query" {
				continue
			}
			q := fmt.Sprint(v.Query)
			if m, ok := v.Query.(map[string]any); ok {
				q = fmt.Sprint(m["query"])
			}
			sel := labelValues.FindStringSubmatch(q)
			require.NotNil(t, sel, "%s: variable %s: %q is not label_values(selector, label)", name, v.Name, q)
			exprs = append(exprs, sel[1])
		}
		for _, e := range exprs {
			metrics, err := parseMetrics(e)
			require.NoError(t, err, "%s: %s", name, e)
			require.NotEmpty(t, metrics, "%s: %s selects no metric", name, e)
			for _, m := range metrics {
				if _, ok := allowed[m]; !ok {
					t.Errorf("%s: %s uses %s, not a verified metric", name, e, m)
				}
			}
		}
	}
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

type dashPanel struct {
	Title, Type string
	Targets     []struct{ Expr string }
	Panels      []dashPanel
}

func flatPanels(ps []dashPanel) []dashPanel {
	var out []dashPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, flatPanels(p.Panels)...)
	}
	return out
}

// TestMonitoringRules: every rule's expression parses and uses verified metrics or recording rules
// defined before it is used; every alert has a severity and a runbook_url naming a file of
// docs/runbooks/ that exists (auditor check enforces the same, rule alert-runbook) — its own,
// docs/runbooks/<alert>.md, or a shared procedure such as a restore —, and every runbook is some
// alert's.
func TestMonitoringRules(t *testing.T) {
	allowed := knownSeries()
	rules := ruleList(t, renderRepo(t, "prod").Objects)
	require.NotEmpty(t, rules)
	linked := map[string]bool{}
	for _, r := range rules {
		metrics, err := parseMetrics(r.Expr)
		require.NoError(t, err, "%s group %s %s%s: %s", r.Object, r.Group, r.Record, r.Alert, r.Expr)
		for _, m := range metrics {
			if _, ok := allowed[m]; !ok {
				t.Errorf("%s %s%s uses %s, neither a verified metric nor an earlier recording rule", r.Object, r.Record, r.Alert, m)
			}
		}
		if r.Record != "" {
			allowed[r.Record] = "recording rule"
			continue
		}
		assert.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"], "alert %s severity", r.Alert)
		link := r.Annotations["runbook_url"]
		_, page, ok := strings.Cut(link, "/blob/main/docs/runbooks/")
		if assert.True(t, ok && strings.HasSuffix(page, ".md") && !strings.Contains(page, "/"), "alert %s: runbook_url %q, want .../blob/main/docs/runbooks/<page>.md", r.Alert, link) {
			_, err := os.Stat(filepath.Join("../../../docs/runbooks", page))
			assert.NoError(t, err, "alert %s: runbook", r.Alert)
			linked[strings.TrimSuffix(page, ".md")] = true
		}
	}
	pages, err := filepath.Glob("../../../docs/runbooks/*.md")
	require.NoError(t, err)
	var orphans []string
	for _, p := range pages {
		if name := strings.TrimSuffix(filepath.Base(p), ".md"); name != "README" && !linked[name] {
			orphans = append(orphans, name)
		}
	}
	sort.Strings(orphans)
	assert.Empty(t, orphans, "runbooks of no alert")
}

// TestMonitoringRevisionLabels: the per-revision rules group by model_revision, which the
// ServiceMonitor vllm copies from the pod label platform.llm/model-version: every pod a vllm
// Service selects carries it. The cost rules count one GPU per vLLM pod and price it by the node's
// accelerator label: every vLLM pod asks exactly one GPU, and every card a GPU NodePool labels
// has a price.
func TestMonitoringRevisionLabels(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			objs := renderRepo(t, env).Objects
			var sm *unstructured.Unstructured
			for _, o := range monitoringObjects(objs, "ServiceMonitor") {
				if o.GetName() == "vllm" {
					sm = o
				}
			}
			require.NotNil(t, sm, "ServiceMonitor vllm")
			relabel := fmt.Sprint(sm.Object["spec"])
			require.Contains(t, relabel, "__meta_kubernetes_pod_label_platform_llm_model_version")
			require.Contains(t, relabel, "__meta_kubernetes_node_label_accelerator")

			selected := 0
			for _, svc := range objs {
				if svc.GetKind() != "Service" || svc.GetNamespace() != "llm-inference" || svc.GetLabels()["platform.llm/component"] != "vllm" {
					continue
				}
				sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
				for _, o := range objs {
					pod := podTemplate(o)
					if pod == nil || o.GetNamespace() != svc.GetNamespace() || !matches(sel, podLabels(pod)) {
						continue
					}
					selected++
					assert.NotEmpty(t, podLabels(pod)["platform.llm/model-version"], "%s (behind Service %s) has no pod label platform.llm/model-version", id(o), svc.GetName())
					n, ok := gpuCount(pod, "limits")
					assert.True(t, ok && n == 1, "%s: %d GPUs; the cost rules count one per vLLM pod", id(o), n)
				}
			}
			assert.GreaterOrEqual(t, selected, 2)

			prices := map[string]bool{}
			for _, r := range ruleList(t, objs) {
				if r.Record == "llm:gpu_price_usd_per_hour" {
					prices[r.Labels["accelerator"]] = true
				}
			}
			assert.True(t, prices[gpuCard(t, objs)], "no llm:gpu_price_usd_per_hour for accelerator %s", gpuCard(t, objs))
		})
	}
}

func podLabels(pod map[string]any) map[string]string {
	l, _, _ := unstructured.NestedStringMap(pod, "metadata", "labels")
	return l
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestAuditorMetricsListed keeps auditorMetrics equal to the metric names internal/daemon
// registers, so the auditor's dashboard and alerts follow the daemon.
func TestAuditorMetricsListed(t *testing.T) {
	files, err := filepath.Glob("../../daemon/*.go")
	require.NoError(t, err)
	name := regexp.MustCompile(`Name:\s*"(auditor_[a-z_]+)"`)
	found := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range name.FindAllStringSubmatch(string(data), -1) {
			found[m[1]] = true
		}
	}
	var registered, listed []string
	for n := range found {
		registered = append(registered, n)
	}
	for n := range auditorMetrics {
		listed = append(listed, n)
	}
	sort.Strings(registered)
	sort.Strings(listed)
	assert.Equal(t, registered, listed)
}
