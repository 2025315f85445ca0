package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// ArgoCDNamespace is where Argo CD's components read their configuration and Applications.
const ArgoCDNamespace = "argocd"

// AppNamespacesGlob matches the other namespaces Argo CD's controller takes Applications from
// (for an AppProject whose sourceNamespaces allow them).
const AppNamespacesGlob = "*-apps"

// argoConfigFiles are Argo CD's own configuration objects, as its install manifests define them.
var argoConfigFiles = []string{
	"manifests/base/config/argocd-cm.yaml", "manifests/base/config/argocd-cmd-params-cm.yaml",
	"manifests/base/config/argocd-rbac-cm.yaml", "manifests/base/config/argocd-secret.yaml",
	"manifests/base/config/argocd-ssh-known-hosts-cm.yaml", "manifests/base/config/argocd-tls-certs-cm.yaml",
	"manifests/base/config/argocd-gpg-keys-cm.yaml",
}

// NotExercised lists the kinds the platform uses whose controllers do not run in the test cluster
// although Argo CD has a health check for them: KEDA's operator, Karpenter (and its AWS provider), CloudNativePG, a
// Gateway implementation, cert-manager, the External Secrets Operator, and metrics-server (the HPA controller runs, but without the resource
// metrics API it reports FailedGetResourceMetric, which Argo CD calls Degraded and which fails the
// sync that touches it). Without them these objects never get a healthy status and Argo CD would
// hold back every later sync wave, so the test cluster configures their health as Healthy, with a
// message saying it was not exercised.
var NotExercised = map[string]string{
	"autoscaling/HorizontalPodAutoscaler":              "metrics-server",
	"keda.sh/ScaledObject":                             "KEDA's operator",
	"karpenter.sh/NodePool":                            "Karpenter",
	"karpenter.k8s.aws/EC2NodeClass":                   "Karpenter's AWS provider",
	"postgresql.cnpg.io/Cluster":                       "CloudNativePG",
	"postgresql.cnpg.io/Database":                      "CloudNativePG",
	"gateway.networking.k8s.io/Gateway":                "a Gateway API implementation",
	"gateway.networking.k8s.io/HTTPRoute":              "a Gateway API implementation",
	"inference.networking.k8s.io/InferencePool":        "a Gateway API implementation with the inference extension",
	"inference.networking.x-k8s.io/InferenceObjective": "the endpoint picker",
	"cert-manager.io/Certificate":                      "cert-manager",
	"external-secrets.io/ExternalSecret":               "the External Secrets Operator",
}

// argoSettings are what the test cluster adds to argocd-cm.
func argoSettings() map[string]any {
	out := map[string]any{}
	for gk, who := range NotExercised {
		group, kind, _ := strings.Cut(gk, "/")
		out["resource.customizations.health."+group+"_"+kind] = fmt.Sprintf(
			"hs = {}\nhs.status = \"Healthy\"\nhs.message = \"not exercised: %s does not run in the test cluster\"\nreturn hs\n", who)
	}
	return out
}

