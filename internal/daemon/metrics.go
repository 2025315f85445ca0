package daemon

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// metrics are the daemon's Prometheus series; a registry of its own keeps tests independent.
type metrics struct {
	reg            *prometheus.Registry
	driftedObjects *prometheus.GaugeVec
	driftedFields  *prometheus.GaugeVec
	auditDuration  *prometheus.HistogramVec
	lastSuccess    *prometheus.GaugeVec
	auditErrors    *prometheus.CounterVec
	gitLastFetch   prometheus.Gauge
	gitFetchErrors prometheus.Counter
	leader         prometheus.Gauge
	episodesOpen   *prometheus.GaugeVec
	episodeLength  *prometheus.HistogramVec
	applications   *prometheus.GaugeVec
	notAudited     *prometheus.GaugeVec // the Applications of applications that could not be audited
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		driftedObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_drifted_objects",
			Help: "Objects drifted from Git, per env and kind."}, []string{"env", "kind"}),
		driftedFields: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_drifted_fields",
			Help: "Drifted fields, per env and kind (a Missing or Extra object counts one)."}, []string{"env", "kind"}),
		auditDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "auditor_audit_duration_seconds",
			Help: "Duration of one audit of one env.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"env"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_last_success_timestamp_seconds",
			Help: "Unix time of the last successful audit, per env."}, []string{"env"}),
		auditErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "auditor_audit_errors_total",
			Help: "Audits that failed, per env."}, []string{"env"}),
		gitLastFetch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "auditor_git_last_fetch_success_timestamp_seconds",
			Help: "Unix time of the last successful Git fetch."}),
		gitFetchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "auditor_git_fetch_errors_total",
			Help: "Git fetches that failed (the last good revision keeps being audited)."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "auditor_leader", Help: "1 when this replica posts reports."}),
		episodesOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_drift_episodes_open",
			Help: "Drift episodes still open (a drifted field, or a Missing or Extra object), per env and kind."}, []string{"env", "kind"}),
		// 1 s to ~3 days (4^9 s): a selfHeal revert to a drift left over a long weekend.
		episodeLength: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "auditor_drift_episode_duration_seconds",
			Help:    "How long ended drift episodes stood, per env and how they ended (reverted, adopted, overwritten, deleted, dropped).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"env", "how"}),
	}
	m.applications = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_application_audited",
		Help: "1 for each Application this replica audited in its last audit of the env, with its cluster (replicas that share the work audit each Application once)."},
		[]string{"env", "application", "cluster"})
	m.notAudited = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_application_not_audited",
		Help: "1 for each Application this replica could not audit in its last audit of the env (its chart repository or cluster unreachable, its source not rendering): its objects were not compared."},
		[]string{"env", "application", "cluster"})
	m.reg.MustRegister(m.applications, m.notAudited, m.driftedObjects, m.driftedFields, m.auditDuration, m.lastSuccess, m.auditErrors,
		m.gitLastFetch, m.gitFetchErrors, m.leader, m.episodesOpen, m.episodeLength, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// sinkMetrics exposes a dispatcher's counters.
func (m *metrics) sinkMetrics(name string, d *outbox.Dispatcher) {
	l := prometheus.Labels{"sink": name}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_sink_failures_total", Help: "Failed deliveries to a sink.", ConstLabels: l},
			func() float64 { return float64(d.SinkFailures()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_sink_sent_total", Help: "Messages delivered to a sink.", ConstLabels: l},
			func() float64 { return float64(d.Sent()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "auditor_outbox_depth", Help: "Messages waiting in a sink's outbox.", ConstLabels: l},
			func() float64 { return float64(d.OutboxDepth()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_outbox_dropped_total", Help: "Messages dropped because the outbox was full.", ConstLabels: l},
			func() float64 { return float64(d.Dropped()) }),
	)
}

// observe records one env's report.
func (m *metrics) observe(rep *drift.Report) {
	m.driftedObjects.DeletePartialMatch(prometheus.Labels{"env": rep.Env})
	m.driftedFields.DeletePartialMatch(prometheus.Labels{"env": rep.Env})
	m.applications.DeletePartialMatch(prometheus.Labels{"env": rep.Env})
	m.notAudited.DeletePartialMatch(prometheus.Labels{"env": rep.Env})
	for _, app := range rep.Applications {
		m.applications.WithLabelValues(rep.Env, app.Name, shardOf(app.Cluster)).Set(1)
		if app.Error != "" {
			m.notAudited.WithLabelValues(rep.Env, app.Name, shardOf(app.Cluster)).Set(1)
		}
	}
	for _, o := range rep.Objects {
		m.driftedObjects.WithLabelValues(rep.Env, o.Kind).Inc()
		n := len(o.Fields)
		if n == 0 {
			n = 1
		}
		m.driftedFields.WithLabelValues(rep.Env, o.Kind).Add(float64(n))
	}
}

// episodes records one env's open episodes and the episodes that just ended. Only the leader
// observes durations: every replica ends the same episodes, and a sum over replicas would count
// each once per replica.
func (m *metrics) episodes(env string, open, ended []episode.Episode, leader bool) {
	m.episodesOpen.DeletePartialMatch(prometheus.Labels{"env": env})
	for _, e := range open {
		m.episodesOpen.WithLabelValues(env, e.Kind).Inc()
	}
	for _, e := range ended {
		if !leader {
			break
		}
		m.episodeLength.WithLabelValues(env, e.End.How).Observe(e.Duration(e.End.At).Seconds())
	}
}

// reachability is auditor_cluster_reachable: per cluster of the clusters config that this replica
// probes (with shards, those it audits), whether it answered the last probe. A cluster another
// replica audits has no series here: its holder's says.
type reachability struct {
	fleet  *fleet.Fleet
	probed func(cluster string) bool

	mu  sync.Mutex // one scrape at a time sets the series
	vec *prometheus.GaugeVec
}

func newReachability(f *fleet.Fleet, probed func(string) bool) *reachability {
	return &reachability{fleet: f, probed: probed, vec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "auditor_cluster_reachable",
		Help: "Whether the cluster answered the auditor's last probe (1) or not (0), per cluster of the clusters config this replica audits."},
		[]string{"cluster"})}
}

func (r *reachability) Describe(ch chan<- *prometheus.Desc) { r.vec.Describe(ch) }

func (r *reachability) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vec.Reset()
	for _, st := range r.fleet.Status() {
		if !r.probed(st.Name) {
			continue
		}
		v := 0.0
		if st.Reachable {
			v = 1
		}
		r.vec.WithLabelValues(st.Name).Set(v)
	}
	r.vec.Collect(ch)
}
