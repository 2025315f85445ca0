package adopt

import (
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// fileChange is one file of a patch: its content before (nil: the file is new) and after.
type fileChange struct {
	path          string
	before, after []byte
}

// unifiedDiff renders changes as git's unified diff, with go-git's encoder (hunk headers, three
// lines of context, "\ No newline at end of file") and blob hashes on the index lines, so that
// `git apply` and `git apply --3way` accept it.
func unifiedDiff(changes []fileChange) (string, error) {
	var b strings.Builder
	if err := fdiff.NewUnifiedEncoder(&b, fdiff.DefaultContextLines).Encode(patch(changes)); err != nil {
		return "", err
	}
	// The encoder follows a hunk header with the line before the hunk, where git puts the
	// enclosing section's heading; a YAML file has none worth showing, and `git apply` ignores it.
	return hunkHeading.ReplaceAllString(b.String(), "$1"), nil
}

var hunkHeading = regexp.MustCompile(`(?m)^(@@ -[0-9,]+ \+[0-9,]+ @@) .*$`)

type patch []fileChange

func (p patch) Message() string { return "" }

func (p patch) FilePatches() []fdiff.FilePatch {
	out := make([]fdiff.FilePatch, len(p))
	for i, c := range p {
		out[i] = c
	}
	return out
}

func (c fileChange) IsBinary() bool { return false }

func (c fileChange) Files() (from, to fdiff.File) {
	if c.before != nil {
		from = blobFile{c.path, c.before}
	}
	return from, blobFile{c.path, c.after}
}

func (c fileChange) Chunks() []fdiff.Chunk {
	var out []fdiff.Chunk
	for _, d := range diff.Do(string(c.before), string(c.after)) {
		op := fdiff.Equal
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			op = fdiff.Add
		case diffmatchpatch.DiffDelete:
			op = fdiff.Delete
		}
		out = append(out, chunk{d.Text, op})
	}
	return out
}

type blobFile struct {
	path string
	data []byte
}

func (f blobFile) Hash() plumbing.Hash     { return plumbing.ComputeHash(plumbing.BlobObject, f.data) }
func (f blobFile) Mode() filemode.FileMode { return filemode.Regular }
func (f blobFile) Path() string            { return f.path }

type chunk struct {
	text string
	op   fdiff.Operation
}

func (c chunk) Content() string       { return c.text }
func (c chunk) Type() fdiff.Operation { return c.op }

// FileDiff is the unified diff of one file, from before (nil for a new file) to after, in the
// form `git apply` takes.
func FileDiff(path string, before, after []byte) (string, error) {
	return unifiedDiff([]fileChange{{path: path, before: before, after: after}})
}
