package live

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// gvDoc is one group-version's OpenAPI v3 document as last fetched.
type gvDoc struct {
	url    string // server-relative URL, carrying the document's hash
	models map[string]*spec.Schema
}

// OpenAPIModels returns the OpenAPI v3 component schemas that type the given group-versions
// (built-in kinds, and CRDs from their structural schemas), merged into one map, and a key that
// changes whenever one of those documents does (a CRD updated). Each document is fetched once
// per hash. Group-versions the server does not publish are left out: their kinds are then
// compared without a schema.
func (c *Cache) OpenAPIModels(ctx context.Context, gvs []schema.GroupVersion) (map[string]*spec.Schema, string, error) {
	paths, err := openapi.ToClientWithContext(c.disc.OpenAPIV3()).PathsWithContext(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("openapi v3 discovery: %w", err)
	}
	c.docsMu.Lock()
	defer c.docsMu.Unlock()
	if c.docs == nil {
		c.docs = map[string]*gvDoc{}
	}
	models := map[string]*spec.Schema{}
	var keys []string
	for _, gv := range gvs {
		p := gvPath(gv)
		entry, ok := paths[p]
		if !ok {
			continue
		}
		url := entry.ServerRelativeURL()
		doc := c.docs[p]
		if doc == nil || doc.url != url {
			raw, err := entry.SchemaWithContext(ctx, "application/json")
			if err != nil {
				return nil, "", fmt.Errorf("openapi v3 %s: %w", p, err)
			}
			var d spec3.OpenAPI
			if err := json.Unmarshal(raw, &d); err != nil {
				return nil, "", fmt.Errorf("openapi v3 %s: %w", p, err)
			}
			doc = &gvDoc{url: url, models: map[string]*spec.Schema{}}
			if d.Components != nil {
				doc.models = d.Components.Schemas
			}
			c.docs[p] = doc
		}
		for name, m := range doc.models {
			models[name] = m
		}
		keys = append(keys, url)
	}
	sort.Strings(keys)
	return models, strings.Join(keys, "\n"), nil
}

func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
