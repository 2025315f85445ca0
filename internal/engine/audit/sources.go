package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// renderSources renders a multi-source Application as Argo CD does: every source with a path,
// each at its own revision with its own kustomize patches and helm options (value files of a
// ref source read from that source at its revision), the objects joined in source order. Every
// source must be of the repository the auditor reads.
func (a *Auditor) renderSources(ctx context.Context, u *unit, app *argocd.App, req Request) (*render.Result, error) {
	joined := &render.Result{Env: u.target, Path: render.TargetPath(u.target), Revision: u.desired}
	var digests []string
	for j, s := range app.Sources {
		if s.Path == "" && s.Ref == "" {
			continue
		}
		if !argocd.SameRepo(s.RepoURL, app.RepoURL) {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: source %d is another repository (%s); the auditor reads %s", u.name, j+1, s.RepoURL, app.RepoURL)}
		}
		if s.Path == "" {
			continue // a ref source: read by the others' value files
		}
		if len(s.KustomizeUnsupported) > 0 {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: source %d sets kustomize options the auditor does not apply yet (%v)", u.name, j+1, s.KustomizeUnsupported)}
		}
		rev, err := a.sourceRevision(app, j, u.desired, req)
		if err != nil {
			return nil, err
		}
		target := render.AppTarget(s.Path)
		helm, err := a.sourceHelmOptions(u.on(a), app, j, target, rev, req)
		if err != nil {
			return nil, err
		}
		k, err := app.SourceKustomizeOptions(j, rev)
		if err != nil {
			return nil, fmt.Errorf("Application %s, source %d: %w", u.name, j+1, err)
		}
		v := render.Variant{Kustomize: k, Patches: s.KustomizePatches, Helm: helm, Directory: app.SourceDirectoryOptions(j, rev)}
		if v.Directory != nil {
			v.Helm = nil // a directory source, whatever its path holds
		}
		res, err := a.foreground().renderTarget(ctx, u.key+"#"+strconv.Itoa(j+1), target, rev, v)
		if err != nil {
			return nil, fmt.Errorf("Application %s, source %d: %w", u.name, j+1, err)
		}
		digests = append(digests, res.Digest)
		if err := join(joined, res); err != nil {
			return nil, fmt.Errorf("Application %s, source %d: %w", u.name, j+1, err)
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(digests, "\x00")))
	joined.Digest = hex.EncodeToString(sum[:])
	return joined, nil
}

// renderChart fetches the chart of a chart repository an Application names, at the version
// Argo CD synced (else its targetRevision), and renders it with the Application's helm options
// and the cluster's version and API versions. A repository out of reach makes the Application
// Unknown with the reason; the others are audited.
func (a *Auditor) renderChart(ctx context.Context, u *unit, app *argocd.App, req Request) (*render.Result, error) {
	// The version Argo CD synced, as it records it (its verdicts are keyed by that string);
	// Git's targetRevision when a revision of Git is asked for, or before a sync.
	version := app.SyncedRevision
	if version == "" || req.Revision != "" {
		version = app.TargetRevision
	}
	ref := render.ChartRef{RepoURL: app.RepoURL, Chart: app.Chart, Version: version}
	files, resolved, err := a.Charts.Fetch(ctx, ref)
	if err != nil {
		return nil, &unitError{msg: fmt.Sprintf("Application %s: %v", u.name, err)}
	}
	u.desired, u.head, u.pending = version, version, false
	srv, err := u.on(a).Server()
	if err != nil {
		return nil, err
	}
	h := app.HelmOptions(resolved, argocd.Cluster{KubeVersion: srv.Version, APIVersions: srv.APIVersions})
	src, err := render.FromChart(ref, resolved, files)
	if err != nil {
		return nil, err
	}
	u.target = render.ChartTarget(ref, resolved)
	res, err := render.Engine{}.Render(ctx, src, render.Target{Name: u.target, Variant: render.Variant{Helm: h}})
	if err != nil {
		return nil, &unitError{msg: fmt.Sprintf("Application %s: chart %s %s: %v", u.name, app.Chart, resolved, err)}
	}
	res.Path = app.RepoURL + " " + app.Chart
	return res, nil
}

// join appends res's objects to into: as JSON while both hold JSON, else decoded.
func join(into, res *render.Result) error {
	switch {
	case into.Objects == nil && res.Objects == nil:
		into.Raw = append(into.Raw, res.Raw...)
		return nil
	case into.Objects == nil:
		for _, raw := range into.Raw {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return err
			}
			into.Objects = append(into.Objects, u)
		}
		into.Raw = nil
	}
	into.Objects = append(into.Objects, res.Objects...)
	for _, raw := range res.Raw {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return err
		}
		into.Objects = append(into.Objects, u)
	}
	return nil
}

// sourceRevision is the commit source j is audited at: the one asked for, else the one Argo CD
// synced it to, else its target revision's head.
func (a *Auditor) sourceRevision(app *argocd.App, j int, desired string, req Request) (string, error) {
	s := app.Sources[j]
	switch {
	case req.Revision != "":
		return desired, nil
	case s.SyncedRevision != "":
		rev, err := a.Repo.Resolve(s.SyncedRevision)
		if err != nil {
			return "", fmt.Errorf("Application %s/%s: source %d is synced to %s, which the repository does not have (fetch it?): %w", app.Namespace, app.Name, j+1, s.SyncedRevision, err)
		}
		return rev, nil
	}
	branch := s.TargetRevision
	if branch == "" {
		branch = "HEAD"
	}
	return a.Repo.Resolve(branch)
}

// sourceHelmOptions are the helm options of source j when its path is a chart, with the value
// files of ref sources read from Git at those sources' revisions.
func (a *Auditor) sourceHelmOptions(c *live.Cache, app *argocd.App, j int, target, rev string, req Request) (*render.HelmOptions, error) {
	h, err := a.helmOptions(c, app, target, rev)
	if err != nil || h == nil {
		return h, err
	}
	srv, err := c.Server()
	if err != nil {
		return nil, err
	}
	h = app.SourceHelmOptions(j, rev, argocd.Cluster{KubeVersion: srv.Version, APIVersions: srv.APIVersions})
	var files []string
	for _, f := range h.ValueFiles {
		if !strings.HasPrefix(f, "$") {
			files = append(files, f)
			continue
		}
		ref, rest, _ := strings.Cut(f, "/")
		k := -1
		for i, s := range app.Sources {
			if s.Ref != "" && "$"+s.Ref == ref {
				k = i
			}
		}
		if k < 0 {
			files = append(files, f) // the render names the missing ref
			continue
		}
		refRev, err := a.sourceRevision(app, k, rev, req)
		if err != nil {
			return nil, err
		}
		name := path.Clean(strings.TrimPrefix(rest, "/"))
		data, err := a.Repo.ReadFile(refRev, name)
		if err != nil {
			if h.IgnoreMissingValueFiles {
				continue
			}
			return nil, fmt.Errorf("Application %s: values file %s: %s at %.12s: %w", app.Name, f, name, refRev, err)
		}
		if h.RefValues == nil {
			h.RefValues = map[string]string{}
		}
		h.RefValues[f] = string(data)
		files = append(files, f)
	}
	h.ValueFiles = files
	return h, nil
}
