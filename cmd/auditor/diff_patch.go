package main

import (
	"fmt"
	"io"

	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// writeAdoptPatch prints the patch adopting every drifted field it can express into the
// kustomization its Application renders (overlays/<env>/ for the env's own), or into the Helm
// value, kustomize image or replica count of the Application's own options that sets it, written
// against the audited revision, and names on errw what it leaves out.
func writeAdoptPatch(w, errw io.Writer, repo *gitrepo.Repo, rep *drift.Report) error {
	var objs []drift.Object
	for _, o := range rep.Objects {
		id := objectID(o.Kind, o.Namespace, o.Name)
		switch {
		case o.Status == drift.Missing:
			fmt.Fprintf(errw, "not adopted: %s: missing from the cluster (delete it from Git, or sync it)\n", id)
		case o.Status == drift.Extra:
			fmt.Fprintf(errw, "not adopted: %s: not in Git (export it into overlays/%s/ and list it under resources:)\n", id, rep.Env)
		case o.Status != drift.Modified || len(o.Fields) == 0:
			fmt.Fprintf(errw, "not adopted: %s: no field to adopt (%s)\n", id, o.Status)
		case o.Kind == "Secret":
			fmt.Fprintf(errw, "not adopted: %s: values of a Secret are never shown (re-encrypt the live value with your secrets workflow)\n", id)
		default:
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	a, err := adopt.GroupIn(rep.Env, rep.Revision, adopt.Repo{ReadAt: repo.ReadFile, Tree: repo.Snapshot}, objs...)
	if err != nil {
		return err
	}
	for _, n := range a.Notes {
		fmt.Fprintln(errw, "not adopted: "+n)
	}
	_, err = io.WriteString(w, a.Diff)
	return err
}
