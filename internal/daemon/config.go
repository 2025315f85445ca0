package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
)

// Config is the daemon's configuration file (YAML). Secrets — webhook URLs, bot tokens, the Git
// webhook secret — are never in it: it names files or environment variables that hold them.
type Config struct {
	// Repo is the GitOps repository: a URL (file://, https://, ssh://) or a local directory.
	Repo string `json:"repo"`
	// RepoAuth holds Repo's credentials, read from files at every fetch (a rotated Secret is
	// picked up): username + passwordFile (HTTPS token or password), or sshKeyFile +
	// knownHostsFile. Its url is Repo's.
	RepoAuth gitrepo.RemoteConfig `json:"repoAuth,omitempty"`
	// FetchTimeout bounds one Git fetch (default 30s): a stalled server delays audits by at most
	// this, after which the last fetched revision keeps being audited.
	FetchTimeout Duration `json:"fetchTimeout,omitempty"`
	// Envs are the environments to audit: each found by its root Application (Roots, the
	// repository's .auditor.yaml, or rootNamePrefix), its selection (Applications), or its own
	// Application (appNamePrefix).
	Envs []string `json:"envs"`
	// Kubeconfig and Context select the cluster; empty Kubeconfig means in-cluster config when
	// running in a pod, else the usual kubectl loading rules.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	// WatchNamespaces, when set, are the only namespaces whose objects the auditor watches (one
	// informer per namespace and kind): it then needs read rights there only, Secrets included.
	// A namespaced object Git puts elsewhere is reported Unknown, naming its namespace.
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
	// AppNamespace (key argocdNamespace) and AppNamePrefix locate each env's own Argo CD Application
	// (<prefix><env>; absent: llm-; "" names it <env>; none for Roots); left out, the layout may.
	AppNamespace  string  `json:"argocdNamespace,omitempty"`
	AppNamePrefix *string `json:"appNamePrefix,omitempty"`
	// DeprecatedAppNamespace is argocdNamespace's old name, appNamespace: still read.
	DeprecatedAppNamespace string `json:"appNamespace,omitempty"`
	// appNamespaceDefault says AppNamespace is validate's default, not the file's.
	appNamespaceDefault bool
	// AppNamespaces are more namespaces holding Applications (Argo CD's apps in any namespace:
	// its --application-namespaces): the daemon watches Applications there too, and a selection
	// may pick from them. The daemon needs read access to Applications there.
	AppNamespaces []string `json:"appNamespaces,omitempty"`
	// Clusters are the clusters besides Kubeconfig's that Applications sync to, each with the
	// auditor's own read-only kubeconfig, matched to a destination by server URL, else name.
	Clusters []fleet.Cluster `json:"clusters,omitempty"`
	// RootNamePrefix names each env's root Application (<prefix><env>; absent: root-): when the
	// cluster has it, the env is every Application under it, the Applications themselves included.
	RootNamePrefix *string `json:"rootNamePrefix,omitempty"`
	// Roots names an env's root Application (env → name in argocdNamespace): the env is the root's
	// tree (and its selection), with no Application of its own; this wins over .auditor.yaml's root:.
	Roots map[string]string `json:"roots,omitempty"`
	// Applications picks, per env, Applications from the cluster into the env's group beside its
	// root's tree (those an ApplicationSet of the group generated are always in it): see
	// AppSelectionConfig. Git holds no manifest of such an Application; its objects are
	// compared with its live source's render.
	Applications map[string]AppSelectionConfig `json:"applications,omitempty"`
	// ArgoCDURL, when set, links reports to the Argo CD UI.
	ArgoCDURL string `json:"argocdURL,omitempty"`
	// Listen is the HTTP address (default :8080).
	Listen string `json:"listen,omitempty"`
	// StateDir keeps the outboxes and the drift tracker across restarts.
	StateDir string `json:"stateDir"`
	// FetchInterval is how often Git is fetched (default 1m); a push webhook fetches at once.
	FetchInterval Duration `json:"fetchInterval,omitempty"`
	// ResyncInterval is how often every env is audited in full even when neither Git nor the
	// Application moved (default 5m): it takes up what no watch reports, such as argocd-cm's
	// customizations and a CRD's new schema. Between, watch events re-audit what they touched.
	ResyncInterval Duration `json:"resyncInterval,omitempty"`
	// Debounce groups watch events before a re-audit (default 50ms).
	Debounce Duration `json:"debounce,omitempty"`
	// FoldWindow folds drift that follows a first report into one digest (default 10s).
	FoldWindow Duration `json:"foldWindow,omitempty"`
	// AuditWorkers is how many envs are audited at once (default 1). Each full audit holds its
	// env's render and live objects in memory: two at once need about twice the peak.
	AuditWorkers int `json:"auditWorkers,omitempty"`
	// Webhook enables POST /api/v1/git-webhook, authenticated by a shared secret (GitHub HMAC or
	// GitLab token); absent, Git is fetched on the interval only.
	Webhook *WebhookConfig `json:"webhook,omitempty"`
	// API guards /api/v1/drift and /api/v1/status, which show live values.
	API APIConfig `json:"api,omitempty"`
	// LeaderElection makes only one replica post.
	LeaderElection LeaderElectionConfig `json:"leaderElection,omitempty"`
	// Sinks are the chat destinations.
	Sinks []SinkConfig `json:"sinks,omitempty"`
	// Dispatch tunes delivery: backoff, rate limit.
	Dispatch DispatchConfig `json:"dispatch,omitempty"`
	// Schedule fires clusters/<env>/schedule.yaml in-process (scale-ups as Git commits).
	Schedule ScheduleConfig `json:"schedule,omitempty"`
	// Ledger keeps the model ledger in Git as revisions get synced.
	Ledger LedgerConfig `json:"ledger,omitempty"`
	// OutboxMax bounds each sink's on-disk outbox (default outbox.DefaultOutboxMax).
	OutboxMax int `json:"outboxMax,omitempty"`
	// Controllers name the controllers that own fields Git also declares (an autoscaler on
	// replicas): a value they wrote there is not drift. They add to drift.DefaultControllers
	// unless NoDefaultControllers is set.
	Controllers          []ControllerConfig `json:"controllers,omitempty"`
	NoDefaultControllers bool               `json:"noDefaultControllers,omitempty"`
	// Identities are the users each field manager's controller authenticates as (path.Match
	// patterns), added to drift.DefaultIdentities: with audit events, a controller rule or a
	// creator's name counts only for writes made by one of them.
	Identities map[string][]string `json:"identities,omitempty"`
	// Extra says which undeclared objects are searched for as made by hand.
	Extra ExtraConfig `json:"extra,omitempty"`
	// IgnoreClearedManagedFields stops reporting objects without field owners as cleared by a
	// write: on a cluster upgraded in place from before Kubernetes 1.18, objects made then and
	// never applied server-side since have none.
	IgnoreClearedManagedFields bool `json:"ignoreClearedManagedFields,omitempty"`
	// AuditEvents names the people behind drift from the API server's audit events.
	AuditEvents AuditEventsConfig `json:"auditEvents,omitempty"`
	// Episodes bounds the drift history kept in the state dir.
	Episodes EpisodesConfig `json:"episodes,omitempty"`
	// RenderInProcess runs kustomize inside the daemon instead of in a child process of the
	// daemon's own binary (the default): the daemon's heap then grows to each render's peak
	// (about 1.1 GiB at 10,000 objects) and keeps some of it.
	RenderInProcess bool `json:"renderInProcess,omitempty"`
	// RepoServer, when set, renders each Application by Argo CD's repo-server, as Argo CD's
	// controller asks it (address, plaintext or TLS with strictTLS and caFile, timeout): the
	// objects compared are then exactly the ones Argo CD applies. The auditor needs the network
	// path to it (Argo CD's NetworkPolicy admits only its own components by default). Unset, the
	// auditor renders in process with the libraries Argo CD's repo-server runs.
	RepoServer *reposerver.Config `json:"repoServer,omitempty"`
}

