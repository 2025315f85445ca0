package notify

import (
	"strings"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Masked replaces a Secret value that is not already a "sha256:" digest.
const Masked = "(masked)"

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// MaskSecrets returns a copy of o in which no Secret value can appear in clear: for a Secret,
// every value under .data or .stringData (and the last-applied-configuration annotation, which
// repeats them) that is not a "sha256:<hex>" digest is replaced by Masked. Other kinds are
// returned unchanged (fields are still copied, so the caller may modify the result).
func MaskSecrets(o drift.Object) drift.Object {
	fields := make([]drift.Field, len(o.Fields))
	copy(fields, o.Fields)
	o.Fields = fields
	if o.Kind != "Secret" {
		return o
	}
	for i := range o.Fields {
		f := &o.Fields[i]
		f.Desired = maskSecretField(f.Path, f.Desired)
		f.Live = maskSecretField(f.Path, f.Live)
	}
	return o
}

// maskSecretField masks v, the value at path p of a Secret.
func maskSecretField(p string, v any) any {
	switch {
	case underField(p, ".data"), underField(p, ".stringData"), strings.Contains(p, lastApplied):
		return maskTree(v)
	case p == "", p == ".", p == ".metadata", p == ".metadata.annotations":
		return maskNested(v)
	}
	return v
}

// underField reports whether path p is field f or below it.
func underField(p, f string) bool {
	if !strings.HasPrefix(p, f) {
		return false
	}
	rest := p[len(f):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// maskNested masks the secret-bearing entries of a whole object, its metadata or annotations.
func maskNested(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return maskTree(v) // an unexpected shape: mask all of it
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		switch k {
		case "data", "stringData", lastApplied:
			out[k] = maskTree(x)
		case "metadata", "annotations":
			out[k] = maskNested(x)
		default:
			out[k] = x
		}
	}
	return out
}

// maskTree masks every leaf of v that is not nil or a "sha256:" digest.
func maskTree(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if strings.HasPrefix(x, "sha256:") {
			return x
		}
		return Masked
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = maskTree(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskTree(e)
		}
		return out
	default:
		return Masked
	}
}
