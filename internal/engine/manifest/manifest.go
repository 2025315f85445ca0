// Package manifest decodes Kubernetes manifests: multi-document YAML (or JSON) streams of
// objects, as policies/, the rendered overlays and upstream install files are written.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Decode decodes a multi-document YAML (or JSON) stream into objects with apimachinery's
// decoder; empty documents are skipped, and every other document must have apiVersion and kind.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode YAML: %w", err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document without apiVersion/kind (name %q)", u.GetName())
		}
		out = append(out, u)
	}
}