// EpisodesConfig bounds the ended drift episodes kept (open ones are always kept).
type EpisodesConfig struct {
	// Keep is how many ended episodes are kept (default episode.DefaultKeep).
	Keep int `json:"keep,omitempty"`
	// MaxAge drops ended episodes older than this (default episode.DefaultMaxAge, 30 days).
	MaxAge Duration `json:"maxAge,omitempty"`
}

// AuditEventsConfig says where audit events come from (either or both).
type AuditEventsConfig struct {
	// Webhook accepts kube-apiserver's audit webhook backend on POST /api/v1/audit-events,
	// behind the API's authentication (auth kubernetes: create on audit-events.auditor.platform.llm).
	Webhook bool `json:"webhook,omitempty"`
	// File follows a JSON-lines audit log (kube-apiserver --audit-log-path, or a managed
	// cluster's log export written to a file).
	File string `json:"file,omitempty"`
	// Admission serves a validating admission webhook that observes writes to Argo CD's own
	// cluster (it never refuses one): the source that works on a managed cluster (EKS, GKE, AKS),
	// whose kube-apiserver flags nobody can set. See docs/audit.md.
	Admission *AdmissionConfig `json:"admission,omitempty"`
	// Max bounds the events held in memory (default auditlog.DefaultMax).
	Max int `json:"max,omitempty"`
}

