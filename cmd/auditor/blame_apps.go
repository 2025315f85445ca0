package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// describe says what blame read, for stderr: the repository, the commit the walk started from
// and how far back it went, and whether the cluster was read.
func (o *blameOptions) describe(b *blame.Blame, cluster string) string {
	from := readAt(o.src.repo, o.src.revision, b.Revision)
	if o.src.revision == "" && !o.gitOnly {
		from = fmt.Sprintf("%s at the revision diff audits (%s)", gitrepo.RedactURL(o.src.repo), gitrepo.Short(b.Revision))
	}
	commits := "commits"
	if b.History.Commits == 1 {
		commits = "commit"
	}
	in := b.Path
	if b.Application != "" {
		in += " (Application " + b.Application + ")"
	}
	return fmt.Sprintf("blamed %s in %s from %s, %d first-parent %s back; %s",
		b.Object, in, from, b.History.Commits, commits, cluster)
}

// auditedApplications are the paths of this repository the env's Applications render, as the
// audit found them, for an object Git's own layout does not declare (a root only the cluster
// has, a selection): first the Application the report lists the object under (in the namespace
// asked for: its render may leave the namespace to Argo CD), then the others of Argo CD's own
// cluster. Charts of a Helm repository and Applications that did not render are left out.
func auditedApplications(rep *drift.Report, ref blame.Ref) []blame.AppPath {
	var out []blame.AppPath
	for _, o := range rep.Objects {
		if o.Cluster != "" || o.Name != ref.Name || !strings.EqualFold(o.Kind, ref.Kind) || ref.Namespace != "" && o.Namespace != ref.Namespace {
			continue
		}
		for _, a := range rep.Applications {
			if a.Name == o.Application && a.Cluster == "" && a.Path != "" && a.Path == o.Source && !strings.HasPrefix(a.Path, "chart ") {
				out = append(out, blame.AppPath{Name: a.Name, Path: a.Path, Namespace: ref.Namespace})
			}
		}
	}
	for _, a := range rep.Applications {
		if a.Cluster == "" && a.Path != "" && a.Error == "" && !strings.HasPrefix(a.Path, "chart ") {
			out = append(out, blame.AppPath{Name: a.Name, Path: a.Path})
		}
	}
	return out
}

func writeBlame(w io.Writer, b *blame.Blame, output string) error {
	return failed(writeReport(w, output, b, func() error { return blame.WriteText(w, b) }))
}
