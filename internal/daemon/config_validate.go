package daemon

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/llm-gitops/platform/internal/daemon/mcp"
	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

// pathName is what a name that becomes a file or directory under the state dir may be.
var pathName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// validate fills the defaults the file left out (withDefaults), then checks it: decode →
// defaults → validate.
func (c *Config) validate() error {
	if d := c.DeprecatedAppNamespace; d != "" && c.AppNamespace != "" && d != c.AppNamespace {
		return fmt.Errorf("appNamespace %q and argocdNamespace %q: appNamespace is argocdNamespace's deprecated name; keep argocdNamespace", d, c.AppNamespace)
	}
	c.withDefaults()
	for _, check := range []func() error{c.checkBasics, c.checkClusters, c.checkSinksAndAPI, c.checkScope, c.checkControllersAndRoots} {
		if err := check(); err != nil {
			return err
		}
	}
	return c.checkSelectionNamespaces(c.AppNamespace)
}

// checkBasics checks the repository, the envs, the state dir, leader election and the watched namespaces.
func (c *Config) checkBasics() error {
	if c.Repo == "" {
		return fmt.Errorf("repo is required")
	}
	if len(c.Envs) == 0 {
		return fmt.Errorf("envs: at least one environment is required")
	}
	if c.AuditEvents.Webhook && c.API.Auth != "" && c.API.Auth != APIAuthKubernetes {
		return fmt.Errorf("auditEvents.webhook needs api.auth: kubernetes (kube-apiserver's webhook with an identity of its own, allowed to create audit-events.%s): with a shared token or none, whoever reaches the API could post events naming anyone", APIGroup)
	}
	if a := c.AuditEvents.Admission; a != nil && (a.CertFile == "" || a.KeyFile == "") {
		return fmt.Errorf("auditEvents.admission needs certFile and keyFile: the API server calls webhooks over HTTPS only")
	}
	if c.RepoAuth.URL != "" {
		return fmt.Errorf("repoAuth: url is repo's; leave it out")
	}
	if c.StateDir == "" {
		return fmt.Errorf("stateDir is required (outboxes and drift state live there)")
	}
	if c.LeaderElection.Shard && !c.LeaderElection.Enabled {
		return fmt.Errorf("leaderElection.shard needs leaderElection.enabled: the replicas share the work over Leases")
	}
	if c.LeaderElection.Shard {
		for _, cl := range c.Clusters {
			if !dnsLabel.MatchString(cl.Name) {
				return fmt.Errorf("clusters: name %q: with leaderElection.shard each cluster names a Lease, so it must be a DNS label (lower case, digits, '-', no dots)", cl.Name)
			}
		}
	}
	for _, env := range c.Envs {
		if !pathName.MatchString(env) {
			return fmt.Errorf("envs: %q is not a valid env name (lower-case letters, digits, . _ -)", env)
		}
	}
	for env, sel := range c.Applications {
		if err := sel.validate(env, c.Envs); err != nil {
			return err
		}
	}
	for _, ns := range c.WatchNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("watchNamespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// checkClusters checks the member clusters: names, servers and kubeconfigs, each once.
func (c *Config) checkClusters() error {
	clusters := map[string]bool{}
	for i, cl := range c.Clusters {
		server := strings.TrimRight(cl.Server, "/")
		switch {
		case cl.Name == "" || cl.Server == "" || cl.Kubeconfig == "":
			return fmt.Errorf("clusters[%d]: name, server and kubeconfig are required", i)
		case len(validation.IsDNS1123Subdomain(cl.Name)) > 0:
			return fmt.Errorf("clusters[%d]: name %q: lower-case letters, digits, - and . (reports and chat keys carry it)", i, cl.Name)
		case clusters["name "+cl.Name] || clusters[server]:
			return fmt.Errorf("clusters[%d] (%s): a second cluster of that name or server", i, cl.Name)
		case server == "https://kubernetes.default.svc" || cl.Name == "in-cluster":
			return fmt.Errorf("clusters[%d] (%s): Argo CD's own cluster is the one kubeconfig reads", i, cl.Name)
		}
		clusters["name "+cl.Name], clusters[server] = true, true
		for _, ns := range cl.WatchNamespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("clusters[%d] (%s): watchNamespaces: %q is not a namespace name", i, cl.Name, ns)
			}
		}
	}
	return nil
}

// checkSinksAndAPI checks the chat sinks (exactly one kind each, unique names), the Git webhook and the API.
func (c *Config) checkSinksAndAPI() error {
	seen := map[string]bool{}
	for i, s := range c.Sinks {
		n := 0
		for _, set := range []bool{s.Slack != nil, s.Mattermost != nil, s.Telegram != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("sinks[%d] (%s): exactly one of slack, mattermost, telegram", i, s.Name)
		}
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("sinks[%d]: a unique name is required", i)
		}
		if !pathName.MatchString(s.Name) || len(s.Name) > 40 { // it names the sink's outbox directory and Lease annotation
			return fmt.Errorf("sinks[%d]: name %q is not a valid name (up to 40 lower-case letters, digits, . _ -)", i, s.Name)
		}
		seen[s.Name] = true
	}
	if w := c.Webhook; w != nil && w.SecretFile == "" && w.SecretEnv == "" && !w.Insecure {
		return fmt.Errorf("webhook: a secret is required (secretFile or secretEnv); set insecure: true to accept unauthenticated pushes")
	}
	switch c.API.Auth {
	case APIAuthKubernetes, APIAuthNone:
	case APIAuthToken:
		if c.API.TokenFile == "" {
			return fmt.Errorf("api: auth token needs tokenFile")
		}
	default:
		return fmt.Errorf("api: auth %q (want kubernetes, token or none)", c.API.Auth)
	}
	for _, name := range c.API.MCPTools {
		if !slices.Contains(mcp.Tools, name) {
			return fmt.Errorf("api: mcpTools: no tool %q (tools: %s)", name, strings.Join(mcp.Tools, ", "))
		}
	}
	return nil
}

