// Package reposerver asks Argo CD's repo-server for an Application's manifests: the
// GenerateManifest call Argo CD's application controller makes before it compares, with the
// same request, so the objects the auditor gets are the objects Argo CD applies (Helm,
// Kustomize, plugins and their versions included).
package reposerver

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/reposerver/apiclient"
	utiltls "github.com/argoproj/argo-cd/v3/util/tls"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Config says how to reach the repo-server, as the application controller's flags do.
type Config struct {
	// Address is the repo-server's host:port (argocd-repo-server.argocd.svc:8081 in a cluster).
	Address string `json:"address"`
	// Plaintext talks gRPC without TLS (the controller's --repo-server-plaintext).
	Plaintext bool `json:"plaintext,omitempty"`
	// StrictTLS verifies the repo-server's certificate (--repo-server-strict-tls), against CAFile
	// (the ca.crt of the argocd-repo-server-tls Secret) when given, which implies it; without
	// either the certificate is not verified, as the controller's default.
	StrictTLS bool   `json:"strictTLS,omitempty"`
	CAFile    string `json:"caFile,omitempty"`
	// Timeout bounds one GenerateManifest call (default 60 s, the controller's
	// --repo-server-timeout-seconds). In JSON and YAML a Go duration ("90s", "2m"); a bare
	// number is nanoseconds, as before.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Repositories are the credentials sent for the repositories the sources name (the
	// longest URL prefix that matches): the auditor's own read-only ones, never Argo CD's. A
	// repository with none is sent by URL alone (public, or file://).
	Repositories []Credentials `json:"repositories,omitempty"`
}

// UnmarshalJSON reads a Config whose timeout is a Go duration string ("90s") or nanoseconds.
func (c *Config) UnmarshalJSON(data []byte) error {
	type plain Config
	var raw struct {
		*plain
		Timeout json.RawMessage `json:"timeout,omitempty"`
	}
	raw.plain = (*plain)(c)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a misspelt key is an error, as in the rest of the config
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if len(raw.Timeout) == 0 || string(raw.Timeout) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw.Timeout, &s); err == nil {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("timeout: %w", err)
		}
		c.Timeout = d
		return nil
	}
	var ns int64
	if err := json.Unmarshal(raw.Timeout, &ns); err != nil {
		return fmt.Errorf("timeout: want a duration such as \"90s\": %w", err)
	}
	c.Timeout = time.Duration(ns)
	return nil
}

// Credentials are one repository's (or URL prefix's) read credentials for the repo-server.
type Credentials struct {
	URL      string `json:"url"`
	Username string `json:"username,omitempty"`
	// PasswordFile holds the HTTPS password or token; SSHKeyFile an SSH private key.
	PasswordFile string `json:"passwordFile,omitempty"`
	SSHKeyFile   string `json:"sshKeyFile,omitempty"`
}

// Client calls one repo-server.
type Client struct {
	cs    apiclient.Clientset
	creds []Credentials
}

// New returns a client of the repo-server cfg names. It does not connect until asked.
func New(cfg Config) (*Client, error) {
	if cfg.Address == "" {
		return nil, fmt.Errorf("repo-server: no address")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	// A CA given is a CA checked against: it never stands beside an unverified connection. A CA
	// file that does not exist (Argo CD made no argocd-repo-server-tls Secret: its repo-server
	// signs its own certificate) leaves the connection as Argo CD's controller makes it by
	// default, unverified, unless StrictTLS asks for verification.
	caFile := cfg.CAFile
	if _, err := os.Stat(caFile); caFile != "" && errors.Is(err, os.ErrNotExist) && !cfg.StrictTLS {
		caFile = ""
	}
	tlsCfg := utiltls.Configuration{DisableTLS: cfg.Plaintext, StrictValidation: cfg.StrictTLS || caFile != ""}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("repo-server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("repo-server CA %s: no certificate in it", cfg.CAFile)
		}
		tlsCfg.Certificates = pool
	}
	return &Client{cs: apiclient.NewRepoServerClientset(cfg.Address, int(timeout.Seconds()), tlsCfg), creds: cfg.Repositories}, nil
}

