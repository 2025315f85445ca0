package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Member is a further cluster of a test: its own etcd and kube-apiserver with the upstream CRDs
// and the same users, registered in the first cluster's Argo CD (a cluster Secret), which syncs
// Applications into it. It runs no scheduler, controller-manager or kwok.
type Member struct {
	*Cluster
	// Name is the cluster's name in Argo CD; URL (Cluster.URL) is its server there.
	Name string
	// ReaderKubeconfig authenticates as the user "auditor", allowed to get, list and watch every
	// resource and nothing more: the auditor's own credentials for the cluster.
	ReaderKubeconfig string
}

// AddCluster starts a member cluster named name under the cluster's directory and, when the
// cluster runs Argo CD, registers it there. Stop stops it with the cluster.
func (c *Cluster) AddCluster(ctx context.Context, name string) (*Member, error) {
	dir := filepath.Join(c.Dir, "clusters", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	mc := &Cluster{opts: Options{Dir: dir, Log: c.opts.Log, Detach: c.opts.Detach, SkipCRDs: c.opts.SkipCRDs}, bins: c.bins, Dir: dir}
	c.members = append(c.members, mc) // stopped with c, even when its start fails midway
	begin := time.Now()
	c.logf("starting cluster %s", name)
	keys, _, _, err := mc.startControlPlane(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	if !c.opts.SkipCRDs {
		if err := InstallUpstreamCRDs(ctx, mc.Config, c.opts.Log); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
	}
	if err := mc.bindPeople(ctx); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	m := &Member{Cluster: mc, Name: name, ReaderKubeconfig: filepath.Join(dir, "reader.kubeconfig")}
	if err := mc.bindReader(ctx); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", name, err)
	}
	if err := writeReaderKubeconfig(m.ReaderKubeconfig, mc.URL, mc.Config.CAData); err != nil {
		return nil, err
	}
	if c.opts.ArgoCD {
		if err := c.registerCluster(ctx, name, mc.URL, keys); err != nil {
			return nil, fmt.Errorf("cluster %s: register in Argo CD: %w", name, err)
		}
	}
	mc.Started = time.Since(begin)
	c.logf("cluster %s ready in %s: %s", name, mc.Started.Round(100*time.Millisecond), mc.URL)
	return m, nil
}

// bindReader lets the user ReaderUser get, list and watch every resource (ClusterRole
// testcluster-reader), as a read-only auditor would be bound.
func (c *Cluster) bindReader(ctx context.Context) error {
	return c.apply(ctx, []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "testcluster-reader"},
		"rules": []any{
			map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"get", "list", "watch"}},
			map[string]any{"nonResourceURLs": []any{"*"}, "verbs": []any{"get"}},
		},
	}}, {Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "testcluster-reader"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "testcluster-reader"},
		"subjects": []any{map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": ReaderUser}},
	}}}, "testcluster")
}

// registerCluster writes Argo CD's cluster Secret for a member: Argo CD reaches it as admin
// (its own credentials, which the auditor never uses).
func (c *Cluster) registerCluster(ctx context.Context, name, server string, keys pki) error {
	ca, err := os.ReadFile(keys.caCert)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{"bearerToken": AdminToken, "tlsClientConfig": map[string]any{"caData": ca}})
	if err != nil {
		return err
	}
	return c.apply(ctx, []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "cluster-" + name, "namespace": ArgoCDNamespace,
			"labels": map[string]any{"argocd.argoproj.io/secret-type": "cluster"}},
		"stringData": map[string]any{"name": name, "server": server, "config": string(config)},
	}}}, "testcluster")
}

// StopAPIServer stops kube-apiserver (SIGTERM): clients see connections refused until
// StartAPIServer.
func (c *Cluster) StopAPIServer() error {
	for _, p := range c.procs {
		if p.name == "kube-apiserver" {
			p.stop(10 * time.Second)
			return nil
		}
	}
	return fmt.Errorf("stop kube-apiserver: not running")
}

// StartAPIServer starts kube-apiserver again on the same port and etcd, returning once it is
// ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	for i, p := range c.procs {
		if p.name != "kube-apiserver" {
			continue
		}
		np, err := startProcess(c.Dir, "kube-apiserver", c.bins.APIServer, c.apiArgs, nil, c.opts.Detach)
		if err != nil {
			return err
		}
		c.procs[i] = np
		return waitHTTP(ctx, np, c.URL+"/readyz", c.Config, 90*time.Second)
	}
	return fmt.Errorf("start kube-apiserver: it never ran")
}

// writeReaderKubeconfig writes a kubeconfig holding the reader's token alone: no other user's
// credentials are in the file the auditor is given.
func writeReaderKubeconfig(path, server string, ca []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[ReaderUser] = &clientcmdapi.AuthInfo{Token: ReaderToken}
	cfg.Contexts[ReaderUser] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: ReaderUser, Namespace: "default"}
	cfg.CurrentContext = ReaderUser
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
