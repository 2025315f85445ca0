// Package localcluster runs a real Kubernetes control plane — etcd and kube-apiserver, optionally
// kube-scheduler and kube-controller-manager — built from their Go modules, on free loopback ports
// in a temporary directory. Tests start one per package in TestMain; `make cluster-up` starts the
// same cluster detached for people, and `auditor simulate` one for a placement. The test harness
// internal/testing/testcluster wraps it for tests.
package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Person is a token user the cluster knows besides the admin: someone who edits by hand.
type Person struct {
	Name, Token string
	Groups      []string
}

// People are alice and bob, on-call engineers allowed to edit everything (ClusterRole edit);
// the kubeconfig has a context named for each.
var People = []Person{
	{Name: "alice", Token: "alice-token-testcluster", Groups: []string{"platform-oncall"}},
	{Name: "bob", Token: "bob-token-testcluster", Groups: []string{"platform-oncall"}},
}

// AdminToken authenticates as a member of system:masters; ReaderToken as user "auditor" with no
// groups, for tests of least privilege.
const (
	AdminToken = "admin-token-testcluster"
	// controllerManagerToken is kube-controller-manager's: user system:kube-controller-manager.
	controllerManagerToken = "kcm-token-testcluster"
	ReaderToken            = "reader-token-testcluster"
	ReaderUser             = "auditor"
)

// Options say what to run and where.
type Options struct {
	// Dir holds state, logs and the kubeconfig; empty means a new temporary directory, removed on Stop.
	Dir string
	// Scheduler and ControllerManager also start kube-scheduler and kube-controller-manager.
	Scheduler, ControllerManager bool
	// Controllers, when set, are the only controllers kube-controller-manager runs (its
	// --controllers); empty runs all but those this cluster cannot serve.
	Controllers []string
	// SkipCRDs leaves the upstream CRDs out (they are installed by default).
	SkipCRDs bool
	// Kwok runs kwok, which makes the nodes added with AddNodes Ready and runs the Pods scheduled
	// to them; ArgoCD runs Argo CD's application and ApplicationSet controllers, repo-server and a Redis (it needs
	// the CRDs). Both want Scheduler and ControllerManager for Pods to exist and be placed.
	Kwok, ArgoCD bool
	// AuditWebhook also sends the API server's audit events to its webhook backend (batch mode,
	// 1 s batches), through a relay SetAuditWebhook points at a receiver. Not with Detach.
	AuditWebhook bool
	// Detach starts processes in their own session so they outlive the caller (make cluster-up).
	Detach bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Cluster is a running control plane.
type Cluster struct {
	// Dir is the state directory; Kubeconfig the path of an admin kubeconfig inside it.
	Dir, Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// URL is the API server's https address.
	URL string
	// Started is how long the start took, CRDs included.
	Started time.Duration
	// AuditLog is the API server's audit log (JSON lines), written with the platform's policy.
	AuditLog string
	// RepoServer is the address of Argo CD's repo-server (plaintext gRPC) when it runs.
	RepoServer string
	// ArgoCDMetrics is the host:port of Argo CD's application controller's /metrics (its
	// Prometheus series: argocd_app_reconcile, ...) when it runs.
	ArgoCDMetrics string

	opts    Options
	apiArgs []string
	argoEnv []string // the environment Argo CD's processes run with
	redis   string   // the host:port of Argo CD's Redis
	tempDir bool
	procs   []*process
	members []*Cluster // further clusters (AddCluster), stopped with this one
	bins    Binaries
	relay   *auditRelay
}

// Start brings up the control plane and returns once /readyz answers and the CRDs are established.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, bins: bins}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "auditor-cluster-")
		if err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		c.Dir, c.tempDir = d, true
		if !opts.Detach {
			if err := startReaper(d); err != nil {
				os.RemoveAll(d)
				return nil, err
			}
		}
	} else {
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("create cluster dir: %w", err)
		}
		abs, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("cluster dir: %w", err)
		}
		c.Dir = abs
	}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	c.Started = time.Since(begin)
	c.logf("cluster ready in %s: %s", c.Started.Round(100*time.Millisecond), c.URL)
	return c, nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, format+"\n", args...)
	}
}

// Stop ends every process (SIGTERM, then SIGKILL) and removes a temporary state directory.
func (c *Cluster) Stop() {
	if c.relay != nil {
		_ = c.relay.srv.Close()
	}
	for _, m := range c.members {
		m.Stop()
	}
	c.members = nil
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	c.procs = nil
	if c.tempDir {
		os.RemoveAll(c.Dir)
	}
}

// Clientset returns a typed admin client.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("typed client: %w", err)
	}
	return cs, nil
}

// Dynamic returns a dynamic admin client.
func (c *Cluster) Dynamic() (*dynamic.DynamicClient, error) {
	dc, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return dc, nil
}

// Kubectl returns a kubectl command talking to this cluster.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	return cmd
}

// RunsArgoCD reports whether the cluster runs Argo CD's controller and repo-server.
func (c *Cluster) RunsArgoCD() bool { return c.opts.ArgoCD }
