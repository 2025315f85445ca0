package audit

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// compare brings the live cache up for a prepared unit's kinds and compares: its report.
func (a *Auditor) compare(ctx context.Context, req Request, u *unit, declared map[clusterRef]string, ex *drift.Excusals, lap func(string)) error {
	wctx, cancel := context.WithTimeout(ctx, a.SyncTimeout)
	err := u.on(a).Watch(wctx, u.kinds, a.Options.ExtraKinds)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", req.Env, err)
	}
	lap("live")
	opts := a.Options
	opts.Controllers = a.controllers(req.Env)
	if opts.Schema, err = a.schemaFor(ctx, u.on(a), u.kinds); err != nil {
		return fmt.Errorf("%s: %w", req.Env, err)
	}
	app := u.app
	if app != nil {
		if u.overrides, err = a.overrides(ctx); err != nil {
			return err
		}
		if opts.Normalizer, err = app.Normalizer(u.overrides); err != nil {
			return err
		}
	}
	if err := u.generatedOptions(&opts); err != nil {
		return fmt.Errorf("Application %s: %w", u.name, err)
	}
	lap("schema")
	opts.Application = u.instance(a)
	opts.Cluster = u.clusterName
	opts.Hooks = u.hooks
	opts.Excused = ex
	opts.Events = a.events(u.on(a), u.clusterName)
	if u.inGroup() {
		opts.ExtraOnlyIn = map[string][]schema.GroupKind{a.AppNamespace: argoKinds}
		name := u.ref(a)
		opts.DeclaredElsewhere = func(r drift.Ref) bool {
			owner, ok := declared[clusterRef{u.clusterName, r}]
			return ok && owner != name
		}
	}
	objs := append(drift.AuditIndex(u.idx, u.on(a), opts), u.unknown...)
	drift.SortObjects(objs)
	// The unit's report goes by its key until the group's is merged: the verdict memo and the
	// objects only Argo CD flagged are kept per unit.
	rep := &drift.Report{Env: u.key, Revision: u.desired, Objects: objs}
	lap("compare")
	if app != nil {
		if err := a.argoVerdicts(ctx, u.on(a), app, u.idx, u.withoutGenerated(u.idx.Refs()), u.overrides, &opts, rep); err != nil {
			return err
		}
		u.generatedVerdicts(rep.Objects)
		a.memo(u.key).Done()
		lap("argocd")
	}
	a.attribute(u.on(a), u.clusterName, rep.Objects, &opts)
	if app != nil && req.Revision == "" && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	u.opts, u.report = opts, rep
	return nil
}
