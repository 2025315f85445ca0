package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon/sinks"
)

// apiAuth returns the guard of the API routes the config asks for (nil: open).
func apiAuth(cfg APIConfig, restCfg *rest.Config) (func(*http.Request) (int, string), error) {
	switch cfg.Auth {
	case APIAuthNone:
		return nil, nil
	case APIAuthToken:
		want, err := sinks.ReadSecret("api token", cfg.TokenFile, "")
		if err != nil {
			return nil, err
		}
		return func(r *http.Request) (int, string) {
			got, ok := bearer(r)
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
				return http.StatusUnauthorized, "a valid bearer token is required"
			}
			return 0, ""
		}, nil
	default:
		cs, err := kubernetes.NewForConfig(restCfg)
		if err != nil {
			return nil, fmt.Errorf("api auth: %w", err)
		}
		k := &kubeAuth{cs: cs, ttl: 30 * time.Second, seen: map[[32]byte]verdict{}}
		return k.authorize, nil
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	return strings.TrimSpace(tok), ok && strings.TrimSpace(tok) != ""
}

// APIGroup is the API group of the virtual resources the API's routes are authorized as: GET
// /api/v1/drift needs get on drift.auditor.platform.llm, /api/v1/status on
// status.auditor.platform.llm. (Not a non-resource URL: Kubernetes' default system:discovery role
// lets every authenticated user get /api/*.)
const APIGroup = "auditor.platform.llm"

// kubeAuth authenticates a bearer token with a TokenReview and authorizes the request with a
// SubjectAccessReview, the way kube-rbac-proxy fronts an endpoint with resource attributes: a
// ClusterRole rule {apiGroups: [auditor.platform.llm], resources: [drift, status], verbs: [get]}
// grants it. Verdicts are kept for ttl per token and path, so a dashboard polling the API does
// not cost two API calls a request.
type kubeAuth struct {
	cs  kubernetes.Interface
	ttl time.Duration

	mu   sync.Mutex
	seen map[[32]byte]verdict
}

type verdict struct {
	status int
	reason string
	until  time.Time
}

func (k *kubeAuth) authorize(r *http.Request) (int, string) {
	tok, ok := bearer(r)
	if !ok {
		return http.StatusUnauthorized, "a Kubernetes bearer token is required"
	}
	key := sha256.Sum256([]byte(tok + "\x00" + r.Method + " " + r.URL.Path))
	now := time.Now()
	k.mu.Lock()
	if v, ok := k.seen[key]; ok && now.Before(v.until) {
		k.mu.Unlock()
		return v.status, v.reason
	}
	k.mu.Unlock()
	status, reason := k.review(r.Context(), tok, r.URL.Path, r.Method)
	if status != http.StatusServiceUnavailable {
		k.mu.Lock()
		if len(k.seen) > 4096 {
			k.seen = map[[32]byte]verdict{}
		}
		k.seen[key] = verdict{status: status, reason: reason, until: now.Add(k.ttl)}
		k.mu.Unlock()
	}
	return status, reason
}

func (k *kubeAuth) review(ctx context.Context, token, path, method string) (int, string) {
	verb := "get" // GET /api/v1/drift
	if method == http.MethodPost {
		verb = "create" // POST /api/v1/audit-events: kube-apiserver's audit webhook
	}
	resource := path[strings.LastIndex(path, "/")+1:] // /api/v1/drift → drift
	switch {
	case path == "/mcp":
		// Every MCP request is a POST that reads: the tools answer what drift, blame and
		// episodes do, and none writes.
		resource, verb = "mcp", "get"
	case strings.HasPrefix(path, "/debug/pprof/"):
		resource = "pprof" // every profile is one right: it shows the process' memory
	case !strings.HasPrefix(path, "/api/"):
		resource = "pages" // the web view: / and /blame show what drift, episodes and blame do
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := k.cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable, "token review failed"
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "the token is not valid"
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for name, v := range u.Extra {
		extra[name] = authzv1.ExtraValue(v)
	}
	sar, err := k.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Group: APIGroup, Resource: resource, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable, "access review failed"
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("user %q may not %s %s.%s", u.Username, verb, resource, APIGroup)
	}
	return 0, ""
}