func (c *Cluster) startArgoCD(ctx context.Context, ports []int) error {
	redisServer, redisArgs := c.bins.Redis, []string{"--addr=127.0.0.1:" + strconv.Itoa(ports[0])}
	if p, err := exec.LookPath("redis-server"); err == nil { // the distribution's, where installed
		redisServer, redisArgs = p, []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--save", "", "--appendonly", "no"}
	}
	if err := need("Argo CD", c.bins.ArgoCD, c.bins.Kustomize, c.bins.Helm, redisServer); err != nil {
		return err
	}
	module, err := ModuleDir(ctx, "github.com/argoproj/argo-cd/v3", ArgoCDVersion)
	if err != nil {
		return err
	}
	if err := c.installArgoConfig(ctx, module); err != nil {
		return err
	}
	redisAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	c.logf("starting redis for Argo CD on %s (%s)", redisAddr, filepath.Base(redisServer))
	redis, err := startProcess(c.Dir, "redis", redisServer, redisArgs, nil, c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, redis)

	work := filepath.Join(c.Dir, "argocd")
	if err := argoWorkDir(work, module); err != nil {
		return err
	}
	common := []string{
		"ARGOCD_FAKE_IN_CLUSTER=true", "KUBECONFIG=" + c.Kubeconfig,
		"ARGOCD_TLS_DATA_PATH=" + filepath.Join(work, "tls"), "ARGOCD_SSH_DATA_PATH=" + filepath.Join(work, "ssh"),
		"ARGOCD_GNUPGHOME=" + filepath.Join(work, "gpg"), "ARGOCD_GPG_ENABLED=false",
		"TMPDIR=" + filepath.Join(work, "tmp"),
		"PATH=" + strings.Join([]string{filepath.Join(work, "bin"), filepath.Dir(c.bins.Kustomize), filepath.Dir(c.bins.Helm), os.Getenv("PATH")}, string(os.PathListSeparator)),
	}
	repoAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	c.logf("starting argocd-repo-server %s on %s", ArgoCDVersion, repoAddr)
	repo, err := startProcess(c.Dir, "argocd-repo-server", c.bins.ArgoCD, []string{
		"--address=127.0.0.1", "--port=" + strconv.Itoa(ports[1]),
		"--metrics-address=127.0.0.1", "--metrics-port=" + strconv.Itoa(ports[2]),
		"--redis=" + redisAddr, "--disable-tls", "--client-ca-path=", "--loglevel=info", "--logformat=text",
	}, append(common, "ARGOCD_BINARY_NAME=argocd-repo-server"), c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, repo)
	c.RepoServer = repoAddr
	if err := waitHTTP(ctx, repo, "http://127.0.0.1:"+strconv.Itoa(ports[2])+"/healthz", nil, 60*time.Second); err != nil {
		return err
	}
	c.logf("starting argocd-application-controller %s (server-side diff on)", ArgoCDVersion)
	ctrl, err := startProcess(c.Dir, "argocd-application-controller", c.bins.ArgoCD, []string{
		"--kubeconfig=" + c.Kubeconfig, "--namespace=" + ArgoCDNamespace,
		"--redis=" + redisAddr, "--repo-server=" + repoAddr, "--repo-server-plaintext",
		"--metrics-port=" + strconv.Itoa(ports[3]),
		"--server-side-diff-enabled=true",
		// Each resource's health in status.resources (off by default since v2.x: kept in the
		// resource tree in Redis), so tests and kubectl read it from the Application.
		"--persist-resource-health=true",
		// Git is compared every 10 s (a default install: 120 s plus up to 60 s of jitter), so
		// a push is synced without a webhook; tests still ask for a refresh and wait for it.
		// selfHeal keeps its defaults: the first attempt at once, then a backoff from 2 s.
		"--app-resync=10", "--app-resync-jitter=0",
		// Applications in any namespace ending -apps too (apps in any namespace), for an
		// AppProject whose sourceNamespaces allow it.
		"--application-namespaces=" + AppNamespacesGlob,
		"--loglevel=info", "--logformat=text",
	}, append(common, "ARGOCD_BINARY_NAME=argocd-application-controller", "HOSTNAME=argocd-application-controller-0"), c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, ctrl)
	c.argoEnv, c.redis = common, redisAddr
	c.ArgoCDMetrics = "127.0.0.1:" + strconv.Itoa(ports[3])
	return waitHTTP(ctx, ctrl, "http://"+c.ArgoCDMetrics+"/healthz", nil, 60*time.Second)
}

// argoWorkDir makes Argo CD's data directories under work, and puts in its bin the scripts of
// Argo CD's module the repo-server runs.
func argoWorkDir(work, module string) error {
	for _, d := range []string{"tls", "ssh", "gpg", "tmp", "bin"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return fmt.Errorf("argocd dirs: %w", err)
		}
	}
	// The repo-server runs these scripts of Argo CD's (its image puts them in /usr/local/bin).
	for _, script := range []string{"git-verify-wrapper.sh", "gpg-wrapper.sh"} {
		data, err := os.ReadFile(filepath.Join(module, "hack", script))
		if err != nil {
			return fmt.Errorf("argocd scripts: %w", err)
		}
		if err := os.WriteFile(filepath.Join(work, "bin", script), data, 0o755); err != nil {
			return fmt.Errorf("argocd scripts: %w", err)
		}
	}
	return nil
}

