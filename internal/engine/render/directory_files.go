package render

// Which files of a directory source Argo CD's repo-server reads (argo-cd reposerver/repository
// getPotentiallyValidManifests and getPotentiallyValidManifestFile), found here through the
// Source's own file system: a work tree on disk or a Git snapshot in memory.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/TomOnTime/utfutil"
	"github.com/argoproj/argo-cd/v3/util/glob"
	"github.com/argoproj/argo-cd/v3/util/io/files"
)

// manifestName is the extension filter: the names Argo CD reads as manifests unless the source
// disables the filter (the extension's case counts; *.libsonnet is only imported).
var manifestName = regexp.MustCompile(`^.*\.(yaml|yml|json|jsonnet)$`)

// skipMarker in a file leaves it out of the render.
const skipMarker = "+argocd:skip-file-rendering"

// MaxCombinedManifestSize is the most bytes the files of a directory source (but its Jsonnet
// files) may hold together: the default of Argo CD's repo-server
// (--max-combined-directory-manifests-size 10M), past which it refuses to render the source.
const MaxCombinedManifestSize = 10_000_000

// manifestFile is one file of a directory source to render.
type manifestFile struct {
	// name is the file's name; rel its path from the repository root; fsPath its path in the
	// Source's file system (a symlink's own path, not its target's).
	name, rel, fsPath string
	// text is the content, decoded from UTF-16 or UTF-8 by its byte order mark; size the
	// file's size in bytes.
	text []byte
	size int64
}

// manifestFiles lists the files of the directory rel that Argo CD reads with opts, in its walk
// order (names in byte order, a subdirectory's files in its place when recursing): those the
// extension filter keeps, regular files (a symlink's target must be one, in the repository),
// not excluded, included when Include is set, and without the skip marker.
func (s Source) manifestFiles(rel string, opts *DirectoryOptions) ([]manifestFile, error) {
	if err := s.checkSymlinks(rel, opts); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.root, rel)
	var out []manifestFile
	var size int64
	add := func(p string, info os.FileInfo) error {
		f, ok, err := s.manifestFile(dir, p, info, opts)
		if err != nil || !ok {
			return err
		}
		if !strings.HasSuffix(f.name, ".jsonnet") { // Jsonnet's memory is Jsonnet's concern, as Argo CD says
			if size += f.size; size > MaxCombinedManifestSize {
				return fmt.Errorf("the files exceed %d bytes together, the most Argo CD's repo-server reads of a directory by default (--max-combined-directory-manifests-size)", MaxCombinedManifestSize)
			}
		}
		out = append(out, f)
		return nil
	}
	if opts.Recurse {
		err := s.fs.Walk(dir, func(p string, info os.FileInfo, err error) error {
			switch {
			case err != nil:
				return err
			case info.IsDir():
				return nil
			}
			return add(p, info)
		})
		return out, err
	}
	names, err := s.fs.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		if s.fs.IsDir(p) {
			continue // a subdirectory, or a symlink to one: never a manifest
		}
		info, err := s.lstat(p)
		if err != nil {
			return nil, err
		}
		if err := add(p, info); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// manifestFile checks one file of the directory dir as Argo CD does before reading it as a
