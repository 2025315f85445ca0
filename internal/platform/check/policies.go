package check

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/ledger"
	"github.com/llm-gitops/platform/internal/platform/policy"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// repositoryRules are the rules on what the repository says of env beside its render: its
// schedule and ledger parse, it is pinned, and its Application's patches are scheduled scale-ups.
func repositoryRules(repo *gitrepo.Repo, head *tree, env string) ([]Violation, error) {
	out := dataFiles(head.snap, env)
	pinned, err := releasePinned(repo, head, env)
	if err != nil {
		return nil, err
	}
	out = append(out, pinned...)
	return append(out, releasePatches(head.snap, head.src, env)...), nil
}

func snapshot(repo *gitrepo.Repo, rev string) (render.Source, *gitrepo.Snapshot, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return render.Source{}, nil, err
	}
	src, err := render.FromSnapshot(snap)
	return src, snap, err
}

// dataFiles validates the env's non-synced data at head: the schedule (cron, time zones, targets,
// lead time against peak length) and the model ledger (every line parses), with file and line.
func dataFiles(snap *gitrepo.Snapshot, env string) []Violation {
	var out []Violation
	if _, err := schedule.Load(snap, env); err != nil && !errors.Is(err, schedule.ErrNoSchedule) {
		out = append(out, Violation{Rule: "schedule", Object: "clusters/" + env + "/schedule.yaml", Message: err.Error()})
	}
	if data, ok, err := snap.File(ledger.Path(env)); err != nil || ok {
		if err == nil {
			_, err = ledger.Parse(ledger.Path(env), data)
		}
		if err != nil {
			out = append(out, Violation{Rule: "ledger", Object: ledger.Path(env), Message: err.Error()})
		}
	}
	if _, err := stackLedger(snap, env); err != nil {
		out = append(out, Violation{Rule: "ledger", Object: ledger.StackPath(env), Message: err.Error()})
	}
	return out
}

// loadPolicies renders policies/ at the head revision; nil when the revision has none.
func loadPolicies(src render.Source) (*policy.Set, error) {
	if !src.Has("policies/kustomization.yaml") {
		return nil, nil // a revision without policies/ checks capacity only
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget("policies")})
	if err != nil {
		return nil, err
	}
	set, err := policy.New(res.Objects)
	if err != nil {
		return nil, fmt.Errorf("policies/: %w", err)
	}
	return set, nil
}

// evaluate runs every policy on every object, with the namespace labels the env renders.
func evaluate(set *policy.Set, objs []*unstructured.Unstructured) []Violation {
	nsLabels := map[string]map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			nsLabels[o.GetName()] = o.GetLabels()
		}
	}
	var out []Violation
	for _, o := range objs {
		for _, v := range set.Evaluate(o, nsLabels[o.GetNamespace()]) {
			out = append(out, Violation{Rule: v.Policy, Object: v.Object, Message: v.Message})
		}
	}
	return out
}

func id(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}
