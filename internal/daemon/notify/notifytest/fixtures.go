package notifytest

import (
	_ "embed"
	"io/fs"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Rev is the desired revision of the fixtures' reports.
const Rev = "0123456789abcdef0123456789abcdef01234567"

// Writers of the fixture fields.
var (
	KubectlEdit = drift.Writer{Manager: "kubectl-edit", Operation: "Update", Time: "2025-01-02T03:04:05Z"}
	HPA         = drift.Writer{Manager: "kube-controller-manager", Operation: "Update", Subresource: "scale", Time: "2025-01-02T03:05:00Z"}
)

// Drifted fields of the Deployment llm/api.
var (
	LogLevel = At(drift.Field{Desired: "info", Live: "debug", Change: drift.Changed, Writer: KubectlEdit},
		"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "api"), "env", fieldpath.KeyByFields("name", "LOG_LEVEL"), "value")
	Replicas   = At(drift.Field{Desired: int64(2), Live: int64(5), Change: drift.Changed, Writer: HPA}, "spec", "replicas")
	Annotation = At(drift.Field{Live: "ops <team> & co", Change: drift.Added, Writer: KubectlEdit}, "metadata", "annotations", "example.com/owner")
	Toleration = At(drift.Field{Live: map[string]any{"key": "gpu"}, Change: drift.Added, Writer: KubectlEdit}, "spec", "template", "spec", "tolerations", 0)
)

// Deployment is the Deployment llm/api, Modified in fields.
func Deployment(fields ...drift.Field) drift.Object {
	return drift.Object{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "llm", Name: "api", Status: drift.Modified, Fields: fields}
}

// At gives a field its structured path (fieldpath.MakePath parts) and the display path from it.
func At(f drift.Field, parts ...any) drift.Field {
	p := fieldpath.MakePathOrDie(parts...)
	f.FieldPath, f.Path = drift.FieldPath(p), drift.Display(p)
	return f
}

// Report is a drift report of env at revision, in sync when objs is empty.
func Report(env, revision string, objs ...drift.Object) *drift.Report {
	return &drift.Report{Env: env, Revision: revision, InSync: len(objs) == 0, Objects: objs}
}

// DevKustomization is a copy of a dev overlay's kustomization.yaml.
//
//go:embed testdata/kustomization.yaml
var DevKustomization []byte

// ReadDevOverlay reads a repository holding only overlays/dev/kustomization.yaml
// (DevKustomization), at any revision: the ReadFile of notify.Options in tests.
func ReadDevOverlay(_, name string) ([]byte, error) {
	if name != "overlays/dev/kustomization.yaml" {
		return nil, fs.ErrNotExist
	}
	return DevKustomization, nil
}