// manifest; ok is false when it is left out.
func (s Source) manifestFile(dir, p string, info os.FileInfo, opts *DirectoryOptions) (f manifestFile, ok bool, err error) {
	name := filepath.Base(p)
	if !opts.DisableExtensionFilter && !manifestName.MatchString(name) {
		return f, false, nil
	}
	fromDir, err := filepath.Rel(dir, p)
	if err != nil {
		return f, false, err
	}
	fromDir = filepath.ToSlash(fromDir)
	if info.Mode()&fs.ModeSymlink != 0 {
		// Only a work tree on disk has symlinks: a Git snapshot leaves them out (gitrepo).
		if info, ok, err = s.symlinkTarget(p, fromDir); err != nil || !ok {
			return f, false, err
		}
	}
	if info.IsDir() || !info.Mode().IsRegular() {
		return f, false, nil
	}
	if opts.Exclude != "" && glob.Match(opts.Exclude, fromDir) {
		return f, false, nil
	}
	if opts.Include != "" && !glob.Match(opts.Include, fromDir) {
		return f, false, nil
	}
	rel, _ := filepath.Rel(s.root, p)
	f = manifestFile{name: name, rel: filepath.ToSlash(rel), fsPath: p}
	data, err := s.fs.ReadFile(p)
	if err != nil {
		return f, false, fmt.Errorf("read %s: %w", f.rel, err)
	}
	f.size = int64(len(data))
	if f.text, err = io.ReadAll(utfutil.BytesReader(data, utfutil.UTF8)); err != nil {
		return f, false, fmt.Errorf("read %s: %w", f.rel, err)
	}
	if bytes.Contains(f.text, []byte(skipMarker)) {
		return f, false, nil
	}
	return f, true, nil
}

// checkSymlinks refuses a directory render of a Git snapshot that would read a symlink: the
// snapshot holds none (gitrepo.Snapshot.Symlinks has their names), while Argo CD's repo-server
// follows one to a file of the repository. Rendering without it would render part of the source
// and report the rest missing. A symlink counts where Argo CD would consider it: in the
// directory (below it too when recursing), passing the extension filter, include and exclude.
func (s Source) checkSymlinks(rel string, opts *DirectoryOptions) error {
	var found []string
	for name := range s.symlinks {
		fromDir := name
		if rel != "." {
			var ok bool
			if fromDir, ok = strings.CutPrefix(name, rel+"/"); !ok {
				continue
			}
		}
		base := path.Base(fromDir)
		switch {
		case !opts.Recurse && strings.Contains(fromDir, "/"):
		case !opts.DisableExtensionFilter && !manifestName.MatchString(base):
		case opts.Exclude != "" && glob.Match(opts.Exclude, fromDir):
		case opts.Include != "" && !glob.Match(opts.Include, fromDir):
		default:
			found = append(found, name)
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.Strings(found)
	return fmt.Errorf("%s is a symlink in Git, which Argo CD's repo-server follows and the auditor's in-process render does not read: "+
		"render this Application with Argo CD's repo-server (--repo-server, the daemon's repoServer)", strings.Join(found, ", "))
}

// symlinkTarget is what a symlink at p (fromDir: its path from the source path) names, as Argo
// CD follows it: a missing target is skipped, one outside the repository an error.
func (s Source) symlinkTarget(p, fromDir string) (os.FileInfo, bool, error) {
	root, err := filepath.EvalSymlinks(s.root)
	if err != nil {
		return nil, false, err
	}
	real, inside, err := files.ResolveInbound(p, root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil // the destination is missing: skipped
	case err != nil:
		return nil, false, fmt.Errorf("failed to evaluate symlink at %q: %w", fromDir, err)
	case !inside:
		return nil, false, fmt.Errorf("illegal filepath in symlink at %q", fromDir)
	}
	info, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("failed to get file info for symlink at %q: %w", fromDir, err)
	}
	return info, true, nil
}

// lstat is p's file info as a walk finds it: a symlink is not followed. The Source's file
// system has no Lstat; its Walk, on disk, is filepath.Walk, which reports a symlink as one.
func (s Source) lstat(p string) (os.FileInfo, error) {
	var info os.FileInfo
	err := s.fs.Walk(p, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		info = fi
		return filepath.SkipDir // p alone, even a directory
	})
	switch {
	case info != nil:
		return info, nil
	case err == nil || errors.Is(err, filepath.SkipDir):
		return nil, fs.ErrNotExist
	}
	return nil, err
}

// repoRel is fsPath's path from the repository root, slash-separated ("../..." outside it).
func (s Source) repoRel(fsPath string) string {
	rel, err := filepath.Rel(s.root, fsPath)
	if err != nil {
		return ".." // not under the root at all
	}
	return path.Clean(filepath.ToSlash(rel))
}