// AdmissionConfig is the admission webhook's listener: HTTPS, as the API server calls webhooks.
type AdmissionConfig struct {
	// Listen is its address (default ":8443"); POST /api/v1/admission.
	Listen string `json:"listen,omitempty"`
	// CertFile and KeyFile are its serving certificate and key (PEM), read again when they
	// change (cert-manager renews them in place). The ValidatingWebhookConfiguration's caBundle
	// must hold their CA.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ClientCAFile, when set, admits only callers with a client certificate it signed (a
	// self-managed kube-apiserver given a client certificate for webhooks in its
	// AdmissionConfiguration). Managed clusters present none: keep the port reachable from the
	// API server only (a NetworkPolicy).
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// enabled says whether any source is configured.
func (a AuditEventsConfig) enabled() bool { return a.Webhook || a.File != "" || a.Admission != nil }

// ControllerConfig is a drift.ControllerRule for some envs (every env when Envs is empty).
type ControllerConfig struct {
	drift.ControllerRule
	Envs []string `json:"envs,omitempty"`
}

// controllersFor returns the controller rules of env.
func (c *Config) controllersFor(env string) []drift.ControllerRule {
	var out []drift.ControllerRule
	if !c.NoDefaultControllers {
		out = append(out, drift.DefaultControllers...)
	}
	for _, r := range c.Controllers {
		if len(r.Envs) == 0 || slices.Contains(r.Envs, env) {
			out = append(out, r.ControllerRule)
		}
	}
	return out
}

// WebhookConfig names where the shared secret is. A webhook without one is refused unless
// Insecure says to accept any push (a fetch is all a push can cause).
type WebhookConfig struct {
	SecretFile string `json:"secretFile,omitempty"`
	SecretEnv  string `json:"secretEnv,omitempty"`
	Insecure   bool   `json:"insecure,omitempty"`
}

// API authentication modes.
const (
	// APIAuthKubernetes checks the bearer token with a TokenReview and the user's right to get
	// the route's virtual resource (drift or status in auditor.platform.llm) with a
	// SubjectAccessReview, as kube-rbac-proxy does.
	APIAuthKubernetes = "kubernetes"
	// APIAuthToken compares the bearer token with the one in TokenFile.
	APIAuthToken = "token"
	// APIAuthNone leaves the API open.
	APIAuthNone = "none"
)

// APIConfig says how API callers authenticate: auth is kubernetes (the default), token or none.
type APIConfig struct {
	Auth      string `json:"auth,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	// Pprof serves Go's profiles at /debug/pprof/ under the same authentication (with auth
	// kubernetes, the right to get pprof in auditor.platform.llm). Off by default: a heap profile
	// holds the process' memory.
	Pprof bool `json:"pprof,omitempty"`
	// MCPTools are the only MCP tools /mcp serves (by name); every one when empty.
	MCPTools []string `json:"mcpTools,omitempty"`
}

// LeaderElectionConfig configures the Lease lock.
type LeaderElectionConfig struct {
	Enabled   bool   `json:"enabled"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Identity defaults to $POD_NAME, else the host name and pid.
	Identity      string   `json:"identity,omitempty"`
	LeaseDuration Duration `json:"leaseDuration,omitempty"`
	RenewDeadline Duration `json:"renewDeadline,omitempty"`
	RetryPeriod   Duration `json:"retryPeriod,omitempty"`
	// Shard spreads the work over the replicas: each cluster (Argo CD's own and each of
	// clusters) is audited, and its drift posted, by one replica, picked by consistent hashing
	// over the replicas' membership Leases. The leader keeps the schedules and the ledger.
	Shard bool `json:"shard,omitempty"`
}

// SinkConfig is one chat destination; exactly one of Slack, Mattermost, Telegram.
type SinkConfig struct {
	Name       string                  `json:"name"`
	Slack      *sinks.SlackConfig      `json:"slack,omitempty"`
	Mattermost *sinks.MattermostConfig `json:"mattermost,omitempty"`
	Telegram   *sinks.TelegramConfig   `json:"telegram,omitempty"`
}

// DispatchConfig tunes every sink's dispatcher.
type DispatchConfig struct {
	BackoffBase Duration `json:"backoffBase,omitempty"`
	BackoffMax  Duration `json:"backoffMax,omitempty"`
	// Rate is messages per second per sink; Burst the bucket size.
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
}

// Duration is a time.Duration written as "30s", "1m".
type Duration struct{ time.Duration }

// UnmarshalJSON reads "30s" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: %w", err)
		}
		d.Duration = time.Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

var envRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// LoadConfig reads and validates a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	// ${VAR} (braces only) is taken from the environment: the same file serves every env.
	data = envRef.ReplaceAllFunc(data, func(m []byte) []byte { return []byte(os.Getenv(string(m[2 : len(m)-1]))) })
	return parseConfig(path, data)
}

// parseConfig decodes a configuration, fills its defaults and validates it; path names it in
// errors.
func parseConfig(path string, data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := c.validate(); err != nil { // its defaults first
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &c, nil
}
