package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestHelmInstallIntoExistingArgoCDReportsAHandEdit: the chart, installed with the real helm
// beside real Argo CD from a minimal values file, gives an auditor that, with its own
// ServiceAccount's token and the config file the chart rendered, renders through Argo CD's
// repo-server and posts a kubectl edit of a synced Application to chat; `helm uninstall` then
// leaves nothing the chart made behind.
func TestHelmInstallIntoExistingArgoCDReportsAHandEdit(t *testing.T) {
	testcluster.Need(t)
	helm := testcluster.NeedTool(t, func(b testcluster.Binaries) string { return b.Helm })
	f := platform(t)
	c := newChat(t)
	ns := f.Prefix + "-tools"
	f.Kubectl("create", "namespace", ns)
	t.Cleanup(func() {
		_, _ = cluster.Kubectl(context.Background(), "delete", "namespace", ns, "--wait=false").CombinedOutput()
	})
	f.Kubectl("-n", ns, "create", "secret", "generic", "auditor-chat", "--from-literal=slack-url="+c.srv.URL+"/services/T/B/X")

	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(minimalValues(f)), 0o600))
	run := func(args ...string) string {
		cmd := exec.Command(helm, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	run("install", "auditor", "../../charts/auditor", "--namespace", ns, "--values", values)
	installed := releaseObjects(t, run("get", "manifest", "auditor", "--namespace", ns))
	require.Contains(t, installed, "ConfigMap "+ns+"/auditor-config")

	cs, err := cluster.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "auditor-config", metav1.GetOptions{})
	require.NoError(t, err)
	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, "auditor-chat", metav1.GetOptions{})
	require.NoError(t, err)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "auditor",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err, "a token of the chart's ServiceAccount")

	d := startChartDaemon(t, cm.Data["config.yaml"], secret.Data, serviceAccountConfig(t, tok.Status.Token))
	assert.Contains(t, metrics(t, d), `auditor_render_engine{engine="repo-server"} 1`, "Argo CD's repo-server renders")

	f.KubectlEdit(f.NS("rag"), "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	c.wait(t, "drift of qdrant", func(m string) bool { return strings.Contains(m, "qdrant") && strings.Contains(m, "replicas") })

	before := remaining(t, installed, ns)
	t.Logf("while installed: %s", strings.Join(before, ", "))
	for key := range installed {
		require.Contains(t, before, key, "the release's objects are found while installed")
	}
	run("uninstall", "auditor", "--namespace", ns)
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		left = remaining(t, installed, ns)
		return len(left) == 0, nil
	})
	assert.NoError(t, err, "after helm uninstall these remain: %v", left)
}

// minimalValues are what a user of an existing Argo CD writes: the repository, the envs and
// their Applications' prefix, the namespaces to read (and the kinds of the platform's CRDs),
// the repo-server of the test's Argo CD, a chat sink.
func minimalValues(f *testfixture.Platform) string {
	var watch []string
	for _, layer := range []string{"inference", "api", "rag", "batch", "monitoring", "system"} {
		watch = append(watch, f.NS(layer))
	}
	return `repo:
  url: ` + f.Dir + `
appNamePrefix: ` + f.Prefix + `-llm-
watchNamespaces: [` + strings.Join(watch, ", ") + `]
repoServer:
  address: ` + cluster.RepoServer + `
  plaintext: true
secrets:
  name: auditor-chat
sinks:
  - name: chat
    slack: {urlFile: /etc/auditor/secrets/slack-url}
rbac:
  extraRules:
    - apiGroups: [gateway.networking.k8s.io, keda.sh, monitoring.coreos.com, postgresql.cnpg.io, barmancloud.cnpg.io, cert-manager.io, external-secrets.io, inference.networking.k8s.io, inference.networking.x-k8s.io]
      resources: [gateways, httproutes, scaledobjects, servicemonitors, podmonitors, prometheusrules, clusters, databases, scheduledbackups, objectstores, certificates, externalsecrets, inferencepools, inferenceobjectives]
      verbs: [get, list, watch]
  extraClusterRules:
    - apiGroups: [karpenter.sh, karpenter.k8s.aws]
      resources: [nodepools, ec2nodeclasses]
      verbs: [get, list, watch]
`
}

// serviceAccountConfig is the test cluster's address with the ServiceAccount's token alone,
// through a kubeconfig file as a user outside the pod would write it.
func serviceAccountConfig(t *testing.T, token string) *rest.Config {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cluster.Config.Host, CertificateAuthorityData: cluster.Config.CAData, CertificateAuthority: cluster.Config.CAFile}
	kc.AuthInfos["auditor"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["auditor"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "auditor"}
	kc.CurrentContext = "auditor"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, file))
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	require.NoError(t, err)
	return cfg
}

// startChartDaemon runs the daemon in process on the chart's config file. The pod's mounts
// become directories of the test: /etc/auditor/secrets holds the Secret's keys, the state
// directory is the test's, and it listens on a free loopback port.
func startChartDaemon(t *testing.T, config string, secret map[string][]byte, restCfg *rest.Config) *daemon.Daemon {
	t.Helper()
	root := t.TempDir()
	secrets := filepath.Join(root, "etc", "auditor", "secrets")
	require.NoError(t, os.MkdirAll(secrets, 0o700))
	for k, v := range secret {
		require.NoError(t, os.WriteFile(filepath.Join(secrets, k), v, 0o600))
	}
	config = strings.NewReplacer("/etc/auditor/", filepath.Join(root, "etc", "auditor")+"/",
		"/var/lib/auditor", filepath.Join(root, "state"), "listen: :8080", "listen: 127.0.0.1:0").Replace(config)
	file := filepath.Join(root, "etc", "auditor", "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte(config+"debounce: 20ms\nfoldWindow: 300ms\n"), 0o600))
	cfg, err := daemon.LoadConfig(file)
	require.NoError(t, err, "the chart's config:\n%s", config)
	d, err := daemon.New(cfg, restCfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if d.Addr() == "" {
			return false, nil
		}
		resp, err := http.Get("http://" + d.Addr() + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	require.NoError(t, err, "the daemon never got ready with the chart's RBAC")
	return d
}

func metrics(t *testing.T, d *daemon.Daemon) string {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// releaseObjects are the objects of a release's manifest, as "Kind namespace/name".
func releaseObjects(t *testing.T, text string) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := manifest.Decode([]byte(text))
	require.NoError(t, err)
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

// remaining names what is still in the cluster of the release's objects and of what they
// made in ns (the StatefulSet's pods and claims, labelled with the release).
func remaining(t *testing.T, installed map[string]*unstructured.Unstructured, ns string) []string {
	t.Helper()
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	cs, err := cluster.Clientset()
	require.NoError(t, err)
	ctx := context.Background()
	var left []string
	for key, o := range installed {
		gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
		require.NoError(t, err)
		res := schema.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: strings.ToLower(o.GetKind()) + "s"}
		var getErr error
		if o.GetNamespace() != "" {
			_, getErr = dyn.Resource(res).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		} else {
			_, getErr = dyn.Resource(res).Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(getErr) {
			left = append(left, key)
		}
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=auditor"}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, sel)
	require.NoError(t, err)
	for _, p := range pods.Items {
		left = append(left, "Pod "+ns+"/"+p.Name)
	}
	claims, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	require.NoError(t, err)
	for _, c := range claims.Items {
		left = append(left, "PersistentVolumeClaim "+ns+"/"+c.Name)
	}
	sort.Strings(left)
	return left
}
