package check

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// layouts keeps the layout read at each commit (a check reads a few).
var layouts sync.Map // commit → *layout.Layout

// layoutOf is the layout of the repository src reads (layout.Read).
func layoutOf(src render.Source) (*layout.Layout, error) {
	rev := src.Revision()
	if rev != "" {
		if l, ok := layouts.Load(rev); ok {
			return l.(*layout.Layout), nil
		}
	}
	l, err := layout.Read(src)
	if err != nil {
		return nil, err
	}
	if rev != "" {
		layouts.Store(rev, l)
	}
	return l, nil
}

// layoutEnv is env as src's layout says; an env it does not list has no Applications there.
func layoutEnv(src render.Source, env string) (layout.Env, error) {
	l, err := layoutOf(src)
	if err != nil {
		return layout.Env{}, err
	}
	if e, ok := l.Env(env); ok {
		return e, nil
	}
	return layout.Env{Name: env}, nil
}

// appsOf renders what env's root syncs at src: its Applications, as Argo CD renders the root's
// source (render.Apps: its path; with the root's Helm, directory or kustomize options, or
// several sources, as its Application in Git says); nil when src has no such path.
func appsOf(src render.Source, env string) (*render.Result, error) {
	e, err := layoutEnv(src, env)
	if err != nil {
		return nil, err
	}
	root, err := rootApplication(src, e)
	if err != nil || root == nil || !hasOptions(src, root) {
		if err != nil {
			return nil, err
		}
		return render.Apps(context.Background(), render.Engine{}, src, env)
	}
	rs, err := renderApplication(src, root)
	if err != nil {
		return nil, fmt.Errorf("root Application %s: %w", root.Name, err)
	}
	out := &render.Result{Env: env, Path: e.Apps, Revision: src.Revision()}
	for _, r := range rs {
		out.Objects = append(out.Objects, withDestination(r.Objects, root.DestinationNamespace)...)
	}
	return out, nil
}

// hasOptions says whether a root Application renders other than its path alone would.
func hasOptions(src render.Source, app *argocd.App) bool {
	k, err := app.KustomizeOptions(src.Revision())
	return len(app.Sources) > 1 || app.HelmOptions(src.Revision(), argocd.Cluster{}) != nil ||
		app.DirectoryOptions(src.Revision()) != nil || err != nil || k != nil && !reflect.DeepEqual(*k, render.KustomizeOptions{})
}

// silence sorts findings into those that count in env and those the layout turns off there
// (each with its reason, for the report).
func silence(l *layout.Layout, env string, found []Violation) (kept []Violation, off []Silenced) {
	for _, v := range found {
		why := l.Off(v.Rule, env)
		for old, now := range ruleAliases {
			if why == "" && now == v.Rule {
				why = l.Off(old, env)
			}
		}
		if why != "" {
			off = append(off, Silenced{Violation: v, Reason: why})
			continue
		}
		kept = append(kept, v)
	}
	return kept, off
}

// Silenced is a finding of a rule the repository's layout turns off in the env, with its reason.
type Silenced struct {
	Violation
	Reason string `json:"reason"`
}

// Applications renders env's group from Git at src as Argo CD would, for a layout whose env has
// no overlay of its own: what its root syncs (the Applications themselves, first) and each
// Application's objects, by Application. What it cannot render is an error naming each one;
// an Application it does not render (a chart repository, another repository) is listed in apps
// with the reason.
func Applications(src render.Source, env string) (objs []*unstructured.Unstructured, apps []AppRender, err error) {
	e, err := layoutEnv(src, env)
	if err != nil {
		return nil, nil, err
	}
	root, err := appsOf(src, env)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		return nil, nil, fmt.Errorf("%s: no path its root syncs (apps, or rootManifest, in %s)", env, layout.LayoutFile)
	}
	other, apps, violations, _, err := otherApplications(src, src, e)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, v := range violations {
		errs = append(errs, fmt.Errorf("%s: %s", v.Object, v.Message))
	}
	objs = append(objs, root.Objects...)
	for _, o := range other {
		objs = append(objs, o...)
	}
	return objs, apps, errors.Join(errs...)
}

// unchecked says why env is not checked without failing: the layout finds its Applications in
// the cluster alone (AppProjects, a selector), which check, reading Git, cannot see.
func unchecked(e layout.Env) string {
	if e.Overlay == "" && e.Root == "" {
		return "not checked: its Applications are picked from the cluster (projects, selector), and check reads Git alone; give the env a root with apps or rootManifest in " + layout.LayoutFile + " to check it"
	}
	return ""
}