// repository is the record sent for url: its credentials read now (a rotated token is taken
// up at the next call), from the longest matching prefix.
func (c *Client) repository(url string) (v1alpha1.Repository, error) {
	r := v1alpha1.Repository{Repo: url}
	best := -1
	for i, cr := range c.creds {
		if strings.HasPrefix(url, cr.URL) && (best < 0 || len(cr.URL) > len(c.creds[best].URL)) {
			best = i
		}
	}
	if best < 0 {
		return r, nil
	}
	cr := c.creds[best]
	r.Username = cr.Username
	if cr.PasswordFile != "" {
		p, err := os.ReadFile(cr.PasswordFile)
		if err != nil {
			return r, fmt.Errorf("credentials of %s: %w", cr.URL, err)
		}
		r.Password = strings.TrimSpace(string(p))
		if r.Username == "" {
			r.Username = "git"
		}
	}
	if cr.SSHKeyFile != "" {
		k, err := os.ReadFile(cr.SSHKeyFile)
		if err != nil {
			return r, fmt.Errorf("credentials of %s: %w", cr.URL, err)
		}
		r.SSHPrivateKey = string(k)
	}
	return r, nil
}

// Request is what the controller knows when it asks for an Application's manifests.
type Request struct {
	// App is the Application (its spec, and its status for the synced revisions).
	App *v1alpha1.Application
	// Revisions are the revisions to render, one per source (spec.sources, else the one
	// spec.source); an empty one is the source's targetRevision.
	Revisions []string
	// KubeVersion and APIVersions are the destination cluster's, as the controller sends them
	// to Helm (live.Cache.Server).
	KubeVersion string
	APIVersions []string
	// Settings are argocd-cm's (SettingsFrom): the repo-server writes the tracking label or
	// annotation they say into each object (none with an empty AppLabelKey).
	Settings Settings
	// ControllerNamespace is Argo CD's own namespace (default: the Application's): an
	// Application elsewhere is tracked as <namespace>_<name>.
	ControllerNamespace string
	// ProjectSourceRepos is the AppProject's spec.sourceRepos (the repo-server checks a
	// multi-source Application's ref sources against it).
	ProjectSourceRepos []string
	// SourceIntegrity is the AppProject's effective source-integrity policy
	// (AppProject.EffectiveSourceIntegrity): the repo-server verifies the commit against it, and
	// keys its cache on it, as for the controller.
	SourceIntegrity *v1alpha1.SourceIntegrity
}

// Result is the repo-server's answer for every source of an Application.
type Result struct {
	// Objects in the repo-server's order, source after source.
	Objects []*unstructured.Unstructured
	// Revisions are the revisions the repo-server resolved, one per source.
	Revisions []string
}