// startApplicationSets runs Argo CD's ApplicationSet controller (metrics, probe and webhook on
// ports), which makes the Applications of the ApplicationSets in Argo CD's namespace.
func (c *Cluster) startApplicationSets(ctx context.Context, ports []int) error {
	c.logf("starting argocd-applicationset-controller %s", ArgoCDVersion)
	p, err := startProcess(c.Dir, "argocd-applicationset-controller", c.bins.ArgoCD, []string{
		"--kubeconfig=" + c.Kubeconfig, "--namespace=" + ArgoCDNamespace,
		"--argocd-repo-server=" + c.RepoServer, "--repo-server-plaintext",
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(ports[0]), "--probe-addr=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--webhook-addr=127.0.0.1:" + strconv.Itoa(ports[2]),
		"--loglevel=info", "--logformat=text",
	}, append(c.argoEnv, "ARGOCD_BINARY_NAME=argocd-applicationset-controller"), c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	// It registers no health checks (its probe server answers 404): its metrics say it serves.
	return waitHTTP(ctx, p, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/metrics", nil, 60*time.Second)
}

// installArgoConfig writes Argo CD's ConfigMaps and Secret from its module's install manifests,
// argocd-cm with the test cluster's settings added, and the default AppProject argocd-server
// would create.
func (c *Cluster) installArgoConfig(ctx context.Context, dir string) error {
	var objs []*unstructured.Unstructured
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ArgoCDNamespace}}})
	for _, f := range argoConfigFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("argocd config: %w", err)
		}
		docs, err := manifest.Decode(data)
		if err != nil {
			return fmt.Errorf("argocd config %s: %w", f, err)
		}
		for _, o := range docs {
			o.SetNamespace(ArgoCDNamespace)
			if o.GetName() == "argocd-cm" {
				cm, _, _ := unstructured.NestedMap(o.Object, "data")
				if cm == nil {
					cm = map[string]any{}
				}
				for k, v := range argoSettings() {
					cm[k] = v
				}
				o.Object["data"] = cm
			}
			objs = append(objs, o)
		}
	}
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "default", "namespace": ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}})
	return c.apply(ctx, objs, "testcluster")
}

// applyYAML server-side applies every object of a multi-document YAML text.
func (c *Cluster) applyYAML(ctx context.Context, text, manager string) error {
	objs, err := manifest.Decode([]byte(text))
	if err != nil {
		return err
	}
	return c.apply(ctx, objs, manager)
}

func (c *Cluster) apply(ctx context.Context, objs []*unstructured.Unstructured, manager string) error {
	s, err := NewSyncer(c.Config)
	if err != nil {
		return err
	}
	for _, o := range objs {
		// The harness is the tool that manages what it installs (Argo CD, the people's RBAC),
		// and says so as Helm would: the auditor does not take them for hand-made objects.
		o = o.DeepCopy()
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["app.kubernetes.io/managed-by"] = "testcluster"
		o.SetLabels(l)
		if err := s.ApplyAs(ctx, o, manager); err != nil {
			return err
		}
	}
	return nil
}

// WaitSynced waits until Argo CD has synced the Application app (in ArgoCDNamespace, or
// namespace/name) to rev: its
// last sync operation succeeded at rev and its sync status names rev (a multi-source
// Application's first source). A failed operation at rev ends the wait with Argo CD's messages.
func (c *Cluster) WaitSynced(ctx context.Context, app, rev string, timeout time.Duration) error {
	dyn, err := c.Dynamic()
	if err != nil {
		return err
	}
	ns := ArgoCDNamespace
	if n, name, ok := strings.Cut(app, "/"); ok {
		ns, app = n, name
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(ApplicationGVR).Namespace(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				last = err.Error()
			}
			return false, nil
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
		opRev, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "syncResult", "revision")
		syncRev, _, _ := unstructured.NestedString(u.Object, "status", "sync", "revision")
		if revs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "operationState", "syncResult", "revisions"); opRev == "" && len(revs) > 0 {
			opRev = revs[0] // a multi-source Application: its first source's
		}
		if revs, _, _ := unstructured.NestedStringSlice(u.Object, "status", "sync", "revisions"); syncRev == "" && len(revs) > 0 {
			syncRev = revs[0]
		}
		msg, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
		last = fmt.Sprintf("operation %s at %.8s (%s), sync revision %.8s", phase, opRev, msg, syncRev)
		if opRev == rev && (phase == "Failed" || phase == "Error") {
			results, _, _ := unstructured.NestedSlice(u.Object, "status", "operationState", "syncResult", "resources")
			for _, r := range results {
				m, _ := r.(map[string]any)
				if hp, _ := m["hookPhase"].(string); hp == "Failed" || hp == "Error" || m["status"] == "SyncFailed" {
					last += fmt.Sprintf("; %v %v/%v: %v", m["kind"], m["namespace"], m["name"], m["message"])
				}
			}
			return false, fmt.Errorf("sync failed: %s", last)
		}
		return phase == "Succeeded" && opRev == rev && syncRev == rev, nil
	})
	if err != nil {
		return fmt.Errorf("argo CD did not sync %s to %.8s: %w (last seen: %s)", app, rev, err, last)
	}
	return nil
}
