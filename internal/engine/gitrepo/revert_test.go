package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setLineChange(path string, n int, s string) ChangeFunc {
	return func(snap *Snapshot) (map[string][]byte, error) {
		return map[string][]byte{path: []byte(setLine(string(snap.Files[path]), n, s))}, nil
	}
}

func mustUpdate(t *testing.T, r *Remote, msg string, change ChangeFunc) string {
	t.Helper()
	res, err := r.Update(context.Background(), UpdateRequest{Branch: "main", Author: bot, Message: msg, Change: change,
		Deadline: time.Now().Add(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Commit
}

func TestRevert(t *testing.T) {
	dir := t.TempDir()
	const path = "overlays/prod/values.yaml"
	bare := newBare(t, dir, "repo.git", map[string]string{path: lines(15, nil), "keep.txt": "k\n"})
	remote := fileRemote(t, bare)

	scaleUp := mustUpdate(t, remote, "scale up: line 3", setLineChange(path, 3, "minReplicaCount: 5"))
	// A later human commit changing line 10 of the same file.
	w := clone(t, bare)
	writeFiles(t, w, map[string]string{path: setLine(lines(15, map[int]string{3: "minReplicaCount: 5"}), 10, "maxReplicaCount: 20")})
	gitOut(t, w, "commit", "-q", "-am", "raise max: line 10")
	gitOut(t, w, "push", "-q")
	later := gitOut(t, w, "rev-parse", "HEAD")

	// What `git revert` makes of it.
	gitOut(t, w, "revert", "--no-edit", scaleUp)
	cliTree := gitOut(t, w, "rev-parse", "HEAD^{tree}")
	cliMsg := gitOut(t, w, "log", "-1", "--format=%B")

	res, err := remote.Revert(context.Background(), scaleUp[:10], RevertRequest{Branch: "main", Author: bot,
		Deadline: time.Now().Add(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parent != later || res.NoChange {
		t.Fatalf("result %+v, want parent %s", res, later)
	}
	fsck(t, bare)
	if got := gitOut(t, bare, "rev-parse", res.Commit+"^{tree}"); got != cliTree {
		t.Fatalf("tree %s, git revert made %s", got, cliTree)
	}
	msg := gitOut(t, bare, "log", "-1", "--format=%B", res.Commit)
	want := "Revert \"scale up: line 3\"\n\nThis reverts commit " + scaleUp + "."
	if msg != want || msg != cliMsg {
		t.Fatalf("message %q\nwant      %q\ngit made  %q", msg, want, cliMsg)
	}
	content := gitOut(t, bare, "show", res.Commit+":"+path)
	if !strings.Contains(content, "line 3\n") || !strings.Contains(content, "maxReplicaCount: 20") || strings.Contains(content, "minReplicaCount") {
		t.Fatalf("content after revert:\n%s", content)
	}

	// IsRevert on our commit and on the CLI's.
	repo, err := Open("file://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := repo.Log(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if sha, ok := IsRevert(hist[0]); !ok || sha != scaleUp {
		t.Fatalf("IsRevert(ours) = %q %v", sha, ok)
	}
	cli, err := Open(w)
	if err != nil {
		t.Fatal(err)
	}
	cliHist, err := cli.Log(context.Background(), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if sha, ok := IsRevert(cliHist[0]); !ok || sha != scaleUp {
		t.Fatalf("IsRevert(cli) = %q %v", sha, ok)
	}
	if _, ok := IsRevert(cliHist[1]); ok {
		t.Fatal("IsRevert on a normal commit")
	}

	// Reverting again: already undone, nothing to commit.
	res2, err := remote.Revert(context.Background(), scaleUp, RevertRequest{Branch: "main", Author: bot})
	if err != nil || !res2.NoChange {
		t.Fatalf("second revert %+v %v", res2, err)
	}
}

func TestRevertRefusedOnSameLines(t *testing.T) {
	dir := t.TempDir()
	const path = "values.yaml"
	bare := newBare(t, dir, "repo.git", map[string]string{path: lines(15, nil)})
	remote := fileRemote(t, bare)
	up := mustUpdate(t, remote, "scale up", setLineChange(path, 3, "minReplicaCount: 5"))
	culprit := mustUpdate(t, remote, "scale up more", setLineChange(path, 3, "minReplicaCount: 9"))
	mustUpdate(t, remote, "unrelated later", func(*Snapshot) (map[string][]byte, error) {
		return map[string][]byte{"other.txt": []byte("o\n")}, nil
	})
	mustUpdate(t, remote, "other lines of the file", setLineChange(path, 12, "twelve"))
	before := gitOut(t, bare, "rev-parse", "main")

	_, err := remote.Revert(context.Background(), up, RevertRequest{Branch: "main", Author: bot})
	var ce *RevertConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("want *RevertConflictError, got %T %v", err, err)
	}
	if ce.LaterCommit != culprit || ce.Path != path || ce.Commit != up || !strings.Contains(err.Error(), culprit) {
		t.Fatalf("conflict %+v (want later %s)", ce, culprit)
	}
	if got := gitOut(t, bare, "rev-parse", "main"); got != before {
		t.Fatal("branch moved")
	}
	// git agrees it conflicts.
	w := clone(t, bare)
	if out, err := gitTry(w, "revert", "--no-edit", up); err == nil {
		t.Fatalf("git revert succeeded: %s", out)
	}
}

func TestRevertAddedAndDeletedFiles(t *testing.T) {
	dir := t.TempDir()
	bare := newBare(t, dir, "repo.git", map[string]string{"a.txt": "a\n", "dir/old.txt": "old\n"})
	remote := fileRemote(t, bare)
	c := mustUpdate(t, remote, "add new, delete old", func(*Snapshot) (map[string][]byte, error) {
		return map[string][]byte{"ledger/new.txt": []byte("new\n"), "dir/old.txt": nil}, nil
	})
	mustUpdate(t, remote, "touch a", func(*Snapshot) (map[string][]byte, error) {
		return map[string][]byte{"a.txt": []byte("a2\n")}, nil
	})
	res, err := remote.Revert(context.Background(), c, RevertRequest{Branch: "main", Author: bot,
		Trailers: []Trailer{{"Reason", "rollback"}}})
	if err != nil {
		t.Fatal(err)
	}
	fsck(t, bare)
	w := clone(t, bare)
	if _, err := os.Stat(filepath.Join(w, "ledger")); !os.IsNotExist(err) {
		t.Fatalf("added file not deleted: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(w, "dir/old.txt")); err != nil || string(b) != "old\n" {
		t.Fatalf("deleted file not restored: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(w, "a.txt")); string(b) != "a2\n" {
		t.Fatalf("later change lost: %q", b)
	}
	msg := gitOut(t, w, "log", "-1", "--format=%B")
	if msg != "Revert \"add new, delete old\"\n\nThis reverts commit "+c+".\n\nReason: rollback" {
		t.Fatalf("message %q", msg)
	}
	if got := gitOut(t, w, "rev-parse", "HEAD"); got != res.Commit {
		t.Fatal("head is not the revert")
	}
	// A later change to the added file blocks deleting it.
	c2 := mustUpdate(t, remote, "add b", func(*Snapshot) (map[string][]byte, error) {
		return map[string][]byte{"b.txt": []byte("b\n")}, nil
	})
	c3 := mustUpdate(t, remote, "edit b", func(*Snapshot) (map[string][]byte, error) {
		return map[string][]byte{"b.txt": []byte("b2\n")}, nil
	})
	_, err = remote.Revert(context.Background(), c2, RevertRequest{Branch: "main", Author: bot})
	var ce *RevertConflictError
	if !errors.As(err, &ce) || ce.LaterCommit != c3 {
		t.Fatalf("want conflict naming %s, got %v", c3, err)
	}
}

func TestMerge3(t *testing.T) {
	base := splitLines([]byte(lines(10, nil)))
	cases := []struct {
		name        string
		ours, their map[int]string
		ok          bool
	}{
		{"disjoint", map[int]string{8: "x"}, map[int]string{2: "y"}, true},
		{"adjacent replacements", map[int]string{3: "x"}, map[int]string{4: "y"}, true},
		{"same line", map[int]string{3: "x"}, map[int]string{3: "y"}, false},
		{"same change", map[int]string{3: "x"}, map[int]string{3: "x"}, true},
	}
	for _, c := range cases {
		got, ok := merge3(base, splitLines([]byte(lines(10, c.ours))), splitLines([]byte(lines(10, c.their))))
		if ok != c.ok {
			t.Fatalf("%s: ok %v", c.name, ok)
		}
		if !ok {
			continue
		}
		both := map[int]string{}
		for k, v := range c.ours {
			both[k] = v
		}
		for k, v := range c.their {
			both[k] = v
		}
		if strings.Join(got, "") != lines(10, both) {
			t.Fatalf("%s: %q", c.name, strings.Join(got, ""))
		}
	}
	// Edits that meet around repeated lines: where each diff put its hunk is a guess, and git's
	// revert of the same three versions conflicts (review of #17), so this refuses too.
	for _, c := range []struct{ parent, commit, head string }{
		{"a\nb\na\n", "a\na\nb\na\n", "a\ny\nb\na\n"},
		{"a\nc\na\nb\n", "a\na\nc\ny\n", "a\na\ny\ny\n"},
	} {
		if got, ok := merge3(splitLines([]byte(c.commit)), splitLines([]byte(c.head)), splitLines([]byte(c.parent))); ok {
			t.Fatalf("revert of %q → %q on %q merged to %q; git conflicts", c.parent, c.commit, c.head, strings.Join(got, ""))
		}
	}
	// Insertions and deletions shift line numbers.
	ours := append(append([]string{"new 0\n"}, base[:5]...), base[6:]...) // insert at top, delete line 6
	theirs := append([]string(nil), base...)
	theirs[8] = "nine\n"
	got, ok := merge3(base, ours, theirs)
	want := append([]string(nil), ours...)
	want[8] = "nine\n"
	if !ok || strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("shifted merge %v %q", ok, got)
	}
	// An insertion next to a replaced line is ambiguous.
	ins := append(append(append([]string(nil), base[:3]...), "inserted\n"), base[3:]...)
	if _, ok := merge3(base, ins, splitLines([]byte(lines(10, map[int]string{4: "x"})))); ok {
		t.Fatal("insertion touching a replacement merged")
	}
}

func TestParseMessage(t *testing.T) {
	subj, body, tr := parseMessage("subject line\n\nbody text\nmore\n\nSchedule-Id: a\nFire-Time: b\n  continued\n")
	if subj != "subject line" || !strings.HasPrefix(body, "body text") || len(tr) != 2 || tr[1].Value != "b continued" {
		t.Fatalf("%q %q %+v", subj, body, tr)
	}
	if _, _, tr := parseMessage("s\n\nnot a trailer line\nKey: v\n"); tr != nil {
		t.Fatalf("mixed paragraph parsed as trailers: %+v", tr)
	}
	if _, _, tr := parseMessage("Key: v\n"); tr != nil {
		t.Fatalf("subject parsed as trailer: %+v", tr)
	}
	if got := renderMessage("m\n\n", []Trailer{{"A", "1"}}); got != "m\n\nA: 1\n" {
		t.Fatalf("render %q", got)
	}
}
