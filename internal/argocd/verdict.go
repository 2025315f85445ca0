package argocd

import (
	"context"
	"fmt"
	"runtime"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"golang.org/x/sync/errgroup"
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
func (a *App) OutOfSync(ctx context.Context, desired, live []*unstructured.Unstructured, overrides map[string]v1alpha1.ResourceOverride) ([]Verdict, error) {
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
	// Each object's diff stands alone: split the objects over the cores.
	out := make([]Verdict, len(desired))
	chunk := (len(desired) + runtime.GOMAXPROCS(0) - 1) / max(1, runtime.GOMAXPROCS(0))
	g, gctx := errgroup.WithContext(ctx)
	for lo := 0; lo < len(desired); lo += chunk {
		hi := min(lo+chunk, len(desired))
		g.Go(func() error {
			res, err := argodiff.StateDiffs(gctx, live[lo:hi], desired[lo:hi], cfg)
			if err != nil {
				return fmt.Errorf("argo cd diff: %w", err)
			}
			for j, d := range res.Diffs {
				i := lo + j
				v := Verdict{OutOfSync: d.Modified || live[i] == nil}
				if v.OutOfSync && live[i] != nil {
					_ = utiljson.Unmarshal(d.PredictedLive, &v.Predicted)
					_ = utiljson.Unmarshal(d.NormalizedLive, &v.Live)
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
