package argocd

import (
	"context"
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
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
	res, err := argodiff.StateDiffs(ctx, live, desired, cfg)
	if err != nil {
		return nil, fmt.Errorf("argo cd diff: %w", err)
	}
	out := make([]Verdict, len(res.Diffs))
	for i, d := range res.Diffs {
		v := Verdict{OutOfSync: d.Modified || live[i] == nil}
		if v.OutOfSync && live[i] != nil {
			_ = utiljson.Unmarshal(d.PredictedLive, &v.Predicted)
			_ = utiljson.Unmarshal(d.NormalizedLive, &v.Live)
		}
		out[i] = v
	}
	return out, nil
}
