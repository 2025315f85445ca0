package check

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/site"
)

// siteValues is rule site-values: an env's site file (overlays/<env>/site/site.yaml) has every
// key with a well-formed value, and once it is no longer marked as the template's, nothing the
// env deploys carries an example name (example.com): not its overlay's objects and those of its
// other Applications (objs, rendered at envSrc, the revision the env runs), not its
// Applications and projects (apps/<env> at appsSrc, main), not its bootstrap Application
// (clusters/<env>/root.yaml). While the file is the template's, or for dev, the examples are
// one warning. A revision without a site file is not checked.
func siteValues(envSrc, appsSrc render.Source, env string, objs []*unstructured.Unstructured) (violations, warnings []Violation) {
	type part struct {
		src  render.Source
		objs func() ([]*unstructured.Unstructured, error)
		file string // the file itself, when it is not rendered
	}
	parts := []part{
		{src: envSrc, objs: func() ([]*unstructured.Unstructured, error) { return objs, nil }},
		{src: appsSrc, objs: func() ([]*unstructured.Unstructured, error) {
			res, err := appsOf(appsSrc, env)
			if err != nil || res == nil {
				return nil, err
			}
			return res.Objects, nil
		}},
		{src: appsSrc, file: path.Join("clusters", env, "root.yaml")},
	}
	var template []string // example names where the file is still the template's
	for i, p := range parts {
		v, err := readSite(p.src, env)
		if errors.Is(err, fs.ErrNotExist) {
			if i == 0 && appsSrc.Has(site.Path(env)) { // the env runs a pin older than the site values
				warnings = append(warnings, Violation{Rule: "site-values", Object: site.Path(env), Message: fmt.Sprintf(
					"%s runs %s, which predates its site values: what it deploys is checked for example names once a promotion moves it", env, "pin "+gitrepo.Short(envSrc.Revision()))})
			}
			continue
		}
		if err != nil {
			violations = append(violations, Violation{Rule: "site-values", Object: site.Path(env), Message: err.Error()})
			continue
		}
		if i == 1 {
			// The file's form is judged on main only: a pinned env's older file must not fail a
			// pull request that cannot move the pin in the same commit.
			for _, problem := range v.Problems() {
				violations = append(violations, Violation{Rule: "site-values", Object: site.Path(env), Message: problem})
			}
			if !v.Template && env != "dev" {
				for _, k := range v.UnchangedKeys() {
					warnings = append(warnings, Violation{Rule: "site-values", Object: site.Path(env), Message: fmt.Sprintf(
						"%s is still the template's value %q: confirm it is this site's (auditor site set --env %s %s=...)", k, v.Values[k], env, k)})
				}
			}
		}
		var found []site.Found
		if p.file != "" {
			data, err := p.src.ReadFile(p.file)
			if err != nil {
				continue
			}
			for _, e := range site.Examples(string(data)) {
				found = append(found, site.Found{Kind: "file", Name: p.file, Example: e, Key: v.KeyFor(string(data))})
			}
		} else {
			objs, err := p.objs()
			if err != nil {
				continue // the render's own failure is reported where it is rendered
			}
			found = site.ExamplesIn(objs, v)
		}
		for _, f := range found {
			if v.Template || env == "dev" {
				template = append(template, f.Object()+": "+f.Example)
				continue
			}
			violations = append(violations, Violation{Rule: "site-values", Object: f.Object(), Message: exampleMessage(env, f)})
		}
	}
	if len(template) > 0 {
		warnings = append(warnings, templateWarning(env, template))
	}
	return violations, warnings
}

// templateWarning is the warning that env would deploy the example names of template, the
// first five shown.
func templateWarning(env string, template []string) Violation {
	shown := template
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("%d more", len(template)-5))
	}
	why, risk := site.Path(env)+" is still the template's", "a production env would deploy example names"
	if env == "dev" {
		why, risk = "dev may run on a test cluster", ""
	}
	return Violation{Rule: "site-values", Object: site.Path(env), Risk: risk, Message: fmt.Sprintf(
		"%d example names would be deployed (%s; a warning while %s): set the site's values with `auditor site set --env %s KEY=VALUE ...`",
		len(template), strings.Join(shown, "; "), why, env)}
}

func readSite(src render.Source, env string) (*site.Values, error) {
	data, err := src.ReadFile(site.Path(env))
	if err != nil {
		return nil, err
	}
	return site.Parse(env, data)
}

func exampleMessage(env string, f site.Found) string {
	if f.Key == "" {
		return fmt.Sprintf("carries the example name %s, written in the manifest: no site value sets it", f.Example)
	}
	return fmt.Sprintf("carries the example name %s from site value %s: set it with `auditor site set --env %s %s=...`", f.Example, f.Key, env, f.Key)
}
