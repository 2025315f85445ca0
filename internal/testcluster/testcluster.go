// Package testcluster runs a real Kubernetes control plane — etcd and kube-apiserver, optionally
// kube-scheduler and kube-controller-manager — built from their Go modules, on free loopback ports
// in a temporary directory. Tests start one per package in TestMain; `make cluster-up` starts the
// same cluster detached for people.
package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	AdminToken  = "admin-token-testcluster"
	ReaderToken = "reader-token-testcluster"
	ReaderUser  = "auditor"
)

// Options say what to run and where.
type Options struct {
	// Dir holds state, logs and the kubeconfig; empty means a new temporary directory, removed on Stop.
	Dir string
	// Scheduler and ControllerManager also start kube-scheduler and kube-controller-manager.
	Scheduler, ControllerManager bool
	// SkipCRDs leaves the upstream CRDs out (they are installed by default).
	SkipCRDs bool
	// Kwok runs kwok, which makes the nodes added with AddNodes Ready and runs the Pods scheduled
	// to them; ArgoCD runs Argo CD's application controller, repo-server and a Redis (it needs
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

	opts    Options
	apiArgs []string
	tempDir bool
	procs   []*process
	bins    Binaries
	relay   *auditRelay
}

// State is what a detached cluster records in Dir/cluster.json.
type State struct {
	URL        string `json:"url"`
	Kubeconfig string `json:"kubeconfig"`
	Etcd       string `json:"etcd"`
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

func (c *Cluster) start(ctx context.Context) error {
	keys, err := writePKI(c.Dir)
	if err != nil {
		return err
	}
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,%s,auditor-uid\n", AdminToken, ReaderToken, ReaderUser)
	for _, p := range People {
		tokens += fmt.Sprintf("%s,%s,%s-uid,\"%s\"\n", p.Token, p.Name, p.Name, strings.Join(p.Groups, ","))
	}
	tokens += fmt.Sprintf("%s,%s,%s-uid\n", AuditWebhookToken, AuditWebhookUser, AuditWebhookUser)
	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	ports, err := freePorts(11)
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.logf("starting etcd %s on %s", EtcdVersion, etcdURL)
	etcd, err := startProcess(c.Dir, "etcd", c.bins.Etcd, []string{
		"--name=default", "--data-dir=" + filepath.Join(c.Dir, "etcd-data"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(ports[1]),
		"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(ports[1]),
		"--initial-cluster=default=http://127.0.0.1:" + strconv.Itoa(ports[1]),
		"--unsafe-no-fsync", "--log-level=warn",
	}, nil, c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, etcd)
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", nil, 30*time.Second); err != nil {
		return err
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	root, err := repoRoot()
	if err != nil {
		return err
	}
	policy := filepath.Join(root, "clusters", "audit-policy.yaml")
	c.AuditLog = filepath.Join(c.Dir, "audit.log")
	c.logf("starting kube-apiserver %s on %s", KubernetesVersion, c.URL)
	c.apiArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[2]),
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + keys.servingCert, "--tls-private-key-file=" + keys.servingKey,
		"--client-ca-file=" + keys.caCert,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.saPub,
		"--service-account-signing-key-file=" + keys.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// The platform's audit policy (writes at RequestResponse, Secrets at Metadata), logged as
		// JSON lines where the auditor can read them.
		"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLog, "--audit-log-format=json",
		"--audit-log-maxsize=100",
	}
	if c.opts.AuditWebhook && !c.opts.Detach {
		kc, err := c.startAuditRelay(ports[10], keys)
		if err != nil {
			return err
		}
		c.apiArgs = append(c.apiArgs, "--audit-webhook-config-file="+kc, "--audit-webhook-mode=batch",
			"--audit-webhook-batch-max-wait=1s")
	}
	c.apiArgs = append(c.apiArgs, "--cert-dir="+filepath.Join(c.Dir, "apiserver-certs"), "--v=0")
	api, err := startProcess(c.Dir, "kube-apiserver", c.bins.APIServer, c.apiArgs, nil, c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, api)
	caPEM, err := os.ReadFile(keys.caCert)
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	c.Config = &rest.Config{Host: c.URL, BearerToken: AdminToken, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: 200, Burst: 400}
	if err := waitHTTP(ctx, api, c.URL+"/readyz", c.Config, 90*time.Second); err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.URL, caPEM, AdminToken); err != nil {
		return err
	}
	if c.opts.ControllerManager {
		if err := c.startControllerManager(keys, ports[3]); err != nil {
			return err
		}
	}
	if c.opts.Scheduler {
		c.logf("starting kube-scheduler %s", KubernetesVersion)
		p, err := startProcess(c.Dir, "kube-scheduler", c.bins.Scheduler, []string{
			"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false",
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[4]),
		}, nil, c.opts.Detach)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		if err := waitHTTP(ctx, p, "https://127.0.0.1:"+strconv.Itoa(ports[4])+"/healthz", nil, 60*time.Second); err != nil {
			return err
		}
	}
	if !c.opts.SkipCRDs {
		if err := InstallUpstreamCRDs(ctx, c.Config, c.opts.Log); err != nil {
			return err
		}
	}
	if err := c.bindPeople(ctx); err != nil {
		return err
	}
	if err := c.bindAuditWebhook(ctx); err != nil {
		return err
	}
	if c.opts.Kwok {
		if err := c.startKwok(ctx, ports[5]); err != nil {
			return err
		}
	}
	if c.opts.ArgoCD {
		if err := c.startArgoCD(ctx, ports[6:10]); err != nil {
			return err
		}
	}
	state, _ := json.MarshalIndent(State{URL: c.URL, Kubeconfig: c.Kubeconfig, Etcd: etcdURL}, "", "  ")
	if err := os.WriteFile(filepath.Join(c.Dir, "cluster.json"), state, 0o644); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

