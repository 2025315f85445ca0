package audit

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AppRender is what the auditor renders for one Application of an env's group.
type AppRender struct {
	Namespace, Name string
	// Revision is the revision rendered (a multi-source Application's first source's).
	Revision string
	// Objects are the render's objects, hooks included: what Argo CD's repo-server returns for
	// the Application, less the tracking label or annotation it writes in.
	Objects []*unstructured.Unstructured
	// Err says why the auditor did not render the Application; the others are rendered.
	Err error
}

// RenderGroup renders every Application of env's group as the audit would, and compares nothing:
// for a check of the auditor's renders against Argo CD's repo-server.
func (a *Auditor) RenderGroup(ctx context.Context, req Request) ([]AppRender, error) {
	req.renders = true
	units, err := a.prepareGroup(ctx, req, func(string) {})
	if err != nil {
		return nil, err
	}
	out := make([]AppRender, 0, len(units))
	for _, u := range units {
		r := AppRender{Namespace: u.appNS, Name: u.name, Revision: u.desired, Err: u.err}
		if u.rendered != nil {
			for _, o := range u.rendered.Objects {
				r.Objects = append(r.Objects, o.DeepCopy()) // the render may be the cache's
			}
			for i, raw := range u.rendered.Raw {
				o := &unstructured.Unstructured{}
				if err := o.UnmarshalJSON(raw); err != nil {
					return nil, fmt.Errorf("Application %s: object %d of the render: %w", u.name, i+1, err)
				}
				r.Objects = append(r.Objects, o)
			}
		}
		out = append(out, r)
	}
	return out, nil
}
