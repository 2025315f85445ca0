package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// upstreamURL is the repository URL the manifests name (apps/, clusters/, the auditor's config and
// each env's site values, overlays/<env>/site).
const upstreamURL = "https://git.example.com/platform/llm-gitops.git"

// publish pushes the working tree's HEAD to a bare repository under dir, as a Git server would
// hold it, and commits on top the one change a fork makes: the manifests name this repository
// (file://) instead of the upstream URL, so Argo CD reads it. It returns the URL and the head.
func publish(dir string) (url, head string, err error) {
	bare := filepath.Join(dir, "git", "platform.git")
	url = "file://" + bare
	if err := os.RemoveAll(bare); err != nil {
		return "", "", err
	}
	work := filepath.Join(dir, "git", "work")
	_ = os.RemoveAll(work)
	steps := [][]string{
		{"", "init", "-q", "--bare", "-b", "main", bare},
		{".", "push", "-q", bare, "HEAD:refs/heads/main"},
		{"", "clone", "-q", bare, work},
	}
	for _, s := range steps {
		if _, err := git(s[0], s[1:]...); err != nil {
			return "", "", err
		}
	}
	var changed []string
	for _, top := range []string{"apps", "clusters", "base/auditor", "overlays"} {
		err := filepath.Walk(filepath.Join(work, top), func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || !strings.HasSuffix(p, ".yaml") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil || !strings.Contains(string(data), upstreamURL) {
				return err
			}
			changed = append(changed, p)
			return os.WriteFile(p, []byte(strings.ReplaceAll(string(data), upstreamURL, url)), info.Mode())
		})
		if err != nil {
			return "", "", fmt.Errorf("point the manifests at %s: %w", url, err)
		}
	}
	if len(changed) > 0 {
		if _, err := git(work, "commit", "-qam", "local cluster: Argo CD reads this repository ("+url+")"); err != nil {
			return "", "", err
		}
	}
	// The local cluster runs the work tree: every pinned env is promoted to it.
	if err := pinAll(work); err != nil {
		return "", "", err
	}
	if _, err := git(work, "push", "-q", "origin", "main"); err != nil {
		return "", "", err
	}
	head, err = git(work, "rev-parse", "HEAD")
	return url, head, err
}

// pinAll moves the pin of every pinned env of the work tree (apps/<env>/release.yaml) to its
// HEAD, in a commit of its own: what a first promotion does.
func pinAll(work string) error {
	head, err := git(work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(work, "apps", "*", "release.yaml"))
	var moved []string
	for _, f := range files {
		env := filepath.Base(filepath.Dir(f))
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		r, err := release.Parse(env, data)
		if err != nil {
			return err
		}
		if !r.Pinned() || r.Revision == head {
			continue
		}
		out, err := release.Set(env, data, head, "")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f, out, 0o644); err != nil {
			return err
		}
		moved = append(moved, env)
	}
	if len(moved) == 0 {
		return nil
	}
	_, err = git(work, "commit", "-qam", fmt.Sprintf("local cluster: %s run %.12s", strings.Join(moved, " and "), head))
	return err
}

// bootstrap applies clusters/<env>/root.yaml of the published repository, as a person does once
// per cluster, and waits until Argo CD has synced the env's Application at head.
func bootstrap(ctx context.Context, c *localcluster.Cluster, dir, env, head string) error {
	root := filepath.Join(dir, "git", "work", "clusters", env, "root.yaml")
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", root).CombinedOutput(); err != nil {
		return fmt.Errorf("bootstrap %s: %v: %s", root, err, out)
	}
	repo, err := gitrepo.Open(filepath.Join(dir, "git", "work"))
	if err != nil {
		return err
	}
	pin, err := release.RevisionAt(repo, env, head)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bootstrapped clusters/%s/root.yaml; waiting for Argo CD to sync llm-%s at %.8s\n", env, env, pin)
	start := time.Now()
	for app, rev := range map[string]string{"root-" + env: head, "llm-" + env: pin} {
		if err := c.WaitSynced(ctx, app, rev, 5*time.Minute); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "Argo CD synced llm-%s in %s\n", env, time.Since(start).Round(time.Second))
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=testcluster", "GIT_AUTHOR_EMAIL=testcluster@localhost",
		"GIT_COMMITTER_NAME=testcluster", "GIT_COMMITTER_EMAIL=testcluster@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