func (c *Cluster) startControllerManager(keys pki, port int) error {
	c.logf("starting kube-controller-manager %s", KubernetesVersion)
	// The node lifecycle controller lifts the not-ready taint from nodes that report Ready, and
	// taints and evicts those whose heartbeats stop: it runs where kwok keeps nodes alive, not
	// where nodes are Node objects written once (auditor simulate without kwok).
	controllers := "*,-nodeipam,-nodelifecycle,-ttl"
	if c.opts.Kwok {
		controllers = "*,-nodeipam,-ttl"
	}
	p, err := startProcess(c.Dir, "kube-controller-manager", c.bins.ControllerManager, []string{
		"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--service-account-private-key-file=" + keys.saKey,
		"--root-ca-file=" + keys.caCert,
		"--use-service-account-credentials=false",
		"--controllers=" + controllers,
	}, nil, c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return waitHTTP(context.Background(), p, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", nil, 60*time.Second)
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again on the same port and etcd,
// returning once it is ready: clients see their watches break and must re-list.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	for i, p := range c.procs {
		if p.name != "kube-apiserver" {
			continue
		}
		p.stop(10 * time.Second)
		time.Sleep(down)
		np, err := startProcess(c.Dir, "kube-apiserver", c.bins.APIServer, c.apiArgs, nil, c.opts.Detach)
		if err != nil {
			return err
		}
		c.procs[i] = np
		return waitHTTP(ctx, np, c.URL+"/readyz", c.Config, 90*time.Second)
	}
	return fmt.Errorf("restart kube-apiserver: not running")
}

// Stop ends every process (SIGTERM, then SIGKILL) and removes a temporary state directory.
func (c *Cluster) Stop() {
	if c.relay != nil {
		_ = c.relay.srv.Close()
	}
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

// Down stops a detached cluster started in dir by its pid files. It is a no-op when none runs.
func Down(dir string) error {
	for _, name := range []string{"argocd-application-controller", "argocd-repo-server", "redis", "kwok",
		"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		if err := stopPID(filepath.Join(dir, name+".pid"), 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Running reports whether a detached cluster in dir is alive, and its state when it is.
func Running(dir string) (State, bool) {
	var st State
	data, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil || json.Unmarshal(data, &st) != nil {
		return st, false
	}
	pid, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.pid"))
	if err != nil {
		return st, false
	}
	n, err := strconv.Atoi(string(pid))
	return st, err == nil && pidAlive(n)
}

// writeKubeconfig writes an admin kubeconfig with context "testcluster".
func writeKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.AuthInfos[ReaderUser] = &clientcmdapi.AuthInfo{Token: ReaderToken}
	cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "admin", Namespace: "default"}
	cfg.Contexts["reader"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: ReaderUser, Namespace: "default"}
	for _, p := range People {
		cfg.AuthInfos[p.Name] = &clientcmdapi.AuthInfo{Token: p.Token}
		cfg.Contexts[p.Name] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: p.Name, Namespace: "default"}
	}
	cfg.CurrentContext = "testcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func waitHTTP(ctx context.Context, p *process, url string, cfg *rest.Config, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	switch {
	case cfg != nil:
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cfg.CAData)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	case strings.HasPrefix(url, "https://"):
		// scheduler and controller-manager serve /healthz with self-signed certificates of their own
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback health probe
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if err := p.exited(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", p.name, err)
		}
		if cfg != nil {
			req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%s); log tail:\n%s", p.name, timeout, last, tailFile(p.log.Name(), 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startReaper starts a shell that waits for this process to end, however it ends (a panicking
// test skips every deferred call), then kills the cluster's processes and removes dir.
func startReaper(dir string) error {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 0.3; done
for f in "$2"/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
sleep 0.2; rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "reaper", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = reaperAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start cluster reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// RunsArgoCD reports whether the cluster runs Argo CD's controller and repo-server.
func (c *Cluster) RunsArgoCD() bool { return c.opts.ArgoCD }

// bindPeople lets People read and write every resource (ClusterRole testcluster-people; the
// built-in edit role is filled by the controller-manager's aggregation, which not every test
// cluster runs).
func (c *Cluster) bindPeople(ctx context.Context) error {
	var subjects []any
	for _, p := range People {
		subjects = append(subjects, map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": p.Name})
	}
	return c.apply(ctx, []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "testcluster-people"},
		"rules":    []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}},
	}}, {Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "testcluster-people"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "testcluster-people"},
		"subjects": subjects,
	}}}, "testcluster")
}
