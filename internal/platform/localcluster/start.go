package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

func (c *Cluster) start(ctx context.Context) error {
	keys, etcdURL, ports, err := c.startControlPlane(ctx)
	if err != nil {
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
		if err := c.startApplicationSets(ctx, ports[11:14]); err != nil {
			return err
		}
	}
	state, _ := json.MarshalIndent(State{URL: c.URL, Kubeconfig: c.Kubeconfig, Etcd: etcdURL, RepoServer: c.RepoServer}, "", "  ")
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
	if len(c.opts.Controllers) > 0 {
		controllers = strings.Join(c.opts.Controllers, ",")
	}
	kubeconfig := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	caPEM, err := os.ReadFile(keys.caCert)
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	if err := writeKubeconfig(kubeconfig, c.URL, caPEM, controllerManagerToken); err != nil {
		return err
	}
	p, err := startProcess(c.Dir, "kube-controller-manager", c.bins.ControllerManager, []string{
		"--kubeconfig=" + kubeconfig, "--leader-elect=false",
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
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	time.Sleep(down)
	return c.StartAPIServer(ctx)
}

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

// startControlPlane starts etcd and kube-apiserver with their state in c.Dir, and writes the
// admin kubeconfig: the part of a cluster every cluster of a test has.
func (c *Cluster) startControlPlane(ctx context.Context) (keys pki, etcdURL string, ports []int, err error) {
	if keys, err = writePKI(c.Dir); err != nil {
		return keys, "", nil, err
	}
	tokens := tokensCSV()
	tokenFile := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return keys, etcdURL, ports, fmt.Errorf("write token file: %w", err)
	}
	ports, err = freePorts(14)
	if err != nil {
		return keys, etcdURL, ports, err
	}
	etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
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
		return keys, etcdURL, ports, err
	}
	c.procs = append(c.procs, etcd)
	if err := waitHTTP(ctx, etcd, etcdURL+"/health", nil, 30*time.Second); err != nil {
		return keys, etcdURL, ports, err
	}
	c.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	root, err := repoRoot()
	if err != nil {
		return keys, etcdURL, ports, err
	}
	policy := filepath.Join(root, "clusters", "audit-policy.yaml")
	c.AuditLog = filepath.Join(c.Dir, "audit.log")
	c.logf("starting kube-apiserver %s on %s", KubernetesVersion, c.URL)
	c.apiArgs = apiServerArgs(etcdURL, ports[2], keys, tokenFile, policy, c.AuditLog)
	if c.opts.AuditWebhook && !c.opts.Detach {
		kc, err := c.startAuditRelay(ports[10], keys)
		if err != nil {
			return keys, etcdURL, ports, err
		}
		c.apiArgs = append(c.apiArgs, "--audit-webhook-config-file="+kc, "--audit-webhook-mode=batch",
			"--audit-webhook-batch-max-wait=1s")
	}
	c.apiArgs = append(c.apiArgs, "--cert-dir="+filepath.Join(c.Dir, "apiserver-certs"), "--v=0")
	api, err := startProcess(c.Dir, "kube-apiserver", c.bins.APIServer, c.apiArgs, nil, c.opts.Detach)
	if err != nil {
		return keys, etcdURL, ports, err
	}
	c.procs = append(c.procs, api)
	caPEM, err := os.ReadFile(keys.caCert)
	if err != nil {
		return keys, etcdURL, ports, fmt.Errorf("read CA: %w", err)
	}
	c.Config = &rest.Config{Host: c.URL, BearerToken: AdminToken, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, QPS: 200, Burst: 400}
	if err := waitHTTP(ctx, api, c.URL+"/readyz", c.Config, 90*time.Second); err != nil {
		return keys, etcdURL, ports, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.URL, caPEM, AdminToken); err != nil {
		return keys, etcdURL, ports, err
	}
	return keys, etcdURL, ports, nil
}

// tokensCSV is the kube-apiserver's static token file: the admin, the reader, the
// controller-manager, each of People and the audit webhook.
func tokensCSV() string {
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n%s,%s,auditor-uid\n", AdminToken, ReaderToken, ReaderUser)
	// kube-controller-manager under its own name, as on a real cluster (admission policies that
	// tell its writes apart, such as the GPU-taint exemption for DaemonSet pods, see it so).
	tokens += fmt.Sprintf("%s,system:kube-controller-manager,kcm-uid,system:masters\n", controllerManagerToken)
	for _, p := range People {
		tokens += fmt.Sprintf("%s,%s,%s-uid,\"%s\"\n", p.Token, p.Name, p.Name, strings.Join(p.Groups, ","))
	}
	tokens += fmt.Sprintf("%s,%s,%s-uid\n", AuditWebhookToken, AuditWebhookUser, AuditWebhookUser)
	return tokens
}

// apiServerArgs is the kube-apiserver's flags: etcd at etcdURL, serving on port with keys,
// tokens from tokenFile, and the audit policy at policy logging to auditLog.
func apiServerArgs(etcdURL string, port int, keys pki, tokenFile, policy, auditLog string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
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
		"--audit-policy-file=" + policy, "--audit-log-path=" + auditLog, "--audit-log-format=json",
		"--audit-log-maxsize=100",
	}
}
