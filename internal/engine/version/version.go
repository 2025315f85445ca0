// Package version reports what build of the auditor is running.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Commit is the Git commit the binary was built from; the Makefile sets it with -ldflags -X.
var Commit = "unknown"

// Version is the release the binary was built as; `make release` sets it with -ldflags -X. A
// `go install …@vX.Y.Z` build reports its module version instead.
var Version = ""

// Info describes a build of the auditor.
type Info struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns the build information of the running binary.
func Get() Info {
	info := Info{Module: "github.com/llm-gitops/platform", Version: "(devel)", Commit: Commit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.Module = bi.Main.Path
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && info.Commit == "unknown" {
				info.Commit = s.Value
			}
		}
	}
	if Version != "" { // a stamped release wins over the VCS pseudo-version go build records
		info.Version = Version
	}
	return info
}

// String renders the information on one line, like `kubectl version --client`.
func (i Info) String() string {
	return fmt.Sprintf("auditor %s (module %s, commit %s, %s)", i.Version, i.Module, i.Commit, i.GoVersion)
}
