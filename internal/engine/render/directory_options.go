package render

// An Application's directory options (spec.source.directory), with which Argo CD's repo-server
// reads a directory source: which files (recurse, include, exclude, the extension filter) and how
// its Jsonnet files are evaluated.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
)

// DirectoryOptions are an Application's spec.source.directory. A Source with them (WithDirectory)
// renders the source path as a directory even where it holds a kustomization or a Chart.yaml: a
// source that sets directory names its type, as Argo CD reads it.
type DirectoryOptions struct {
	// Recurse reads the subdirectories of the path too.
	Recurse bool `json:"recurse,omitempty"`
	// Exclude and Include are globs (Argo CD's util/glob, where * also matches /) matched
	// against a file's path from the source path: a file Exclude matches is left out, and so is
	// one Include does not match when Include is set.
	Exclude string `json:"exclude,omitempty"`
	Include string `json:"include,omitempty"`
	// DisableExtensionFilter reads every file, not only *.yaml, *.yml, *.json and *.jsonnet.
	DisableExtensionFilter bool `json:"disableExtensionFilter,omitempty"`
	// Jsonnet are the options every *.jsonnet file is evaluated with.
	Jsonnet JsonnetOptions `json:"jsonnet,omitzero"`
}

// JsonnetOptions are a directory source's jsonnet options.
type JsonnetOptions struct {
	// ExtVars are external variables (std.extVar), TLAs top-level arguments.
	ExtVars []JsonnetVar `json:"extVars,omitempty"`
	TLAs    []JsonnetVar `json:"tlas,omitempty"`
	// Libs are library directories searched for imports, from the repository root.
	Libs []string `json:"libs,omitempty"`
	// Env is Argo CD's build environment (ARGOCD_APP_NAME, ARGOCD_APP_REVISION, ...): $NAME and
	// ${NAME} in the values of ExtVars and TLAs are replaced by its values (an unknown name by
	// nothing), $$ by $.
	Env map[string]string `json:"env,omitempty"`
}

// JsonnetVar is one external variable or top-level argument: a string, or Jsonnet code when Code.
type JsonnetVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Code  bool   `json:"code,omitempty"`
}

// WithDirectory returns the Source rendering an Application's source path with its directory
// options. A Source without them renders a path as Argo CD does when the source names no type:
// kustomize, Helm or a plain directory, by what the path holds.
func (s Source) WithDirectory(d *DirectoryOptions) Source {
	if d == nil {
		return s
	}
	out := s
	out.dirOptions = d
	out.variant = joinVariant(s.variant, "d"+d.digest())
	return out
}

// digest identifies the options (the cache keeps a render under it); "" for none. The build
// environment counts only where a value names it: a revision of its own would otherwise make
// every commit's render a new one.
func (d *DirectoryOptions) digest() string {
	if d == nil {
		return ""
	}
	c := *d
	if !c.Jsonnet.usesEnv() {
		c.Jsonnet.Env = nil
	}
	data, _ := json.Marshal(c)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func (j JsonnetOptions) usesEnv() bool {
	for _, v := range append(append([]JsonnetVar(nil), j.ExtVars...), j.TLAs...) {
		if strings.Contains(v.Value, "$") {
			return true
		}
	}
	return false
}

// value is v's value as the n-th Jsonnet file of a render (from 1) is evaluated with. Argo CD
// v3.6.1 substitutes the build environment into the options in place, once per Jsonnet file it
// evaluates (makeJsonnetVM), so the n-th file gets n substitutions: a $$ left as $ by the first
// is substituted again by the second. The same here.
func (j JsonnetOptions) value(v JsonnetVar, n int) string {
	out := v.Value
	for range n {
		out = os.Expand(out, func(name string) string {
			if name == "$" {
				return "$"
			}
			return j.Env[name]
		})
	}
	return out
}
