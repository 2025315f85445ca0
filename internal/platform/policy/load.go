package policy

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// LoadDir is Load over a directory on disk.
func LoadDir(dir string) (*Set, error) {
	return Load(os.DirFS(dir))
}

// Load reads every *.yaml / *.yml file of fsys (recursively, kustomization files excepted) and
// builds a Set from the ValidatingAdmissionPolicies, ValidatingAdmissionPolicyBindings and any
// other object (a potential param, e.g. a ConfigMap) found.
func Load(fsys fs.FS) (*Set, error) {
	var objs []*unstructured.Unstructured
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		base := path.Base(p)
		ext := path.Ext(base)
		if (ext != ".yaml" && ext != ".yml") || strings.HasPrefix(base, "kustomization.") || base == "Kustomization" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		docs, err := manifest.Decode(data)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		objs = append(objs, docs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return New(objs)
}

const admissionGroup = "admissionregistration.k8s.io"
