package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The identity kube-apiserver's audit webhook posts as: a token user allowed to create
// audit-events.auditor.platform.llm, as docs/audit.md asks of a real setup.
const (
	AuditWebhookToken = "audit-webhook-token-testcluster"
	AuditWebhookUser  = "kube-apiserver-audit"
)

// auditRelay is the address kube-apiserver's audit webhook backend posts to. It must exist when
// the API server starts, before any daemon does. It terminates TLS (the API server sends the
// webhook kubeconfig's bearer token only over TLS: clientcmd drops credentials for plain http) —
// what a TLS-terminating proxy in front of the daemon does in a real setup — and forwards each
// batch, Authorization header included, to the URL SetAuditWebhook names. It answers 503 while
// none is set (the API server drops the batch, as for an endpoint that is down).
type auditRelay struct {
	mu     sync.Mutex
	target *url.URL
	srv    *http.Server
}

func (r *auditRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	target := r.target
	r.mu.Unlock()
	if target == nil {
		http.Error(w, "no audit webhook receiver yet", http.StatusServiceUnavailable)
		return
	}
	proxy := &httputil.ReverseProxy{Director: func(r *http.Request) {
		r.URL.Scheme, r.URL.Host, r.URL.Path, r.URL.RawPath, r.Host = target.Scheme, target.Host, target.Path, "", target.Host
	}}
	proxy.ServeHTTP(w, req)
}

// SetAuditWebhook makes kube-apiserver's audit webhook batches go to url (a daemon's
// http://ADDR/api/v1/audit-events); "" stops forwarding. The cluster must have been started
// with Options.AuditWebhook.
func (c *Cluster) SetAuditWebhook(target string) error {
	if c.relay == nil {
		return fmt.Errorf("the cluster was started without Options.AuditWebhook")
	}
	var u *url.URL
	if target != "" {
		var err error
		if u, err = url.Parse(target); err != nil {
			return fmt.Errorf("audit webhook: %w", err)
		}
	}
	c.relay.mu.Lock()
	c.relay.target = u
	c.relay.mu.Unlock()
	return nil
}

// startAuditRelay listens on port and writes the webhook kubeconfig kube-apiserver reads
// (--audit-webhook-config-file): the relay's address and the webhook identity's token.
func (c *Cluster) startAuditRelay(port int, keys pki) (kubeconfig string, err error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", fmt.Errorf("audit webhook relay: %w", err)
	}
	c.relay = &auditRelay{}
	c.relay.srv = &http.Server{Handler: c.relay, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.relay.srv.ServeTLS(ln, keys.servingCert, keys.servingKey) }()
	ca, err := os.ReadFile(keys.caCert)
	if err != nil {
		return "", fmt.Errorf("audit webhook relay: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["auditor"] = &clientcmdapi.Cluster{Server: "https://" + ln.Addr().String() + "/api/v1/audit-events", CertificateAuthorityData: ca}
	cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{Token: AuditWebhookToken}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "auditor", AuthInfo: "kube-apiserver"}
	cfg.CurrentContext = "default"
	kubeconfig = filepath.Join(c.Dir, "audit-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return "", fmt.Errorf("audit webhook kubeconfig: %w", err)
	}
	return kubeconfig, os.Chmod(kubeconfig, 0o600)
}

// bindAuditWebhook lets the webhook identity create audit-events.auditor.platform.llm.
func (c *Cluster) bindAuditWebhook(ctx context.Context) error {
	return c.apply(ctx, []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "auditor-audit-events-writer"},
		"rules":    []any{map[string]any{"apiGroups": []any{"auditor.platform.llm"}, "resources": []any{"audit-events"}, "verbs": []any{"create"}}},
	}}, {Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "auditor-audit-events-writer"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "auditor-audit-events-writer"},
		"subjects": []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": AuditWebhookUser}},
	}}}, "testcluster")
}