// checkScope checks what is searched for as Extra and the controllers' identities, every error at once.
func (c *Config) checkScope() error {
	var errs []error
	for i, k := range c.Extra.Kinds {
		if parseGVK(k).Kind == "" {
			errs = append(errs, fmt.Errorf("extra.kinds[%d]: %q is not group/version/Kind (v1/Secret, cert-manager.io/v1/Certificate)", i, k))
		}
	}
	for i, k := range c.Extra.Except {
		if gk := parseGroupKind(k); gk.Kind == "" || strings.Contains(gk.Group, "/") {
			errs = append(errs, fmt.Errorf("extra.except[%d]: %q is not group/Kind (scheduling.k8s.io/PriorityClass, or Namespace for the core group)", i, k))
		}
	}
	for i, sel := range c.Extra.Ignore {
		if _, err := labels.Parse(sel); err != nil {
			errs = append(errs, fmt.Errorf("extra.ignore[%d]: %w", i, err))
		}
	}
	for i, o := range c.Extra.Own {
		if _, ok := parseRef(o); !ok {
			errs = append(errs, fmt.Errorf("extra.own[%d]: %q is not group/Kind:namespace/name (rbac.authorization.k8s.io/RoleBinding:llm-rag/auditor-read)", i, o))
		}
	}
	for m, users := range c.Identities {
		for _, u := range users {
			if _, err := path.Match(u, ""); err != nil {
				errs = append(errs, fmt.Errorf("identities.%s: pattern %q: %w", m, u, err))
			}
		}
	}
	return errors.Join(errs...)
}

// checkControllersAndRoots checks the controller rules, the roots and the Application namespaces.
func (c *Config) checkControllersAndRoots() error {
	for i, r := range c.Controllers {
		if r.Manager == "" {
			return fmt.Errorf("controllers[%d]: manager is required", i)
		}
		for _, p := range r.Paths {
			if !strings.HasPrefix(p, "/") {
				return fmt.Errorf("controllers[%d] (%s): path %q is not a JSON pointer (RFC 6901, e.g. /spec/replicas)", i, r.Manager, p)
			}
		}
		for _, env := range r.Envs {
			if !slices.Contains(c.Envs, env) {
				return fmt.Errorf("controllers[%d] (%s): env %q is not one of envs %v", i, r.Manager, env, c.Envs)
			}
		}
	}
	for env, root := range c.Roots {
		if !slices.Contains(c.Envs, env) {
			return fmt.Errorf("roots: %q is not one of envs %v", env, c.Envs)
		}
		if errs := validation.IsDNS1123Subdomain(root); len(errs) > 0 {
			return fmt.Errorf("roots.%s: %q is not an Application name (%s)", env, root, strings.Join(errs, "; "))
		}
	}
	for _, ns := range c.AppNamespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("appNamespaces: %q is not a namespace name (%s)", ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

// checkSelectionNamespaces checks that each selection picks Applications in appNS (the envs'
// namespace) or one of AppNamespaces.
func (c *Config) checkSelectionNamespaces(appNS string) error {
	from := ""
	if appNS != c.AppNamespace {
		from = ", from the repository's layout"
	}
	for env, sel := range c.Applications {
		for _, ns := range sel.Namespaces {
			if ns != appNS && !slices.Contains(c.AppNamespaces, ns) {
				// The daemon watches Applications there only: elsewhere a new or edited
				// Application would go unseen.
				return fmt.Errorf("applications.%s.namespaces: %q is neither argocdNamespace (%s%s) nor one of appNamespaces: the daemon watches Applications there only", env, ns, appNS, from)
			}
		}
	}
	return nil
}

func newSink(sc SinkConfig) (sinks.Sink, error) {
	switch {
	case sc.Slack != nil:
		return sinks.NewSlack(*sc.Slack)
	case sc.Mattermost != nil:
		return sinks.NewMattermost(*sc.Mattermost)
	default:
		return sinks.NewTelegram(*sc.Telegram)
	}
}

// validate checks the selection of env.
func (c AppSelectionConfig) validate(env string, envs []string) error {
	if !slices.Contains(envs, env) {
		return fmt.Errorf("applications: %q is not one of envs %v", env, envs)
	}
	if len(c.Projects) == 0 && strings.TrimSpace(c.Selector) == "" {
		return fmt.Errorf("applications.%s: projects or selector is required (neither would pick every Application)", env)
	}
	if _, err := labels.Parse(c.Selector); err != nil {
		return fmt.Errorf("applications.%s.selector: %w", env, err)
	}
	for _, ns := range c.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("applications.%s.namespaces: %q is not a namespace name: %s", env, ns, strings.Join(errs, "; "))
		}
	}
	return nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