// checkable says why env cannot be checked as the layout describes it: check reads its
// Applications from the path its root syncs, which must be named and exist.
func checkable(src render.Source, e layout.Env) error {
	switch {
	case e.Overlay != "":
		return nil
	case e.Apps == "":
		return fmt.Errorf("check reads Git alone: say where Git keeps the root %s's manifest (rootManifest) or the path it syncs (apps) in %s", e.Root, layout.LayoutFile)
	case !src.Has(e.Apps):
		return fmt.Errorf("the path its root syncs, %s, is not in the repository (apps in %s, or its rootManifest's source path)", e.Apps, layout.LayoutFile)
	}
	return nil
}

// weakened lists, per env, how head's layout weakens the gate base's layout set: an env no
// longer checked, this platform's rules no longer run, a rule turned off where it ran. A change
// cannot lower the bar it is judged by: each is a layout-gate violation, and such a change is
// merged on its own, reviewed. Nil when base's layout cannot be read (nothing to compare).
func weakened(base render.Source, head *layout.Layout) map[string][]Violation {
	was, err := layoutOf(base)
	if err != nil {
		return nil
	}
	out := map[string][]Violation{}
	add := func(env, msg string) {
		out[env] = append(out[env], Violation{Rule: "layout-gate", Object: layout.LayoutFile,
			Message: msg + ": a change to the gate fails it; merge it on its own, reviewed"})
	}
	for _, e := range was.Envs {
		if _, ok := head.Env(e.Name); !ok {
			add(e.Name, "this change stops checking env "+e.Name)
			continue
		}
		if was.Platform() && !head.Platform() {
			add(e.Name, "this change stops running the "+layout.ProfileLLMPlatform+" rules")
		}
		for _, r := range head.Rules {
			if head.Off(r.Name, e.Name) != "" && was.Off(r.Name, e.Name) == "" {
				add(e.Name, fmt.Sprintf("this change turns rule %s off in %s (%s)", r.Name, e.Name, r.Reason))
			}
		}
	}
	return out
}

// ruleNames are the rules check runs besides the admission policies (each its policy's name).
// layout-gate is not among them: a layout cannot turn it off.
var ruleNames = map[string]bool{
	"alert-runbook":            true,
	"application-renders":      true,
	"backup-offsite":           true,
	"batch-preemption":         true,
	"capacity-gpu-pool-limit":  true,
	"capacity-keda-reach":      true,
	"capacity-kv-cache":        true,
	"capacity-startup-probe":   true,
	"cascade-stateful":         true,
	"drain-possible":           true,
	"first-sync":               true,
	"flows-allowed":            true,
	"gpu-disruption-budget":    true,
	"gpu-nodeclass-root":       true,
	"gpu-pool-n-plus-one":      true,
	"gpu-stack":                true,
	"gpu-stack-drift":          true,
	"gpu-stack-soak":           true,
	"gpu-stack-staged":         true,
	"image-digest":             true,
	"inference-canary-weights": true,
	"inference-pool":           true,
	"inference-route":          true,
	"job-sync-again":           true,
	"keda-fallback":            true,
	"ledger":                   true,
	"namespace-pod-security":   true,
	"network-default-deny":     true,
	"pod-security-restricted":  true,
	"refs-resolve":             true,
	"release-patches":          true,
	"release-pinned":           true,
	"replicas-spread":          true,
	"route-after-backend":      true,
	"schedule":                 true,
	"site-values":              true,
	"stateful-retain":          true,
	"sync-wave-order":          true,
	"traffic-profile":          true,
	"vllm-access-log":          true,
	"vllm-drain":               true,
	"vllm-dtype":               true,
	"vllm-image-digest":        true,
	"vllm-max-num-seqs":        true,
	"vllm-weights":             true,
}

// ruleAliases are the old names of rules folded into others: a layout that turns the old name
// off turns the new one off (vllm-image-digest is image-digest's on vLLM images).
var ruleAliases = map[string]string{"vllm-image-digest": "image-digest"}

// unknownRules warns of each rule the layout turns off that check does not run: neither one of
// ruleNames nor an admission policy of policies/ at src. A misspelt name turns nothing off.
func unknownRules(src render.Source, l *layout.Layout) []Violation {
	pols, _ := envPolicies(src)
	var out []Violation
	for i, r := range l.Rules {
		if ruleNames[r.Name] || pols != nil && slices.Contains(pols.Policies(), r.Name) {
			continue
		}
		out = append(out, Violation{Rule: "layout", Object: fmt.Sprintf("%s rules[%d]", layout.LayoutFile, i),
			Message: fmt.Sprintf("no rule %s: it turns nothing off (the rules are in docs/reference/check-rules.md; an admission policy by its name)", r.Name)})
	}
	return out
}
