package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"text/tabwriter"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/site"
)

// siteStatus reads env's site file from src and lists the example names the env's overlay and
// its Applications render.
func siteStatus(src render.Source, env string) (*siteReport, error) {
	known, err := src.Envs()
	if err != nil {
		return nil, failed(err)
	}
	if err := checkEnvs(known, env); err != nil {
		return nil, err
	}
	data, err := src.ReadFile(site.Path(env))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failed(fmt.Errorf("%s does not exist: this revision keeps no site values for %s", site.Path(env), env))
	}
	if err != nil {
		return nil, failed(err)
	}
	v, err := site.Parse(env, data)
	if err != nil {
		return nil, failed(err)
	}
	rep := &siteReport{Env: env, File: v.File, Template: v.Template, Values: v.Values, Problems: v.Problems(), Examples: []site.Found{}}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: env})
	if err != nil {
		return nil, failed(err)
	}
	rep.Examples = append(rep.Examples, site.ExamplesIn(res.Objects, v)...)
	if apps, err := render.Apps(context.Background(), (render.Engine{}), src, env); err != nil {
		return nil, failed(err)
	} else if apps != nil {
		rep.Examples = append(rep.Examples, site.ExamplesIn(apps.Objects, v)...)
	}
	root := path.Join("clusters", env, "root.yaml") // the bootstrap Application, applied by hand
	if data, err := src.ReadFile(root); err == nil {
		for _, e := range site.Examples(string(data)) {
			rep.Examples = append(rep.Examples, site.Found{Kind: "file", Name: root, Example: e, Key: v.KeyFor(string(data))})
		}
	}
	return rep, nil
}

func writeSiteReport(w io.Writer, format string, rep *siteReport) error {
	switch format {
	case "json":
		return failed(writeJSON(w, rep))
	case "yaml":
		return failed(writeYAML(w, rep))
	}
	for _, c := range rep.Changes {
		fmt.Fprintf(w, "set %s %s: %s → %s\n", c.File, c.Path, orNone(c.Old), orNone(c.New))
	}
	if len(rep.Changes) > 0 {
		fmt.Fprintln(w, "review with git diff, then commit; auditor check shows what the render changes")
		fmt.Fprintln(w)
	}
	state := "set for this site"
	if rep.Template {
		state = "still the template's: auditor site set replaces them"
	}
	fmt.Fprintf(w, "%s (%s)\n", rep.File, state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range site.Keys {
		val, ok := rep.Values[k.Name]
		note := ""
		switch {
		case !ok:
			val, note = "(not set)", "missing"
		case len(site.Examples(val)) > 0:
			note = "example"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Name, val, note)
	}
	if err := tw.Flush(); err != nil {
		return failed(err)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	if len(rep.Examples) == 0 {
		fmt.Fprintf(w, "no example name in what %s renders\n", rep.Env)
		return nil
	}
	fmt.Fprintf(w, "%d example names in what %s renders:\n", len(rep.Examples), rep.Env)
	for _, f := range rep.Examples {
		by := "written in the manifest"
		if f.Key != "" {
			by = "site value " + f.Key
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", f.Object(), f.Example, by)
	}
	return nil
}