// Manifests asks the repo-server for the manifests of every source of req.App, as the
// controller does (controller/state.go GetRepoObjs in Argo CD v3.6.1).
func (c *Client) Manifests(ctx context.Context, req Request) (*Result, error) {
	app := req.App
	if app == nil {
		return nil, fmt.Errorf("repo-server: no Application")
	}
	sources := app.Spec.GetSources()
	if len(sources) == 0 {
		return nil, fmt.Errorf("Application %s: no source", app.Name)
	}
	revision := func(i int) string {
		if i < len(req.Revisions) && req.Revisions[i] != "" {
			return req.Revisions[i]
		}
		return sources[i].TargetRevision
	}
	refs, err := c.refTargets(sources, revision)
	if err != nil {
		return nil, err
	}
	project := app.Spec.Project
	if project == "" {
		project = "default" // as Argo CD reads an Application without one
	}
	conn, client, err := c.cs.NewRepoServerClient()
	if err != nil {
		return nil, fmt.Errorf("repo-server: %w", err)
	}
	defer conn.Close()
	controllerNS := req.ControllerNamespace
	if controllerNS == "" {
		controllerNS = app.Namespace
	}
	out := &Result{}
	for i := range sources {
		src := sources[i]
		r, err := c.repository(src.RepoURL)
		if err != nil {
			return nil, err
		}
		resp, err := client.GenerateManifest(ctx, &apiclient.ManifestRequest{
			Repo:                            &r,
			Revision:                        revision(i),
			AppLabelKey:                     req.Settings.AppLabelKey,
			AppName:                         app.InstanceName(controllerNS),
			Namespace:                       app.Spec.Destination.Namespace,
			ApplicationSource:               &src,
			KustomizeOptions:                req.Settings.Kustomize,
			KubeVersion:                     req.KubeVersion,
			ApiVersions:                     req.APIVersions,
			TrackingMethod:                  req.Settings.TrackingMethod,
			EnabledSourceTypes:              req.Settings.EnabledSourceTypes,
			HelmOptions:                     req.Settings.Helm,
			HasMultipleSources:              app.Spec.HasMultipleSources(),
			RefSources:                      refs,
			ProjectName:                     project,
			ProjectSourceRepos:              req.ProjectSourceRepos,
			AnnotationManifestGeneratePaths: app.GetAnnotation(v1alpha1.AnnotationKeyManifestGeneratePaths),
			InstallationID:                  req.Settings.InstallationID,
			SourceIntegrity:                 req.SourceIntegrity,
			VerifySignature:                 req.SourceIntegrity != nil, //nolint:staticcheck // as the controller sends it
		})
		if err != nil {
			return nil, fmt.Errorf("Application %s: source %d of %d: repo-server: %w", app.Name, i+1, len(sources), callError(ctx, err))
		}
		// The repo-server renders whatever the verdict; the controller refuses a commit that
		// fails the project's source integrity (a ComparisonError, and no sync). So does the
		// auditor: that render is not what Git, as Argo CD trusts it, says.
		if err := resp.SourceIntegrityResult.AsError(); err != nil {
			return nil, fmt.Errorf("Application %s: source %d of %d: the project's source integrity refuses revision %s: %w", app.Name, i+1, len(sources), resp.Revision, err)
		}
		objs, err := decodeManifests(app.Name, i, resp.Manifests)
		if err != nil {
			return nil, err
		}
		out.Objects = append(out.Objects, objs...)
		out.Revisions = append(out.Revisions, resp.Revision)
	}
	return out, nil
}

// callError marks err ErrUnreachable when the repo-server could not be reached (not a TLS
// failure, not the caller's own deadline).
func callError(ctx context.Context, err error) error {
	if code := status.Code(err); (code == codes.Unavailable || code == codes.DeadlineExceeded && ctx.Err() == nil) && !tlsFailure(err) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return err
}

// decodeManifests decodes the manifests the repo-server rendered for source i of app.
func decodeManifests(app string, i int, manifests []string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(manifests))
	for j, m := range manifests {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(m)); err != nil {
			// Never the manifest itself in the message: it may be a Secret.
			return nil, fmt.Errorf("Application %s: source %d: manifest %d of the repo-server does not decode", app, i+1, j+1)
		}
		out = append(out, u)
	}
	return out, nil
}

// refTargets is the ref sources of sources, by "$" and their ref, each at its revision(i).
func (c *Client) refTargets(sources v1alpha1.ApplicationSources, revision func(int) string) (v1alpha1.RefTargetRevisionMapping, error) {
	refs := v1alpha1.RefTargetRevisionMapping{}
	for i, s := range sources {
		if s.Ref != "" {
			r, err := c.repository(s.RepoURL)
			if err != nil {
				return nil, err
			}
			refs["$"+s.Ref] = &v1alpha1.RefTarget{Repo: r, TargetRevision: revision(i), Chart: s.Chart}
		}
	}
	return refs, nil
}

// SyncedRevisions returns the revisions Argo CD last synced app at, one per source ("" where it
// records none): what the controller renders to compare.
func SyncedRevisions(app *v1alpha1.Application) []string {
	n := len(app.Spec.GetSources())
	out := make([]string, n)
	switch {
	case app.Spec.HasMultipleSources() && len(app.Status.Sync.Revisions) == n:
		copy(out, app.Status.Sync.Revisions)
	case !app.Spec.HasMultipleSources() && n == 1:
		out[0] = app.Status.Sync.Revision
	}
	return out
}

// FromUnstructured decodes an Application read from the cluster.
func FromUnstructured(u *unstructured.Unstructured) (*v1alpha1.Application, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("Application %s: %w", u.GetName(), err)
	}
	var app v1alpha1.Application
	if err := json.Unmarshal(data, &app); err != nil {
		return nil, fmt.Errorf("Application %s: %v", u.GetName(), strings.TrimPrefix(err.Error(), "json: "))
	}
	return &app, nil
}
