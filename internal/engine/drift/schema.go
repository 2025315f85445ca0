package drift

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// quantityType is the OpenAPI name of resource.Quantity: the only fields whose spellings
// ("1000m", "1") the API server normalises, so the only ones compared by numeric value.
const quantityType = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// Schema gives the structured-merge-diff type of each kind, built from the API server's OpenAPI
// v3 documents (built-in kinds and every CRD's structural schema) the way the API server's own
// field manager builds it: list semantics from x-kubernetes-list-type and list-map-keys, map
// semantics from x-kubernetes-map-type, defaults of map keys from the schema.
type Schema struct {
	types map[schema.GroupVersionKind]*typed.ParseableType
}

// NewSchema converts OpenAPI v3 component schemas (merged across group-versions) into types.
func NewSchema(models map[string]*spec.Schema) (*Schema, error) {
	conv, err := schemaconv.ToSchemaFromOpenAPI(models, false)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	parser := &typed.Parser{Schema: smdschema.Schema{Types: conv.Types}}
	s := &Schema{types: map[schema.GroupVersionKind]*typed.ParseableType{}}
	for name, m := range models {
		for _, gvk := range gvksOf(m.Extensions) {
			pt := parser.Type(name)
			s.types[gvk] = &pt
		}
	}
	return s, nil
}

// Type returns the type of a kind, nil when the schema does not have it.
func (s *Schema) Type(gvk schema.GroupVersionKind) *typed.ParseableType {
	if s == nil {
		return nil
	}
	return s.types[gvk]
}

// gvksOf reads x-kubernetes-group-version-kind.
func gvksOf(ext spec.Extensions) []schema.GroupVersionKind {
	raw, ok := ext["x-kubernetes-group-version-kind"].([]any)
	if !ok {
		return nil
	}
	var out []schema.GroupVersionKind
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if v != "" && k != "" {
			out = append(out, schema.GroupVersionKind{Group: g, Version: v, Kind: k})
		}
	}
	return out
}

func isQuantity(tr smdschema.TypeRef) bool {
	return tr.NamedType != nil && *tr.NamedType == quantityType
}

// SchemaOf wraps types already built elsewhere (an offline, built-in schema).
func SchemaOf(types map[schema.GroupVersionKind]*typed.ParseableType) *Schema {
	return &Schema{types: types}
}
