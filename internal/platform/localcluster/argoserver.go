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

	"golang.org/x/crypto/bcrypt"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ArgoCDAccount is a local Argo CD user (argocd-cm accounts.<name>: apiKey, login), allowed to
// read, update and delete the resources of every Application.
type ArgoCDAccount struct {
	Name, Password string
}

// ArgoCDServer is argocd-server running beside the application controller.
type ArgoCDServer struct {
	// Addr is its host:port, plaintext (--insecure): `argocd login Addr --plaintext`.
	Addr string
	// User is whom it writes to the cluster as: its ServiceAccount argocd-server.
	User string
}

// StartArgoCDServer runs argocd-server from the application controller's binary, insecure on
// a free port, with accounts as its local users. It writes to the cluster as the ServiceAccount
// argocd-server of Argo CD's namespace (a token from the TokenRequest API; bound to cluster-admin,
// where Argo CD's install binds a role that gets, patches and deletes every resource), so writes
// made through it carry that ServiceAccount as an install's do. Only with Options.ArgoCD.
func (c *Cluster) StartArgoCDServer(ctx context.Context, accounts ...ArgoCDAccount) (*ArgoCDServer, error) {
	if !c.opts.ArgoCD {
		return nil, fmt.Errorf("argocd-server: the cluster does not run Argo CD")
	}
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	kubeconfig, err := c.argoServerKubeconfig(ctx, cs)
	if err != nil {
		return nil, err
	}
	if err := argoAccounts(ctx, cs, accounts); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	assets := filepath.Join(c.Dir, "argocd", "assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return nil, fmt.Errorf("argocd-server assets: %w", err)
	}
	c.logf("starting argocd-server %s on 127.0.0.1:%d", ArgoCDVersion, ports[0])
	p, err := startProcess(c.Dir, "argocd-server", c.bins.ArgoCD, []string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + ArgoCDNamespace, "--insecure",
		"--address=127.0.0.1", "--port=" + strconv.Itoa(ports[0]), "--metrics-port=" + strconv.Itoa(ports[1]),
		"--redis=" + c.redis, "--repo-server=" + c.RepoServer, "--repo-server-plaintext",
		"--application-namespaces=" + AppNamespacesGlob, "--staticassets=" + assets,
		"--loglevel=info", "--logformat=text",
	}, append(c.argoEnv, "ARGOCD_BINARY_NAME=argocd-server", "KUBECONFIG="+kubeconfig), c.opts.Detach)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	if err := waitHTTP(ctx, p, "http://"+addr+"/healthz", nil, 60*time.Second); err != nil {
		return nil, err
	}
	return &ArgoCDServer{Addr: addr, User: "system:serviceaccount:" + ArgoCDNamespace + ":argocd-server"}, nil
}

// argoServerKubeconfig makes the ServiceAccount argocd-server, binds it to cluster-admin, and
// writes a kubeconfig with a token of it.
func (c *Cluster) argoServerKubeconfig(ctx context.Context, cs kubernetes.Interface) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "argocd-server", Namespace: ArgoCDNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(ArgoCDNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("argocd-server service account: %w", err)
	}
	// Labelled as an installer's, as Argo CD's install labels its own: not an Extra object of the
	// envs audited on this cluster (drift.DefaultExtraIgnore).
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "testcluster-argocd-server",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "testcluster"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "argocd-server", Namespace: ArgoCDNamespace}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("argocd-server binding: %w", err)
	}
	hours := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(ArgoCDNamespace).CreateToken(ctx, "argocd-server",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &hours}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("argocd-server token: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.Config.CAData}
	cfg.AuthInfos["argocd-server"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["argocd-server"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "argocd-server", Namespace: ArgoCDNamespace}
	cfg.CurrentContext = "argocd-server"
	path := filepath.Join(c.Dir, "argocd-server.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("argocd-server kubeconfig: %w", err)
	}
	return path, nil
}

// argoAccounts adds accounts to argocd-cm, their bcrypt passwords to argocd-secret, and a
// role in argocd-rbac-cm that lets them get, update and delete every Application's resources
// (Argo CD 3 asks for update/* and delete/* on them apart from the Application's own).
func argoAccounts(ctx context.Context, cs kubernetes.Interface, accounts []ArgoCDAccount) error {
	cm, secret := map[string]string{}, map[string]string{}
	policy := []string{"p, role:testcluster-editor, applications, *, */*, allow",
		"p, role:testcluster-editor, applications, update/*, */*, allow",
		"p, role:testcluster-editor, applications, delete/*, */*, allow",
		"p, role:testcluster-editor, projects, get, *, allow"}
	for _, a := range accounts {
		hash, err := bcrypt.GenerateFromPassword([]byte(a.Password), bcrypt.DefaultCost)
		if err != nil {
			return fmt.Errorf("argocd account %s: %w", a.Name, err)
		}
		cm["accounts."+a.Name] = "apiKey, login"
		secret["accounts."+a.Name+".password"] = string(hash)
		secret["accounts."+a.Name+".passwordMtime"] = time.Now().UTC().Format(time.RFC3339)
		policy = append(policy, "g, "+a.Name+", role:testcluster-editor")
	}
	patches := []struct {
		resource, name string
		patch          map[string]any
	}{
		{"configmaps", "argocd-cm", map[string]any{"data": cm}},
		{"configmaps", "argocd-rbac-cm", map[string]any{"data": map[string]string{"policy.csv": strings.Join(policy, "\n") + "\n"}}},
		{"secrets", "argocd-secret", map[string]any{"stringData": secret}},
	}
	for _, p := range patches {
		data, err := json.Marshal(p.patch)
		if err != nil {
			return fmt.Errorf("argocd accounts: %w", err)
		}
		opts := metav1.PatchOptions{FieldManager: "testcluster"}
		if p.resource == "secrets" {
			_, err = cs.CoreV1().Secrets(ArgoCDNamespace).Patch(ctx, p.name, types.MergePatchType, data, opts)
		} else {
			_, err = cs.CoreV1().ConfigMaps(ArgoCDNamespace).Patch(ctx, p.name, types.MergePatchType, data, opts)
		}
		if err != nil {
			return fmt.Errorf("argocd accounts: %s: %w", p.name, err)
		}
	}
	return nil
}
