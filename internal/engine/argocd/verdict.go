package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Verdict is Argo CD's diff of one object: whether it is OutOfSync, and the two sides it compared
// (Git's object as Argo CD predicts it live, and the live object, both normalised).
type Verdict struct {
	OutOfSync       bool
	Predicted, Live map[string]any
}

// OutOfSync runs Argo CD's own diff — argo-cd/v3 util/argo/diff, the comparison Argo CD's
// controller makes without a server-side dry run, with the Application's ignoreDifferences,
// argocd-cm's customizations and annotation tracking — over pairs of desired and live objects
// (live nil for a missing object).
//
// With a memo, pairs it remembers as in sync are not diffed again, and pairs found in sync are
// remembered; the caller ends the run with memo.Done.
func (a *App) OutOfSync(ctx context.Context, desired, live []*unstructured.Unstructured, overrides map[string]v1alpha1.ResourceOverride, memo *Memo) ([]Verdict, error) {
	if len(desired) != len(live) {
		return nil, fmt.Errorf("argo cd diff: %d desired objects but %d live ones", len(desired), len(live))
	}
	ignores := a.rawIgnores
	if ignores == nil {
		ignores = []v1alpha1.ResourceIgnoreDifferences{}
	}
	if overrides == nil {
		overrides = map[string]v1alpha1.ResourceOverride{}
	}
	cfg, err := argodiff.NewDiffConfigBuilder().
		WithDiffSettings(ignores, overrides, false, normalizers.IgnoreNormalizerOpts{}).
		WithTracking("", string(v1alpha1.TrackingMethodAnnotation)).
		WithNoCache().
		Build()
	if err != nil {
		return nil, fmt.Errorf("argo cd diff config: %w", err)
	}
	out := make([]Verdict, len(desired))
	keys := make([]string, len(desired))
	var todo []int // pairs the memo does not know in sync
	if memo != nil {
		settings, err := json.Marshal([]any{argoVersion, ignores, overrides})
		if err != nil {
			return nil, fmt.Errorf("argo cd diff settings: %w", err)
		}
		for i := range desired {
			keys[i] = memoKey(string(settings), desired[i], live[i])
			if !memo.inSync(keys[i]) {
				todo = append(todo, i)
			}
		}
	} else {
		todo = make([]int, len(desired))
		for i := range todo {
			todo[i] = i
		}
	}
	// Each object's diff stands alone: split the objects over the cores.
	procs := max(1, runtime.GOMAXPROCS(0))
	chunk := max(1, (len(todo)+procs-1)/procs)
	g, gctx := errgroup.WithContext(ctx)
	for lo := 0; lo < len(todo); lo += chunk {
		part := todo[lo:min(lo+chunk, len(todo))]
		g.Go(func() error {
			ds, ls := make([]*unstructured.Unstructured, len(part)), make([]*unstructured.Unstructured, len(part))
			for j, i := range part {
				ds[j], ls[j] = desired[i], live[i]
			}
			res, err := argodiff.StateDiffs(gctx, ls, ds, cfg)
			if err != nil {
				return fmt.Errorf("argo cd diff: %w", err)
			}
			for j, d := range res.Diffs {
				i := part[j]
				v := Verdict{OutOfSync: d.Modified || live[i] == nil}
				if v.OutOfSync && live[i] != nil {
					_ = utiljson.Unmarshal(d.PredictedLive, &v.Predicted)
					_ = utiljson.Unmarshal(d.NormalizedLive, &v.Live)
				}
				if !v.OutOfSync {
					memo.remember(keys[i])
				}
				out[i] = v
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
