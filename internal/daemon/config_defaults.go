package daemon

import (
	"time"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/outbox"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
)

// The configuration's defaults: a key the file leaves out takes its value here, before
// validate sees the file, and nowhere else.
const (
	DefaultListen = ":8080"
	// DefaultAdmissionListen is where the admission webhook listens (auditEvents.admission).
	DefaultAdmissionListen = ":8443"
	DefaultAppNamespace    = "argocd"
	DefaultFetchTimeout    = 30 * time.Second
	DefaultFetchInterval   = time.Minute
	DefaultResyncInterval  = 5 * time.Minute
	DefaultDebounce        = 50 * time.Millisecond
	DefaultFoldWindow      = 10 * time.Second
	// DefaultAuditWorkers audits one env at a time: the peak memory of one full audit.
	DefaultAuditWorkers = 1
	// The leader Lease's timing, client-go's leader election's usual values.
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// The leader Lease's place when leaderElection names none.
	DefaultLeaseNamespace = "llm-system"
	DefaultLeaseName      = "auditor"
)

// withDefaults fills what the file left out. It runs once, in parseConfig and New (a Config made
// in code gets them too); running it again changes nothing.
func (c *Config) withDefaults() {
	duration(&c.FetchTimeout, DefaultFetchTimeout)
	duration(&c.FetchInterval, DefaultFetchInterval)
	duration(&c.ResyncInterval, DefaultResyncInterval)
	duration(&c.Debounce, DefaultDebounce)
	duration(&c.FoldWindow, DefaultFoldWindow)
	le := &c.LeaderElection
	duration(&le.LeaseDuration, DefaultLeaseDuration)
	duration(&le.RenewDeadline, DefaultRenewDeadline)
	duration(&le.RetryPeriod, DefaultRetryPeriod)
	orDefault(&le.Namespace, DefaultLeaseNamespace)
	orDefault(&le.Name, DefaultLeaseName)
	orDefault(&c.Listen, DefaultListen)
	if c.AppNamespace == "" {
		c.AppNamespace = c.DeprecatedAppNamespace
	}
	if c.AppNamespace == "" {
		c.AppNamespace, c.appNamespaceDefault = DefaultAppNamespace, true // the layout's namespace may replace it (startLayout)
	}
	orDefault(&c.API.Auth, APIAuthKubernetes)
	if c.AuditWorkers <= 0 {
		c.AuditWorkers = DefaultAuditWorkers
	}
	if c.OutboxMax <= 0 {
		c.OutboxMax = outbox.DefaultOutboxMax
	}
	if c.Episodes.Keep <= 0 {
		c.Episodes.Keep = episode.DefaultKeep
	}
	duration(&c.Episodes.MaxAge, episode.DefaultMaxAge)
	if c.AuditEvents.Max <= 0 {
		c.AuditEvents.Max = auditlog.DefaultMax
	}
	if a := c.AuditEvents.Admission; a != nil {
		orDefault(&a.Listen, DefaultAdmissionListen)
	}
}

// duration sets *d to def when it is unset (or not positive).
func duration(d *Duration, def time.Duration) {
	if d.Duration <= 0 {
		d.Duration = def
	}
}

// orDefault sets *s to def when it is empty.
func orDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}
